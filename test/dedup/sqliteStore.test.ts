import { spawn } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import Database from "better-sqlite3";
import { afterAll, describe, expect, it } from "vitest";
import { ProxyError } from "../../src/core/errors.js";
import { createLogger } from "../../src/core/log.js";
import { parseDigest } from "../../src/dedup/digestKey.js";
import { APPLICATION_ID, openSqliteDedupStore, SCHEMA_VERSION } from "../../src/dedup/sqliteStore.js";
import type { DedupEntry, DedupStore, DigestKey } from "../../src/dedup/types.js";
import { base32 } from "../../src/warc/digest.js";
import { batchSize, entryFor } from "./fixtures/killEntries.mjs";

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});
function tempDir(): string {
  const d = mkdtempSync(join(tmpdir(), "lathe-dedup-test-"));
  dirs.push(d);
  return d;
}
function dbFile(): string {
  return join(tempDir(), "lathe-dedup.sqlite3");
}

const sha1 = (s: string): DigestKey => ({ alg: "sha1", bytes: createHash("sha1").update(s).digest() });
const sha256 = (s: string): DigestKey => ({ alg: "sha256", bytes: createHash("sha256").update(s).digest() });

let n = 0;
function entry(over: Partial<DedupEntry> = {}): DedupEntry {
  n++;
  return {
    bucket: "default",
    digest: sha1(`payload ${n}`),
    url: `https://example.com/${n}`,
    date: `2024-05-01T12:00:${String(n % 60).padStart(2, "0")}Z`,
    recordId: `<urn:uuid:00000000-0000-4000-8000-${n.toString(16).padStart(12, "0")}>`,
    filename: "lathe-20240501120000000-00000-test.warc.gz",
    offset: n * 1000,
    length: 999,
    status: 200,
    etag: null,
    lastModified: null,
    ...over,
  };
}

function errorOf(fn: () => unknown): ProxyError {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(ProxyError);
    return e as ProxyError;
  }
  throw new Error("expected an error");
}

function withStore<T>(path: string, fn: (s: DedupStore) => T): T {
  const s = openSqliteDedupStore(path);
  try {
    return fn(s);
  } finally {
    s.close();
  }
}

/** Raw SQL view of a store file, read-only. */
function raw<T>(path: string, fn: (db: Database.Database) => T): T {
  const db = new Database(path, { readonly: true });
  try {
    return fn(db);
  } finally {
    db.close();
  }
}

/** Rows in each table, and the counters kept in `state`: all must agree. */
function tableCounts(path: string): { entries: number; byDigest: number; byUrl: number; state: number } {
  return raw(path, (db) => {
    const count = (t: string) => db.prepare(`SELECT count(*) FROM ${t}`).pluck().get() as number;
    const st = db.prepare("SELECT * FROM state").get() as { entries: number; staged_digest: number; staged_url: number };
    expect(st.staged_digest).toBe(count("by_digest_new"));
    expect(st.staged_url).toBe(count("by_url_new"));
    return {
      entries: count("entries"),
      byDigest: count("by_digest") + count("by_digest_new"),
      byUrl: count("by_url") + count("by_url_new"),
      state: st.entries,
    };
  });
}

describe("SQLite dedup store: opening", () => {
  it("creates the parent directory and the schema (WAL, user_version, application_id)", () => {
    const path = join(tempDir(), "a", "b", "dedup.sqlite3");
    const lines: string[] = [];
    const s = openSqliteDedupStore(path, { log: createLogger({ write: (l) => lines.push(l) }) });
    expect(s.count()).toBe(0);
    s.close();
    s.close(); // idempotent
    expect(existsSync(path)).toBe(true);
    expect(lines.join("\n")).toMatch(/dedup-db-open .*created=true/);
    raw(path, (db) => {
      expect(db.pragma("journal_mode", { simple: true })).toBe("wal");
      expect(db.pragma("user_version", { simple: true })).toBe(SCHEMA_VERSION);
      expect(db.pragma("application_id", { simple: true })).toBe(APPLICATION_ID);
      expect(db.pragma("integrity_check", { simple: true })).toBe("ok");
    });
  });

  it("accepts an empty (0-byte) file as a fresh database", () => {
    const path = dbFile();
    writeFileSync(path, "");
    withStore(path, (s) => {
      s.add([entry()]);
      expect(s.count()).toBe(1);
    });
  });

  it("a closed store refuses calls with a clear error", () => {
    const s = openSqliteDedupStore(dbFile());
    s.close();
    expect(errorOf(() => s.count()).message).toMatch(/is closed/);
  });
});

