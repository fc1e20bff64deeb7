/**
 * The PostgreSQL dedup store against a real server: lookups as the SQLite store answers them,
 * cross-instance digest claims, the outbox while the server is away (and across a restart), the
 * crash-recovery tail cut, and the start-up refusals that say what to do.
 */
import { createHash } from "node:crypto";
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ProxyError } from "../../src/core/errors.js";
import { createLogger, silentLogger } from "../../src/core/log.js";
import { Deduplicator } from "../../src/archive/dedup.js";
import type { CapturedMessage } from "../../src/capture/messageCapture.js";
import { DEFAULTS } from "../../src/config/schema.js";
import type { Claim, DedupEntry, DigestKey } from "../../src/dedup/types.js";
import { formatDigest } from "../../src/warc/digest.js";
import { openSharedDatabase, type SharedDatabase } from "../../src/postgres/database.js";
import { PostgresDedupIndex } from "../../src/postgres/dedupIndex.js";
import { Outbox } from "../../src/postgres/outbox.js";
import { ADMIN_PASSWORD, type PostgresServer, freePort, startPostgres } from "../helpers/postgres.js";

let pg: PostgresServer;
beforeAll(async () => {
  pg = await startPostgres();
}, 60_000);
afterAll(() => pg?.destroy());

const digest = (s: string): DigestKey => ({ alg: "sha1", bytes: createHash("sha1").update(s).digest() });

function entry(payload: string, over: Partial<DedupEntry> = {}): DedupEntry {
  return {
    bucket: "default",
    digest: digest(payload),
    url: `http://example.com/${payload}`,
    date: "2026-12-07T01:02:03Z",
    recordId: `<urn:uuid:${createHash("md5").update(payload).digest("hex").replace(/(.{8})(.{4})(.{4})(.{4})(.{12})/, "$1-$2-$3-$4-$5")}>`,
    filename: "a.warc.gz",
    offset: 100,
    length: 50,
    status: 200,
    etag: null,
    lastModified: null,
    ...over,
  };
}

async function open(url: string, instanceId: string, dir = mkdtempSync(join(tmpdir(), "lathe-outbox-"))) {
  const db = await openSharedDatabase(url, "test", { instanceId, log: silentLogger, probeMs: 100 });
  const index = new PostgresDedupIndex(db, new Outbox(join(dir, "outbox.jsonl"), 1 << 20, silentLogger), silentLogger);
  await index.start();
  return { db, index, dir };
}

async function closeAll(...xs: Array<{ db: SharedDatabase; index: PostgresDedupIndex }>) {
  for (const x of xs) {
    await x.index.close();
    await x.db.close();
  }
}

describe("lookups", () => {
  it("finds the most recent entry by digest, by URL and digest, and by URL; buckets are separate", async () => {
    const url = await pg.createDatabase();
    const a = await open(url, "a");
    const long = `http://example.com/${"x".repeat(5000)}`; // longer than a B-tree entry may be
    await a.index.add([entry("p1"), entry("p1", { url: "http://other/", offset: 900 }), entry("p2", { bucket: "b2" }), entry("p3", { url: long, etag: '"e"' })]);
    expect((await a.index.byDigest("default", digest("p1")))!.offset).toBe(900);
    expect((await a.index.byUrlAndDigest("default", "http://example.com/p1", digest("p1")))!.offset).toBe(100);
    expect(await a.index.byDigest("default", digest("p2"))).toBeNull();
    expect((await a.index.byDigest("b2", digest("p2")))!.bucket).toBe("b2");
    const byUrl = await a.index.byUrl("default", long, 5);
    expect(byUrl).toHaveLength(1);
    expect(byUrl[0]).toEqual(entry("p3", { url: long, etag: '"e"' }));
    await a.index.start(); // counts again
    expect(a.index.count()).toBe(4);
    await closeAll(a);
  });

  it("a second instance sees the first one's entries", async () => {
    const url = await pg.createDatabase();
    const a = await open(url, "a");
    const b = await open(url, "b");
    await a.index.add([entry("shared")]);
    expect(await b.index.byDigest("default", digest("shared"))).toEqual(entry("shared"));
    await closeAll(a, b);
  });

  it("removeFileTail removes only the entries at or past the cut", async () => {
    const url = await pg.createDatabase();
    const a = await open(url, "a");
    await a.index.add([entry("k1", { offset: 10 }), entry("k2", { offset: 500 }), entry("k3", { offset: 900, filename: "other.warc.gz" })]);
    expect(await a.index.removeFileTail("a.warc.gz", 400)).toBe(1);
    expect(await a.index.byDigest("default", digest("k1"))).not.toBeNull();
    expect(await a.index.byDigest("default", digest("k2"))).toBeNull();
    expect(await a.index.byDigest("default", digest("k3"))).not.toBeNull();
    await closeAll(a);
  });
});

