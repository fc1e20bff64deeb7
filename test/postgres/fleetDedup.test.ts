/**
 * A fleet of real `lathe serve` processes sharing one real PostgreSQL: revisits across instances
 * that resolve to records on disk, in-flight claims between instances, the server stopped and
 * started under load, and an instance killed with SIGKILL under load.
 */
import { closeSync, openSync, readSync, readdirSync } from "node:fs";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { gunzipSync } from "node:zlib";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { viaProxy } from "../helpers/client.js";
import { type Origin, startHttpOrigin } from "../helpers/origin.js";
import { type PostgresServer, startPostgres } from "../helpers/postgres.js";
import { type ServeProcess, startServe } from "../helpers/serve.js";
import { type ReadRecord, checkDigests, readAllWarcs } from "../helpers/warcs.js";

let pg: PostgresServer;
let origin: Origin;
beforeAll(async () => {
  pg = await startPostgres();
  origin = await startHttpOrigin();
}, 60_000);
afterAll(async () => {
  await origin?.close();
  pg?.destroy();
});

const tmp = (p: string) => mkdtempSync(join(tmpdir(), p));

/** One instance: its own WARC and CA directories, the shared database by flag or by environment. */
async function instance(url: string, how: "flag" | "env" = "flag", dir = tmp("lathe-fleet-warcs-"), control = false): Promise<ServeProcess & { dir: string }> {
  const args = ["--port", "0", control ? "--control-port=0" : "--control-port=-1", "--dir", dir, "--certs", tmp("lathe-fleet-certs-")];
  const p = how === "flag" ? await startServe([...args, "--postgresql", url]) : await startServe(args, { LATHE_POSTGRESQL: url });
  return Object.assign(p, { dir });
}

const fetchVia = (p: ServeProcess, path: string) => viaProxy(p.proxyUrl, `${origin.url}${path}`);
const primaries = (rs: ReadRecord[]) => rs.filter((r) => r.type === "response" || r.type === "revisit");
const dbOf = (url: string) => url.split("/").pop()!;

/** Every revisit refers to a response record that is in one of `all`, with the same payload digest. */
function expectRevisitsResolve(revisits: ReadRecord[], all: ReadRecord[]) {
  for (const r of revisits) {
    const original = all.find((x) => x.type === "response" && x.get("WARC-Record-ID") === r.get("WARC-Refers-To"));
    expect(original, `revisit of ${r.get("WARC-Target-URI")} refers to a record on disk`).toBeDefined();
    expect(original!.get("WARC-Payload-Digest")).toBe(r.get("WARC-Payload-Digest"));
    expect(r.get("WARC-Refers-To-Target-URI")).toBe(original!.get("WARC-Target-URI"));
    expect(r.get("WARC-Refers-To-Date")).toBe(original!.get("WARC-Date"));
  }
}

/** Every entry of the shared store points at the gzip member of its record, in a file in one of `dirs`. */
async function expectEntriesOnDisk(url: string, dirs: string[]) {
  const rows = await pg.query<{ filename: string; file_offset: string; record_length: string; record_id: string }>(
    "SELECT filename, file_offset, record_length, record_id FROM dedup_entries",
    [],
    dbOf(url),
  );
  for (const e of rows) {
    const dir = dirs.find((d) => readdirSync(d).includes(e.filename));
    expect(dir, `${e.filename} (entry for ${e.record_id}) is on disk`).toBeDefined();
    const fd = openSync(join(dir!, e.filename), "r");
    const buf = Buffer.alloc(Number(e.record_length));
    expect(readSync(fd, buf, 0, buf.length, Number(e.file_offset))).toBe(buf.length);
    closeSync(fd);
    expect(gunzipSync(buf).toString("latin1")).toContain(`WARC-Record-ID: ${e.record_id}\r\n`);
  }
  return rows.length;
}

describe("dedup across instances", () => {
  it("a payload archived by A is a revisit when B and C capture it; every revisit resolves to A's record", async () => {
    const url = await pg.createDatabase();
    const [a, b, c] = [await instance(url), await instance(url, "env"), await instance(url)];
    try {
      expect(a.out()).toMatch(/shared store: postgresql:\/\/lathe_admin:\*\*\*@127\.0\.0\.1/);
      expect(a.out()).not.toContain("pg-admin-secret");
      expect((await fetchVia(a, "/bytes/20000?a")).status).toBe(200);
      expect((await fetchVia(b, "/bytes/20000?b")).status).toBe(200);
      expect((await fetchVia(c, "/bytes/20000?c")).status).toBe(200);
    } finally {
      await Promise.all([a.stop(), b.stop(), c.stop()]);
    }
    const [ra, rb, rc] = [await readAllWarcs(a.dir), await readAllWarcs(b.dir), await readAllWarcs(c.dir)];
    const all = [...ra, ...rb, ...rc];
    for (const r of all) expect(checkDigests(r)).toEqual([]);
    expect(primaries(ra).map((r) => r.type)).toEqual(["response"]);
    expect(primaries(rb).map((r) => r.type)).toEqual(["revisit"]);
    expect(primaries(rc).map((r) => r.type)).toEqual(["revisit"]);
    expectRevisitsResolve([...primaries(rb), ...primaries(rc)], all);
    // File names carry host name and port: unique across the instances of a fleet.
    const names = [a, b, c].flatMap((p) => readdirSync(p.dir).filter((f) => f.endsWith(".warc.gz")));
    expect(new Set(names.map((n) => n.replace(/^.*-(\d+)\.warc\.gz$/, "$1"))).size).toBe(3);
    expect(await expectEntriesOnDisk(url, [a.dir, b.dir, c.dir])).toBe(1);
  }, 90_000);

  it("identical payloads captured by two instances at the same moment give one original and one revisit", async () => {
    const url = await pg.createDatabase();
    const [a, b] = [await instance(url), await instance(url)];
    const sizes = [31, 32, 33, 34, 35, 36];
    try {
      // Each pair ends together (/slow/N sends N bytes 20 ms apart), so the two decisions overlap.
      const answers = await Promise.all(sizes.flatMap((n) => [fetchVia(a, `/slow/${n}?a`), fetchVia(b, `/slow/${n}?b`)]));
      expect(answers.every((r) => r.status === 200)).toBe(true);
    } finally {
      await Promise.all([a.stop(), b.stop()]);
    }
    const all = [...(await readAllWarcs(a.dir)), ...(await readAllWarcs(b.dir))];
    for (const n of sizes) {
      const pair = primaries(all).filter((r) => new URL(r.get("WARC-Target-URI")!).pathname === `/slow/${n}`);
      expect(pair.map((r) => r.type).sort(), `/slow/${n}`).toEqual(["response", "revisit"]);
    }
    expectRevisitsResolve(primaries(all).filter((r) => r.type === "revisit"), all);
  }, 90_000);
});

