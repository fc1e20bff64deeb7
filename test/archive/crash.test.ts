/**
 * kill -9 at any moment under load, then restart (issue #7, warc-files.md §6–7; issue #26): lathe
 * runs as a child process with small files (so kills also land around rollovers); a load of
 * unique and duplicate payloads runs while it is killed several times. After each kill a new
 * lathe starts on the same directory and, before any new traffic, the test checks: every `.open`
 * file was recovered (renamed, a `warc-recovered` note logged for it, a torn gzip member the test
 * appended cut away), every record reads back with valid digests, and no dedup or CDXJ index
 * entry points at a record that is not on disk.
 *
 * `strict` durability: every response a client received completely is in the WARCs byte-exact.
 * `rollover` (the default): the captures not yet written at the instant of the kill are lost
 * (their records were still in lathe's memory: the writer's backlog), and only those: each one
 * missing was received shortly before the kill. The most missing after one kill is printed.
 */
import { describe, expect, it } from "vitest";
import { spawn, type ChildProcess } from "node:child_process";
import http from "node:http";
import { appendFileSync, existsSync, mkdtempSync, readdirSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { gzipSync } from "node:zlib";
import { startHttpOrigin } from "../helpers/origin.js";
import { checkArchive, sha1, type Received } from "../helpers/archiveCheck.js";

const BIN = new URL("../../bin/lathe.js", import.meta.url).pathname;

interface Served {
  proc: ChildProcess;
  port: number;
  /** JSON log lines so far. */
  logs: Array<Record<string, unknown>>;
}

/** Start `lathe serve` as a child process (JSON logs) and resolve with its port once it listens. */
function serve(dir: string, certs: string, configFile: string): Promise<Served> {
  const proc = spawn(process.execPath, [BIN, "serve", "--port", "0", "--control-port=-1", "--dir", dir, "--certs", certs, "--config", configFile, "--json-logs"], { stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  let err = "";
  const logs: Served["logs"] = [];
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`no start: ${out}${err}`)), 20000);
    proc.stderr!.on("data", (d) => {
      err += d;
      const lines = err.split("\n");
      err = lines.pop()!;
      for (const l of lines) {
        try {
          logs.push(JSON.parse(l));
        } catch {
          /* not a log line */
        }
      }
    });
    proc.stdout!.on("data", (d) => {
      out += d;
      const m = /listening on http:\/\/127\.0\.0\.1:(\d+)/.exec(out);
      if (m) {
        clearTimeout(t);
        resolve({ proc, port: Number(m[1]), logs });
      }
    });
    proc.on("exit", (code) => reject(new Error(`exited ${code}: ${out}${err}`)));
  });
}

/**
 * Load with 4 workers (LATHE_CRASH_WORKERS: more, to measure what a kill loses under heavier
 * load) of unique and duplicate payloads until `stop()`; records complete answers.
 */
const WORKERS = Number(process.env.LATHE_CRASH_WORKERS ?? 4);

function load(port: number, originUrl: string, round: number, received: Received[]) {
  let stopped = false;
  let n = 0;
  const agent = new http.Agent({ keepAlive: true, maxSockets: WORKERS });
  const one = (url: string) =>
    new Promise<void>((resolve) => {
      const req = http.get({ host: "127.0.0.1", port, path: url, agent }, (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => {
          if (res.complete && res.statusCode === 200) received.push({ url, sha1: sha1(Buffer.concat(chunks)), at: Date.now() });
          resolve();
        });
        res.on("error", () => resolve());
        res.on("aborted", () => resolve());
      });
      req.on("error", () => resolve());
    });
  const worker = async (w: number) => {
    while (!stopped && n < 2000) {
      const i = n++;
      const path = i % 3 === 0 ? `/bytes/${20000 + (i % 500)}` : i % 3 === 1 ? `/bytes/50000` : `/text/${3000 + (i % 200)}`;
      await one(`${originUrl}${path}${path.includes("?") ? "&" : "?"}r=${round}-${w}-${i}`);
    }
  };
  const done = Promise.all(Array.from({ length: WORKERS }, (_, w) => worker(w)));
  return {
    count: () => n,
    stop: async () => {
      stopped = true;
      agent.destroy();
      await done;
    },
  };
}

/** rollover: a capture lost by a kill was received by its client at most this long before the kill. */
const RECENT_MS = 3000;