describe("claims", () => {
  it("one instance wins a digest; the other waits until it lets go, then finds the entry", async () => {
    const url = await pg.createDatabase();
    const a = await open(url, "a");
    const b = await open(url, "b");
    const claimA = await a.index.claim(digest("c1"), 1000);
    expect(claimA.kind).toBe("mine");
    const waiting = b.index.claim(digest("c1"), 5000);
    await new Promise((r) => setTimeout(r, 150));
    await a.index.add([entry("c1")]);
    if (claimA.kind === "mine") claimA.release();
    const t0 = Date.now();
    expect((await waiting).kind).toBe("settled");
    expect(Date.now() - t0).toBeLessThan(1000);
    expect(await b.index.byDigest("default", digest("c1"))).not.toBeNull();
    await closeAll(a, b);
  });

  it("a claim that is not let go in time leaves the other undecided after its wait", async () => {
    const url = await pg.createDatabase();
    const a = await open(url, "a");
    const b = await open(url, "b");
    expect((await a.index.claim(digest("c2"), 100)).kind).toBe("mine");
    const t0 = Date.now();
    expect((await b.index.claim(digest("c2"), 300)).kind).toBe("undecided");
    expect(Date.now() - t0).toBeGreaterThanOrEqual(290);
    // An expired claim is taken over.
    await pg.query("UPDATE dedup_claims SET expires_at = now() - interval '1 second'", [], url.split("/").pop());
    expect((await b.index.claim(digest("c2"), 100)).kind).toBe("mine");
    await closeAll(a, b);
  });
});

describe("claims in the dedup decision", () => {
  /** The response head and digest a decision looks at (a 200 of 20,000 bytes). */
  const response = (payload: string) =>
    ({ status: 200, bodyLength: 20_000, truncated: null, payloadDigest: formatDigest("sha1", digest(payload).bytes), headFields: [] }) as unknown as CapturedMessage;

  it("an original added and let go by another instance between this one's lookup and its claim: a revisit, not a second original", async () => {
    const url = await pg.createDatabase();
    const a = await open(url, "a");
    const b = await open(url, "b");
    // The real store of B, except that A finishes its original just before B's claim reaches the
    // server: the window that made two originals of one payload in a CI run.
    const realClaim = b.index.claim.bind(b.index);
    b.index.claim = async (key: DigestKey, waitMs: number): Promise<Claim> => {
      const claimA = await a.index.claim(key, 1000);
      expect(claimA.kind).toBe("mine");
      await a.index.add([entry("race", { url: "http://example.com/from-a" })]);
      if (claimA.kind === "mine") claimA.release();
      await new Promise((r) => setTimeout(r, 50)); // the release is sent without waiting
      return realClaim(key, waitMs);
    };
    const decision = await new Deduplicator(b.index, silentLogger).decide("http://example.com/from-b", {} as CapturedMessage, response("race"), DEFAULTS.dedup);
    expect(decision.revisit?.refersToTargetUri).toBe("http://example.com/from-a");
    // B lets go of the claim it took (sent without waiting): nobody else is held up by it.
    const claims = async () => (await pg.query<{ n: number }>("SELECT count(*)::int AS n FROM dedup_claims", [], url.split("/").pop()))[0]!.n;
    for (const t0 = Date.now(); (await claims()) > 0 && Date.now() - t0 < 2000; ) await new Promise((r) => setTimeout(r, 20));
    expect(await claims()).toBe(0);
    await closeAll(a, b);
  });
});