describe("start-up", () => {
  it("lathe serve refuses a missing database and a malformed URL, saying what to do, password masked", async () => {
    for (const [url, message] of [
      [pg.url("no_such_database"), /database "no_such_database" does not exist: create it first/],
      ["postgresql://lathe_admin:pg-admin-secret@127.0.0.1:1", /names no database/],
    ] as const) {
      const failed = await instance(url).then(
        async (p) => {
          await p.stop();
          return "";
        },
        (e: Error) => e.message,
      );
      expect(failed).toMatch(/lathe serve exited [1-9]/);
      expect(failed).toMatch(message);
      expect(failed).not.toContain("pg-admin-secret");
    }
  });
});

describe("faults", () => {
  it("PostgreSQL stopped under load and started again: no client error, every response archived, queued entries land, dedup resumes", async () => {
    const url = await pg.createDatabase();
    const a = await instance(url, "flag", undefined, true);
    const dedupStatus = async () => ((await (await fetch(`${a.controlUrl}/api/v1/status`)).json()) as { dedup: Record<string, unknown> }).dedup;
    const statuses: number[] = [];
    const paths: string[] = [];
    try {
      // 120 requests, 4 at a time; the server stops after 30 and is back after 80.
      for (let i = 0; i < 120; i += 4) {
        if (i === 32) pg.stop();
        if (i === 60) {
          const status = await dedupStatus();
          expect(status).toMatchObject({ engine: "postgresql", reachable: false, queuedEntries: expect.any(Number) });
          expect(JSON.stringify(status)).not.toContain("pg-admin-secret");
        }
        if (i === 80) pg.start();
        const batch = [0, 1, 2, 3].map((k) => `/bytes/${3000 + ((i + k) % 40)}?n=${i + k}`);
        paths.push(...batch);
        statuses.push(...(await Promise.all(batch.map((p) => fetchVia(a, p)))).map((r) => r.status));
      }
      expect(statuses.every((s) => s === 200)).toBe(true);
      // Dedup resumes: once the outbox has drained, a payload seen before is a revisit again.
      await expect.poll(dedupStatus, { timeout: 15_000 }).toMatchObject({ reachable: true, queuedEntries: 0, queuedBytes: 0 });
      expect((await fetchVia(a, "/bytes/3005?after")).status).toBe(200);
    } finally {
      pg.start();
      await a.stop();
    }
    const records = await readAllWarcs(a.dir);
    for (const r of records) expect(checkDigests(r)).toEqual([]);
    const uris = primaries(records).map((r) => new URL(r.get("WARC-Target-URI")!).search);
    for (const p of paths) expect(uris).toContain(new URL(p, "http://x").search);
    const after = primaries(records).find((r) => r.get("WARC-Target-URI")!.endsWith("?after"))!;
    expect(after.type).toBe("revisit");
    expectRevisitsResolve(primaries(records).filter((r) => r.type === "revisit"), records);
    await expectEntriesOnDisk(url, [a.dir]);
  }, 120_000);

  it("an instance killed with SIGKILL under load leaves no entry pointing at a record that is not on disk", async () => {
    const url = await pg.createDatabase();
    const dir = tmp("lathe-fleet-warcs-");
    const a = await instance(url, "flag", dir);
    let sent = 0;
    const load = (async () => {
      for (let i = 0; i < 400; i++) {
        sent++;
        await Promise.all([0, 1, 2, 3].map((k) => fetchVia(a, `/bytes/${2000 + i * 4 + k}`).catch(() => null)));
      }
    })();
    await expect.poll(() => sent, { timeout: 20_000 }).toBeGreaterThan(20);
    a.proc.kill("SIGKILL");
    await load;
    // The next start recovers the .open file (torn tail cut, entries past it removed).
    const again = await instance(url, "flag", dir);
    await again.stop();
    expect(await expectEntriesOnDisk(url, [dir])).toBeGreaterThan(0);
  }, 120_000);
});
