import { describe, expect, it } from "vitest";
import { spawn } from "node:child_process";
import http from "node:http";
import { mkdtempSync, openSync, readSync, closeSync, readdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { gunzipSync } from "node:zlib";
import Database from "better-sqlite3";
import { startHttpOrigin } from "../helpers/origin.js";
import { startTestLathe } from "../helpers/lathe.js";
import { checkDigests, readAllWarcs } from "../helpers/warcs.js";
import { unpackRecordId } from "../../src/dedup/sqliteKeys.js";

const BIN = new URL("../../bin/lathe.js", import.meta.url).pathname;

/** Start `lathe serve` as a child process and resolve with its port once it listens. */
function serve(dir: string, certs: string): Promise<{ proc: ReturnType<typeof spawn>; port: number }> {
  const proc = spawn(process.execPath, [BIN, "serve", "--port", "0", "--control-port", "0", "--dir", dir, "--certs", certs], { stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`no start: ${out}`)), 20000);
    proc.stdout!.on("data", (d) => {
      out += d;
      const m = /listening on http:\/\/127\.0\.0\.1:(\d+)/.exec(out);
      if (m) {
        clearTimeout(t);
        resolve({ proc, port: Number(m[1]) });
      }
    });
    proc.stderr!.on("data", (d) => (out += d));
  });
}

/** Bounded load: 4 workers, fetching duplicate and unique payloads until `stop()` or 300 requests. */
function load(port: number, originUrl: string) {
  let stopped = false;
  let n = 0;
  const agent = new http.Agent({ keepAlive: true, maxSockets: 4 });
  const one = (path: string) =>
    new Promise<void>((resolve) => {
      const req = http.get({ host: "127.0.0.1", port, path: `${originUrl}${path}`, agent }, (res) => {
        res.resume();
        res.on("end", resolve);
        res.on("error", () => resolve());
      });
      req.on("error", () => resolve());
    });
  const worker = async (w: number) => {
    while (!stopped && n < 300) {
      const i = n++;
      await one(i % 3 === 0 ? `/bytes/${20000 + i}` : `/bytes/50000?dup=${w}-${i}`);
    }
  };
  const done = Promise.all([0, 1, 2, 3].map(worker));
  return {
    stop: async () => {
      stopped = true;
      agent.destroy();
      await done;
    },
  };
}

describe("kill -9 under load, then restart", () => {
  it("recovers every .open file; every record reads back; no dedup entry points at a missing record", async () => {
    const origin = await startHttpOrigin();
    const dir = mkdtempSync(join(tmpdir(), "lathe-crash-"));
    const certs = mkdtempSync(join(tmpdir(), "lathe-crash-certs-"));
    try {
      for (let round = 0; round < 3; round++) {
        const { proc, port } = await serve(dir, certs);
        const l = load(port, origin.url);
        await new Promise((r) => setTimeout(r, 150 + Math.floor(Math.random() * 500)));
        const exited = new Promise((r) => proc.on("exit", r));
        proc.kill("SIGKILL");
        await exited;
        await l.stop();
      }
      // The kill left the file being written as `.open`; a last start recovers it, then stops cleanly.
      expect(readdirSync(dir).filter((f) => f.endsWith(".warc.gz.open")).length).toBeGreaterThan(0);
      const lathe = await startTestLathe({ warc: { dir } }, { certsDir: certs });
      await lathe.stop();
      expect(readdirSync(dir).filter((f) => f.endsWith(".open"))).toEqual([]);
      const recs = await readAllWarcs(dir);
      expect(recs.length).toBeGreaterThan(0);
      for (const r of recs) expect(checkDigests(r)).toEqual([]);
      const ids = new Set(recs.map((r) => r.get("WARC-Record-ID")));

      const db = new Database(join(dir, "lathe-dedup.sqlite3"), { readonly: true });
      const rows = (db.prepare("SELECT e.record_id AS id, f.name AS file, e.offset AS offset, e.length AS length FROM entries e JOIN files f ON f.id = e.file").all() as Array<{ id: unknown; file: string; offset: number; length: number }>).map((r) => ({ ...r, id: unpackRecordId(r.id)! }));
      db.close();
      expect(rows.length).toBeGreaterThan(0);
      for (const row of rows) {
        expect(ids.has(row.id), row.id).toBe(true);
        const fd = openSync(join(dir, row.file), "r");
        const buf = Buffer.alloc(row.length);
        readSync(fd, buf, 0, row.length, row.offset);
        closeSync(fd);
        expect(gunzipSync(buf).toString("latin1")).toContain(`WARC-Record-ID: ${row.id}\r\n`);
      }
    } finally {
      await origin.close();
    }
  });
});