describe("the server away", () => {
  it("lookups fail at once, entries queue on disk, and land in order when the server is back", async () => {
    const url = await pg.createDatabase();
    const dbName = url.split("/").pop();
    const a = await open(url, "a");
    const outbox = join(a.dir, "outbox.jsonl");
    pg.stop();
    try {
      await expect(a.index.byDigest("default", digest("d0"))).rejects.toThrow(ProxyError);
      expect(a.db.up).toBe(false);
      const t0 = Date.now();
      await expect(a.index.byDigest("default", digest("d0"))).rejects.toMatchObject({ code: "ERR_SHARED_UNAVAILABLE" });
      expect(Date.now() - t0).toBeLessThan(50); // no connect timeout per lookup
      expect((await a.index.claim(digest("d0"), 1000)).kind).toBe("undecided");
      for (let i = 0; i < 20; i++) await a.index.add([entry(`d${i}`)]);
      expect(readFileSync(outbox, "utf8").trim().split("\n")).toHaveLength(20);
      expect(a.index.report()).toMatchObject({ reachable: false, queuedEntries: 20 });
      expect(JSON.stringify(a.index.report())).not.toContain(ADMIN_PASSWORD);
    } finally {
      pg.start();
    }
    await expect.poll(() => a.db.up, { timeout: 10_000 }).toBe(true);
    const rows = await pg.query<{ url: string }>("SELECT url FROM dedup_entries ORDER BY seq", [], dbName);
    expect(rows.map((r) => r.url)).toEqual(Array.from({ length: 20 }, (_, i) => `http://example.com/d${i}`));
    expect(existsSync(outbox) ? readFileSync(outbox, "utf8") : "").toBe("");
    expect(a.index.report()).toMatchObject({ reachable: true, queuedEntries: 0, queuedBytes: 0 });
    await closeAll(a);
  }, 30_000);

  it("entries queued before a restart land at the next start; a torn last line is skipped", async () => {
    const url = await pg.createDatabase();
    const dbName = url.split("/").pop();
    const dir = mkdtempSync(join(tmpdir(), "lathe-outbox-"));
    const box = new Outbox(join(dir, "outbox.jsonl"), 1 << 20, silentLogger);
    box.append([entry("r1")]);
    box.append([entry("r2"), entry("r3")]);
    writeFileSync(join(dir, "outbox.jsonl"), readFileSync(join(dir, "outbox.jsonl"), "utf8") + '[{"bucket":"default","dig');
    const a = await open(url, "a", dir);
    const rows = await pg.query<{ url: string }>("SELECT url FROM dedup_entries ORDER BY seq", [], dbName);
    expect(rows.map((r) => r.url)).toEqual(["r1", "r2", "r3"].map((p) => `http://example.com/${p}`));
    await closeAll(a);
  });

  it("a full outbox drops further entries and says so", async () => {
    const dir = mkdtempSync(join(tmpdir(), "lathe-outbox-"));
    const lines: string[] = [];
    const box = new Outbox(join(dir, "outbox.jsonl"), 600, createLogger({ level: "debug", json: true, write: (l) => lines.push(l) }));
    let kept = 0;
    for (let i = 0; i < 10; i++) if (box.append([entry(`f${i}`)])) kept++;
    expect(kept).toBeGreaterThan(0);
    expect(kept).toBeLessThan(10);
    expect(box.report().droppedEntries).toBe(10 - kept);
    expect(lines.filter((l) => JSON.parse(l).event === "dedup-outbox-full")).toHaveLength(1);
  });
});

describe("start-up refusals", () => {
  const refused = async (url: string) => {
    const e = await openSharedDatabase(url, "shared.postgresql", { instanceId: "x", log: silentLogger }).then(
      () => null,
      (err: unknown) => err,
    );
    expect(e).toBeInstanceOf(ProxyError);
    expect((e as ProxyError).code).toBe("ERR_CONFIG");
    expect((e as ProxyError).message).not.toContain(ADMIN_PASSWORD);
    return (e as ProxyError).message;
  };

  it("names an unreachable server, a failed login, a missing database, a malformed URL", async () => {
    expect(await refused(`postgresql://u:${ADMIN_PASSWORD}@127.0.0.1:${await freePort()}/db`)).toMatch(/unreachable.*start the server/);
    expect(await refused(pg.url("postgres", "lathe_admin", "wrong-password"))).toMatch(/authentication failed for user "lathe_admin"/);
    expect(await refused(pg.url("no_such_db"))).toMatch(/database "no_such_db" does not exist: create it first/);
    expect(await refused(`mysql://u:${ADMIN_PASSWORD}@h/db`)).toMatch(/not a PostgreSQL connection URL: the scheme is mysql/);
    expect(await refused(`postgresql://u:${ADMIN_PASSWORD}@127.0.0.1:5432/`)).toMatch(/names no database/);
  });

  it("refuses a newer schema, a database that is not lathe's, and a read-only role", async () => {
    const newer = await pg.createDatabase();
    await (await open(newer, "a")).db.close();
    await pg.query("UPDATE lathe_schema SET version = 99", [], newer.split("/").pop());
    expect(await refused(newer)).toMatch(/schema version 99 .*newer than lathe .* understands \(version 1\): run a newer lathe/);

    const foreign = await pg.createDatabase();
    await pg.query("CREATE TABLE dedup_entries (x int)", [], foreign.split("/").pop());
    expect(await refused(foreign)).toMatch(/not a lathe database/);

    const ro = await pg.createDatabase();
    const roDb = ro.split("/").pop()!;
    await (await open(ro, "a")).db.close();
    await pg.query("CREATE ROLE reader LOGIN PASSWORD 'reader-secret'");
    await pg.query("GRANT SELECT ON ALL TABLES IN SCHEMA public TO reader", [], roDb);
    const message = await refused(pg.url(roDb, "reader", "reader-secret"));
    expect(message).toMatch(/may not write .*dedup_entries.*read-only role\?\): GRANT SELECT, INSERT, UPDATE, DELETE/);
    expect(message).not.toContain("reader-secret");
  });
});