describe.each(["strict", "rollover"] as const)("kill -9 under load, then restart (%s durability)", (durability) => {
  it("recovers every .open file after each of 4 kills; what was written before each kill reads back; no dedup or index entry dangles", async () => {
    const origin = await startHttpOrigin();
    const dir = mkdtempSync(join(tmpdir(), "lathe-crash-"));
    const certs = mkdtempSync(join(tmpdir(), "lathe-crash-certs-"));
    const configFile = join(mkdtempSync(join(tmpdir(), "lathe-crash-conf-")), "proxy.config.json");
    writeFileSync(configFile, JSON.stringify({ warc: { durability, maxFileBytes: 3_000_000 } }));
    const seed = Number(process.env.LATHE_CRASH_SEED ?? Date.now() % 100000);
    let x = seed;
    const rand = () => ((x = (x * 1103515245 + 12345) % 2147483648), x / 2147483648);
    const received: Received[] = [];
    let recovered = 0;
    let torn = 0;
    const lostPerKill: number[] = [];
    let oldestLostMs = 0;
    let lathe: Served | null = null;
    try {
      lathe = await serve(dir, certs, configFile);
      for (let round = 0; round < 4; round++) {
        const l = load(lathe.port, origin.url, round, received);
        // Kill at a random moment 300–1500 ms into the load (after at least some traffic).
        await new Promise((r) => setTimeout(r, 300 + Math.floor(rand() * 1200)));
        const exited = new Promise((r) => lathe!.proc.on("exit", r));
        const killedAt = Date.now();
        lathe.proc.kill("SIGKILL");
        await exited;
        await l.stop();
        expect(l.count(), `round ${round}: the load ran`).toBeGreaterThan(5);

        // What the kill left: `.open` WARCs; make one end in a torn gzip member (a write cut short).
        const open = readdirSync(dir).filter((f) => /\.warc\.gz\.open$/.test(f));
        const sizes = new Map(open.map((f) => [f, statSync(join(dir, f)).size]));
        if (open.length > 0) {
          const member = gzipSync(Buffer.from("WARC/1.1\r\nWARC-Type: resource\r\nContent-Length: 4000\r\n\r\n" + "x".repeat(4000)));
          appendFileSync(join(dir, open[0]!), member.subarray(0, Math.floor(member.length / 2)));
          torn++;
        }

        lathe = await serve(dir, certs, configFile);
        const notes = lathe.logs.filter((e) => e.event === "warc-recovered");
        for (const f of open) {
          const note = notes.find((e) => e.file === f || e.file === f.replace(/\.open$/, ""));
          expect(note, `round ${round}: a warc-recovered note for ${f} (seed ${seed})`).toBeDefined();
          const final = join(dir, f.replace(/\.open$/, ""));
          if (note!.deleted) continue;
          expect(existsSync(final), `${f} renamed to its final name`).toBe(true);
          // The torn member (and any torn tail of lathe's own) is cut away: never longer than before.
          expect(statSync(final).size).toBeLessThanOrEqual(sizes.get(f)!);
          if (f === open[0]) expect(Number(note!.droppedBytes)).toBeGreaterThan(0);
        }
        recovered += open.length;
        const c = await checkArchive(dir, received, { allowMissing: durability === "rollover" });
        expect(c.records, `seed ${seed}`).toBeGreaterThan(0);
        // Lost to the kill: only captures not yet written at that instant, received just before it.
        for (const g of c.missing) expect(killedAt - g.at!, `${g.url} lost by the kill of round ${round} (seed ${seed})`).toBeLessThanOrEqual(RECENT_MS);
        lostPerKill.push(c.missing.length);
        for (const g of c.missing) oldestLostMs = Math.max(oldestLostMs, killedAt - g.at!);
        received.splice(0, received.length, ...received.filter((g) => !c.missing.includes(g)));
      }
      // Last run: stop gracefully and check once more.
      const exited = new Promise((r) => lathe!.proc.on("exit", r));
      lathe.proc.kill("SIGTERM");
      await exited;
      lathe = null;
      const c = await checkArchive(dir, received);
      const summary = `crash test (${durability}, ${WORKERS} clients): seed ${seed}, ${received.length} complete answers archived, lost per kill ${JSON.stringify(lostPerKill)} (received at most ${oldestLostMs} ms before the kill), ${recovered} .open files recovered, ${c.records} records, ${c.dedupRows} dedup rows, ${c.cdxLines} index lines`;
      console.log(summary);
      expect(received.length).toBeGreaterThan(40);
      expect(recovered, "kills under load left .open files to recover").toBeGreaterThan(0);
      expect(torn).toBeGreaterThan(0);
      expect(c.dedupRows).toBeGreaterThan(0);
      expect(c.cdxLines).toBeGreaterThan(0);
    } finally {
      lathe?.proc.kill("SIGKILL");
      await origin.close();
    }
  }, 120_000);
});