describe("SQLite dedup store: entries", () => {
  it("stores and returns every field", () => {
    withStore(dbFile(), (s) => {
      const e = entry({ etag: '"abc"', lastModified: "Wed, 01 May 2024 12:00:00 GMT", status: 203, length: 12345, offset: 2 ** 40 });
      s.add([e]);
      expect(s.count()).toBe(1);
      expect(s.byDigest("default", e.digest)).toEqual(e);
      expect(s.byUrlAndDigest("default", e.url, e.digest)).toEqual(e);
      expect(s.byUrl("default", e.url, 10)).toEqual([e]);
    });
  });

  it("byDigest returns the most recent entry with that digest, in one batch and across batches", () => {
    withStore(dbFile(), (s) => {
      const d = sha1("same payload");
      const a = entry({ digest: d, url: "https://a.example/" });
      const b = entry({ digest: d, url: "https://b.example/" });
      s.add([a, b]);
      expect(s.byDigest("default", d)).toEqual(b);
      const c = entry({ digest: d, url: "https://a.example/" });
      s.add([c]);
      expect(s.byDigest("default", d)).toEqual(c);
      expect(s.byDigest("default", sha1("other payload"))).toBeNull();
    });
  });

  it("byUrlAndDigest wants both the URL and the digest, most recent first", () => {
    withStore(dbFile(), (s) => {
      const d = sha1("p");
      const a1 = entry({ digest: d, url: "https://a.example/" });
      const b1 = entry({ digest: d, url: "https://b.example/" });
      const a2 = entry({ digest: d, url: "https://a.example/" });
      const a3 = entry({ digest: sha1("q"), url: "https://a.example/" });
      s.add([a1, b1, a2, a3]);
      expect(s.byUrlAndDigest("default", "https://a.example/", d)).toEqual(a2);
      expect(s.byUrlAndDigest("default", "https://b.example/", d)).toEqual(b1);
      expect(s.byUrlAndDigest("default", "https://c.example/", d)).toBeNull();
      expect(s.byUrlAndDigest("default", "https://b.example/", sha1("q"))).toBeNull();
      expect(s.byUrlAndDigest("default", "https://a.example/", sha1("q"))).toEqual(a3);
    });
  });

  it("byUrl lists a URL's entries newest first, at most `limit`", () => {
    withStore(dbFile(), (s) => {
      const url = "https://example.org/page";
      const es = Array.from({ length: 7 }, (_, i) => entry({ url, etag: `"v${i}"` }));
      s.add(es.slice(0, 3));
      s.add([entry({ url: "https://example.org/other" })]);
      s.add(es.slice(3));
      expect(s.byUrl("default", url, 50)).toEqual(es.slice().reverse());
      expect(s.byUrl("default", url, 2)).toEqual([es[6], es[5]]);
      expect(s.byUrl("default", url, 0)).toEqual([]);
      expect(s.byUrl("default", "https://example.org/none", 5)).toEqual([]);
      expect(errorOf(() => s.byUrl("default", url, -1)).code).toBe("ERR_INTERNAL");
    });
  });

  it("keeps buckets apart", () => {
    withStore(dbFile(), (s) => {
      const d = sha1("shared");
      const inA = entry({ bucket: "a", digest: d, url: "https://x/" });
      s.add([inA]);
      expect(s.byDigest("a", d)).toEqual(inA);
      expect(s.byDigest("b", d)).toBeNull();
      expect(s.byDigest("default", d)).toBeNull();
      expect(s.byUrlAndDigest("b", "https://x/", d)).toBeNull();
      expect(s.byUrl("b", "https://x/", 5)).toEqual([]);
      const inB = entry({ bucket: "b", digest: d, url: "https://x/" });
      s.add([inB]);
      expect(s.byDigest("a", d)).toEqual(inA);
      expect(s.byDigest("b", d)).toEqual(inB);
      expect(s.byUrl("a", "https://x/", 5)).toEqual([inA]);
      expect(s.count()).toBe(2);
    });
  });

  it("matches a hex sha1 value with its base32 spelling (compared as bytes)", () => {
    withStore(dbFile(), (s) => {
      const bytes = createHash("sha1").update("warcprox wrote hex").digest();
      const hex = parseDigest(`sha1:${bytes.toString("hex")}`)!;
      const b32 = parseDigest(`sha1:${base32(bytes)}`)!;
      const dashed = parseDigest(`SHA-1:${base32(bytes).toLowerCase()}`)!;
      const e = entry({ digest: hex, url: "https://h/" });
      s.add([e]);
      expect(s.byDigest("default", b32)?.url).toBe("https://h/");
      expect(s.byDigest("default", dashed)?.url).toBe("https://h/");
      expect(s.byUrlAndDigest("default", "https://h/", b32)?.url).toBe("https://h/");
    });
  });

  it("never matches a sha256 digest with a sha1 one (or the other way round)", () => {
    withStore(dbFile(), (s) => {
      const d256 = sha256("payload");
      const d1prefix: DigestKey = { alg: "sha1", bytes: d256.bytes.subarray(0, 20) };
      s.add([entry({ digest: d256, url: "https://s/" })]);
      expect(s.byDigest("default", d1prefix)).toBeNull();
      expect(s.byUrlAndDigest("default", "https://s/", d1prefix)).toBeNull();
      expect(s.byDigest("default", d256)?.digest).toEqual(d256);
      const d1 = sha1("payload");
      s.add([entry({ digest: d1, url: "https://s/" })]);
      expect(s.byDigest("default", { alg: "sha256", bytes: Buffer.concat([d1.bytes, Buffer.alloc(12)]) })).toBeNull();
      expect(s.byDigest("default", d1)?.digest.alg).toBe("sha1");
      expect(s.byDigest("default", d256)?.digest.alg).toBe("sha256");
    });
  });

  it("stores entries without record id, file, offset, length or status (external indexes)", () => {
    withStore(dbFile(), (s) => {
      const e = entry({ recordId: null, filename: null, offset: null, length: null, status: null });
      s.add([e]);
      expect(s.byDigest("default", e.digest)).toEqual(e);
      expect(s.removeFileTail("lathe-20240501120000000-00000-test.warc.gz", 0)).toBe(0);
      expect(s.count()).toBe(1);
    });
  });

  it("keeps record ids verbatim, whatever their spelling", () => {
    withStore(dbFile(), (s) => {
      const ids = [
        "<urn:uuid:0f8fad5b-d9cb-469f-a165-70867728950e>",
        "<urn:uuid:0F8FAD5B-D9CB-469F-A165-70867728950E>",
        "urn:uuid:0f8fad5b-d9cb-469f-a165-70867728950e",
        "<urn:uuid:0f8fad5b-d9cb-469f-a165-70867728950>",
        "<urn:uuid:0f8fad5b-d9cb-469f-a165-70867728950e0>",
        "<urn:uuid:0f8fad5b-d9cb-469f-a165-70867728950g>",
        "<urn:x-heritrix:12345>",
        "",
      ];
      const es = ids.map((recordId) => entry({ recordId }));
      s.add(es);
      for (const e of es) expect(s.byDigest("default", e.digest)?.recordId).toBe(e.recordId);
    });
  });

  it("accepts a digest given as a plain Uint8Array", () => {
    withStore(dbFile(), (s) => {
      const d = sha1("u8");
      const e = entry({ digest: { alg: "sha1", bytes: new Uint8Array(d.bytes) as Buffer } });
      s.add([e]);
      expect(s.byDigest("default", d)?.url).toBe(e.url);
    });
  });

  it("rejects a malformed entry before writing anything of its batch", () => {
    withStore(dbFile(), (s) => {
      const bad = entry({ digest: { alg: "sha1", bytes: Buffer.alloc(19) } });
      expect(errorOf(() => s.add([entry(), bad])).message).toMatch(/entry 1: a sha1 digest has 20 bytes, got 19/);
      expect(errorOf(() => s.add([entry({ digest: { alg: "md5" as "sha1", bytes: Buffer.alloc(16) } })])).message).toMatch(/unknown digest algorithm/);
      expect(errorOf(() => s.add([entry({ offset: -1 })])).message).toMatch(/offset must be/);
      expect(errorOf(() => s.add([entry({ bucket: "" })])).message).toMatch(/bucket/);
      expect(errorOf(() => s.byDigest("default", { alg: "sha256", bytes: Buffer.alloc(20) })).code).toBe("ERR_INTERNAL");
      expect(s.count()).toBe(0);
      s.add([]);
      expect(s.count()).toBe(0);
    });
  });

  it("finds every entry of a large batch by each lookup (sorted insertion path)", () => {
    const path = dbFile();
    const es: DedupEntry[] = [];
    for (let i = 0; i < 5000; i++) {
      es.push(entry({ bucket: i % 3 ? "default" : "b2", url: `https://e.example/${i % 1234}`, digest: sha1(`big ${i % 4000}`) }));
    }
    withStore(path, (s) => {
      s.add(es);
      expect(s.count()).toBe(5000);
      // the most recent entry per (bucket, digest) and per (bucket, url, digest)
      const lastByDigest = new Map<string, DedupEntry>();
      const lastByUrl = new Map<string, DedupEntry>();
      for (const e of es) {
        lastByDigest.set(`${e.bucket} ${e.digest.bytes.toString("hex")}`, e);
        lastByUrl.set(`${e.bucket} ${e.url} ${e.digest.bytes.toString("hex")}`, e);
      }
      for (const e of es) {
        expect(s.byDigest(e.bucket, e.digest)).toEqual(lastByDigest.get(`${e.bucket} ${e.digest.bytes.toString("hex")}`));
        expect(s.byUrlAndDigest(e.bucket, e.url, e.digest)).toEqual(lastByUrl.get(`${e.bucket} ${e.url} ${e.digest.bytes.toString("hex")}`));
      }
      const url = "https://e.example/7";
      const want = es.filter((e) => e.bucket === "default" && e.url === url).reverse();
      expect(want.length).toBeGreaterThan(1);
      expect(s.byUrl("default", url, 100)).toEqual(want);
    });
    expect(tableCounts(path)).toEqual({ entries: 5000, byDigest: 5000, byUrl: 5000, state: 5000 });
  });
});

describe("SQLite dedup store: recent entries moving to the big trees", () => {
  /** What the store must answer, computed from the entries in the order they were added. */
  class Model {
    entries: DedupEntry[] = [];
    #hex = (d: DigestKey) => `${d.alg}:${d.bytes.toString("hex")}`;
    byDigest(bucket: string, d: DigestKey): DedupEntry | null {
      return this.entries.findLast((e) => e.bucket === bucket && this.#hex(e.digest) === this.#hex(d)) ?? null;
    }
    byUrlAndDigest(bucket: string, url: string, d: DigestKey): DedupEntry | null {
      return this.entries.findLast((e) => e.bucket === bucket && e.url === url && this.#hex(e.digest) === this.#hex(d)) ?? null;
    }
    byUrl(bucket: string, url: string, limit: number): DedupEntry[] {
      return this.entries.filter((e) => e.bucket === bucket && e.url === url).reverse().slice(0, limit);
    }
  }

  function check(s: DedupStore, m: Model): void {
    expect(s.count()).toBe(m.entries.length);
    for (const e of m.entries) {
      expect(s.byDigest(e.bucket, e.digest)).toEqual(m.byDigest(e.bucket, e.digest));
      expect(s.byUrlAndDigest(e.bucket, e.url, e.digest)).toEqual(m.byUrlAndDigest(e.bucket, e.url, e.digest));
    }
    for (let u = 0; u < 40; u++) {
      for (const b of ["default", "b2"]) expect(s.byUrl(b, `https://m.example/${u}`, 7)).toEqual(m.byUrl(b, `https://m.example/${u}`, 7));
    }
  }

  it("answers like a plain list of entries while entries move in small key ranges", () => {
    const path = dbFile();
    const m = new Model();
    let k = 0;
    const s = openSqliteDedupStore(path, { stagedMin: 16 });
    try {
      for (let batch = 0; batch < 60; batch++) {
        const size = 1 + ((batch * 37) % 90);
        const es: DedupEntry[] = [];
        for (let i = 0; i < size; i++, k++) {
          es.push(
            entry({
              bucket: k % 4 ? "default" : "b2",
              url: `https://m.example/${k % 40}`,
              digest: k % 3 ? sha1(`m ${k % 150}`) : sha256(`m ${k % 90}`),
              filename: `m-${k % 5}.warc.gz`,
              offset: k * 10,
            }),
          );
        }
        s.add(es);
        m.entries.push(...es);
      }
      check(s, m);
      const before = tableCounts(path);
      expect(before.entries).toBe(m.entries.length);
      raw(path, (db) => {
        const big = db.prepare("SELECT (SELECT count(*) FROM by_digest), (SELECT count(*) FROM by_url)").raw().get() as number[];
        expect(big[0]).toBeGreaterThan(0);
        expect(big[1]).toBeGreaterThan(0);
      });
      // recovery: drop a file's tail, wherever its entries' keys are now
      const cut = m.entries.length * 5;
      const removed = s.removeFileTail("m-2.warc.gz", cut);
      m.entries = m.entries.filter((e) => !(e.filename === "m-2.warc.gz" && e.offset! >= cut));
      expect(removed).toBe(before.entries - m.entries.length);
      expect(removed).toBeGreaterThan(0);
      check(s, m);
    } finally {
      s.close();
    }
    expect(tableCounts(path)).toEqual({ entries: m.entries.length, byDigest: m.entries.length, byUrl: m.entries.length, state: m.entries.length });
    withStore(path, (s2) => check(s2, m));
  });

  it("answers like a plain list of entries when they come one per add (the proxy's way), past the bound", () => {
    const path = dbFile();
    const m = new Model();
    const s = openSqliteDedupStore(path, { stagedMin: 16 });
    try {
      for (let k = 0; k < 400; k++) {
        const e = entry({ bucket: k % 4 ? "default" : "b2", url: `https://m.example/${k % 40}`, digest: sha1(`one ${k % 170}`), filename: `o-${k % 3}.warc.gz`, offset: k * 10 });
        s.add([e]);
        m.entries.push(e);
        if (k % 50 === 49) check(s, m);
      }
      raw(path, (db) => expect(db.prepare("SELECT count(*) FROM by_digest").pluck().get()).toBeGreaterThan(0));
      const counts = tableCounts(path);
      expect(counts).toEqual({ entries: 400, byDigest: 400, byUrl: 400, state: 400 });
      expect(s.removeFileTail("o-1.warc.gz", 2000)).toBe(m.entries.filter((e) => e.filename === "o-1.warc.gz" && e.offset! >= 2000).length);
      m.entries = m.entries.filter((e) => !(e.filename === "o-1.warc.gz" && e.offset! >= 2000));
      check(s, m);
    } finally {
      s.close();
    }
    withStore(path, (s2) => check(s2, m));
  });
});

describe("SQLite dedup store: removeFileTail (recovery, warc-files.md §7 step 4)", () => {
  it("removes the entries at or after the offset in that file only", () => {
    const path = dbFile();
    withStore(path, (s) => {
      const d = sha1("tail");
      const a = [0, 100, 200, 300].map((offset) => entry({ filename: "a.warc.gz", offset, digest: sha1(`a${offset}`), url: `https://a/${offset}` }));
      const dupOld = entry({ filename: "b.warc.gz", offset: 500, digest: d, url: "https://t/" });
      const dupNew = entry({ filename: "a.warc.gz", offset: 400, digest: d, url: "https://t/" });
      const none = entry({ filename: null, offset: null, url: "https://n/" });
      const b = entry({ filename: "b.warc.gz", offset: 999 });
      s.add([...a, dupOld, dupNew, none, b]);
      expect(s.byDigest("default", d)).toEqual(dupNew);
      expect(s.removeFileTail("a.warc.gz", 200)).toBe(3);
      expect(s.count()).toBe(5);
      expect(s.byDigest("default", a[0]!.digest)).toEqual(a[0]);
      expect(s.byDigest("default", a[1]!.digest)).toEqual(a[1]);
      expect(s.byDigest("default", a[2]!.digest)).toBeNull();
      expect(s.byUrlAndDigest("default", "https://a/300", a[3]!.digest)).toBeNull();
      expect(s.byUrl("default", "https://a/200", 5)).toEqual([]);
      // the older original of the same payload is found again
      expect(s.byDigest("default", d)).toEqual(dupOld);
      expect(s.byUrl("default", "https://t/", 5)).toEqual([dupOld]);
      expect(s.byDigest("default", b.digest)).toEqual(b);
      expect(s.byDigest("default", none.digest)).toEqual(none);
      expect(s.removeFileTail("a.warc.gz", 200)).toBe(0);
      expect(s.removeFileTail("never-seen.warc.gz", 0)).toBe(0);
      // new entries after a removal are the most recent ones
      const again = entry({ filename: "c.warc.gz", offset: 0, digest: d, url: "https://t/" });
      s.add([again]);
      expect(s.byDigest("default", d)).toEqual(again);
      expect(s.removeFileTail("b.warc.gz", 0)).toBe(2);
    });
    expect(tableCounts(path)).toEqual({ entries: 4, byDigest: 4, byUrl: 4, state: 4 });
  });
});

describe("SQLite dedup store: restart, other processes, read-only", () => {
  it("keeps its entries across close and reopen", () => {
    const path = dbFile();
    const es = [entry(), entry(), entry({ bucket: "x" })];
    withStore(path, (s) => s.add(es));
    withStore(path, (s) => {
      expect(s.count()).toBe(3);
      for (const e of es) expect(s.byDigest(e.bucket, e.digest)).toEqual(e);
      const more = entry({ bucket: "x", digest: es[2]!.digest });
      s.add([more]);
      expect(s.byDigest("x", es[2]!.digest)).toEqual(more);
    });
    withStore(path, (s) => expect(s.count()).toBe(4));
  });

  it("two stores on one file see each other's entries", () => {
    const path = dbFile();
    const s1 = openSqliteDedupStore(path);
    const s2 = openSqliteDedupStore(path);
    try {
      const e = entry({ bucket: "new-bucket", filename: "new-file.warc.gz" });
      s1.add([e]);
      expect(s2.byDigest("new-bucket", e.digest)).toEqual(e);
      const f = entry({ bucket: "new-bucket", filename: "new-file.warc.gz" });
      s2.add([f]);
      expect(s1.byDigest("new-bucket", f.digest)).toEqual(f);
      expect(s1.count()).toBe(2);
      expect(s1.removeFileTail("new-file.warc.gz", 0)).toBe(2);
      expect(s2.count()).toBe(0);
    } finally {
      s1.close();
      s2.close();
    }
  });

  it("opens read-only for lookups, refuses writes, and never creates a missing file", () => {
    const path = dbFile();
    const e = entry();
    withStore(path, (s) => s.add([e]));
    const ro = openSqliteDedupStore(path, { readonly: true });
    try {
      expect(ro.byDigest("default", e.digest)).toEqual(e);
      expect(errorOf(() => ro.add([entry()])).message).toMatch(/read-only/);
      expect(errorOf(() => ro.removeFileTail("x", 0)).message).toMatch(/read-only/);
    } finally {
      ro.close();
    }
    const missing = join(tempDir(), "missing.sqlite3");
    const err = errorOf(() => openSqliteDedupStore(missing, { readonly: true }));
    expect(err.code).toBe("ERR_CONFIG");
    expect(err.message).toContain(missing);
    expect(existsSync(missing)).toBe(false);
  });
});

describe("SQLite dedup store: databases it must not touch", () => {
  function snapshot(dir: string): Record<string, string> {
    const out: Record<string, string> = {};
    for (const f of readdirSync(dir)) out[f] = createHash("sha256").update(readFileSync(join(dir, f))).digest("hex");
    return out;
  }

  it("refuses a newer schema version, saying which lathe it needs", () => {
    const path = dbFile();
    withStore(path, (s) => s.add([entry()]));
    const db = new Database(path);
    db.pragma(`user_version = ${SCHEMA_VERSION + 1}`);
    db.prepare("INSERT INTO meta(key, value) VALUES ('requires', 'lathe 9.1.0')").run();
    db.close();
    const before = snapshot(join(path, ".."));
    const err = errorOf(() => openSqliteDedupStore(path));
    expect(err.code).toBe("ERR_CONFIG");
    expect(err.message).toContain(path);
    expect(err.message).toMatch(/schema version 2, newer than lathe .* understands \(version 1\); it needs lathe 9\.1\.0 or newer/);
    expect(snapshot(join(path, ".."))).toEqual(before);
  });

  it("refuses a file that is not SQLite and leaves it byte for byte as it was", () => {
    for (const content of [randomBytes(10_000), Buffer.from("this is a text file, not a database\n"), Buffer.from("SQLite format 2\0")]) {
      const dir = tempDir();
      const path = join(dir, "dedup.sqlite3");
      writeFileSync(path, content);
      const err = errorOf(() => openSqliteDedupStore(path));
      expect(err.code).toBe("ERR_CONFIG");
      expect(err.message).toContain(path);
      expect(err.message).toMatch(/is not a SQLite database; lathe leaves it untouched/);
      expect(readdirSync(dir)).toEqual(["dedup.sqlite3"]);
      expect(readFileSync(path).equals(content)).toBe(true);
    }
  });

  it("refuses another program's SQLite database and leaves it unchanged", () => {
    const dir = tempDir();
    const path = join(dir, "warcprox.sqlite");
    const db = new Database(path);
    db.exec("CREATE TABLE dedup(key TEXT PRIMARY KEY, value TEXT); INSERT INTO dedup VALUES ('k', 'v')");
    db.close();
    const before = snapshot(dir);
    const err = errorOf(() => openSqliteDedupStore(path));
    expect(err.code).toBe("ERR_CONFIG");
    expect(err.message).toMatch(/is a SQLite database but not a lathe dedup database .*tables: dedup/);
    expect(snapshot(dir)).toEqual(before);
  });

  it("refuses a damaged database with a message naming the file", () => {
    const path = dbFile();
    withStore(path, (s) => s.add(Array.from({ length: 50 }, () => entry())));
    const bytes = readFileSync(path);
    // keep the 100-byte header, wreck the rest of page 1 (the schema)
    randomBytes(4096 - 100).copy(bytes, 100);
    writeFileSync(path, bytes);
    const err = errorOf(() => {
      const s = openSqliteDedupStore(path);
      try {
        s.count();
      } finally {
        s.close();
      }
    });
    expect(err.code).toBe("ERR_CONFIG");
    expect(err.message).toContain(path);
    expect(err.message).toMatch(/damaged|not a SQLite database/);
    expect(readFileSync(path).equals(bytes)).toBe(true);
  });
});

describe("SQLite dedup store: kill -9", () => {
  const storeModule = fileURLToPath(new URL("../../dist/dedup/sqliteStore.js", import.meta.url));
  const writer = fileURLToPath(new URL("./fixtures/killWriter.mjs", import.meta.url));

  /**
   * Run the writer from `start` until it has committed at least `min` more entries, then SIGKILL
   * it a random 0-30 ms later (anywhere in its loop: building a batch, inside add(), committing).
   */
  function killWriter(path: string, start: number, min: number): Promise<number> {
    return new Promise((resolve, reject) => {
      const child = spawn(process.execPath, [writer, storeModule, path, String(start)], { stdio: ["ignore", "pipe", "pipe"] });
      let out = "";
      let err = "";
      let killed = false;
      child.stdout.on("data", (d: Buffer) => {
        out += d;
        const last = Number(out.trimEnd().split("\n").pop());
        if (!killed && last - start >= min) {
          killed = true;
          setTimeout(() => child.kill("SIGKILL"), Math.random() * 30);
        }
      });
      child.stderr.on("data", (d: Buffer) => (err += d));
      child.on("error", reject);
      child.on("close", (code, signal) => {
        if (signal !== "SIGKILL") return reject(new Error(`writer exited ${code} before it was killed: ${err}`));
        // the last complete line: what the child reported committed before it died
        const printed = out.slice(0, out.lastIndexOf("\n")).split("\n").map(Number);
        resolve(printed[printed.length - 1] ?? start);
      });
    });
  }

  it("after SIGKILL mid-run the database opens and holds exactly a prefix of whole batches", async () => {
    if (!existsSync(storeModule)) throw new Error(`${storeModule} is missing: run npm run build`);
    const path = dbFile();
    let start = 0;
    for (const min of [6000, 9000, 2000, 1000, 1500]) {
      const lastPrinted = await killWriter(path, start, min);
      // the batch boundaries this child run could have committed
      const boundaries = [start];
      for (let b = 0; boundaries[boundaries.length - 1]! <= lastPrinted; b++) boundaries.push(boundaries[boundaries.length - 1]! + batchSize(b));
      const s = openSqliteDedupStore(path);
      try {
        const c = s.count();
        // every add() that returned is there (process death loses nothing committed) ...
        expect(c).toBeGreaterThanOrEqual(lastPrinted);
        // ... and at most the one in flight, whole or not at all
        expect(boundaries).toContain(c);
        expect(c).toBeLessThanOrEqual(boundaries[boundaries.length - 1]!);
        for (let i = 0; i < c; i++) {
          const want = entryFor(i) as DedupEntry;
          expect(s.byUrlAndDigest(want.bucket, want.url, want.digest)).toEqual(want);
        }
        for (let i = c; i < c + 500; i++) {
          const absent = entryFor(i) as DedupEntry;
          expect(s.byDigest(absent.bucket, absent.digest)).toBeNull();
        }
        start = c;
      } finally {
        s.close();
      }
      expect(tableCounts(path)).toEqual({ entries: start, byDigest: start, byUrl: start, state: start });
      raw(path, (db) => expect(db.pragma("integrity_check", { simple: true })).toBe("ok"));
    }
    // the writer promoted entries to the big trees while it was being killed
    raw(path, (db) => expect(db.prepare("SELECT count(*) FROM by_digest").pluck().get()).toBeGreaterThan(0));
  });
});
