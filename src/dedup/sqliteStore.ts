/**
 * The dedup store in SQLite (issue "Deduplication", Store; decisions.md §7): better-sqlite3, WAL
 * with synchronous=NORMAL (a kill -9 at any moment leaves a consistent database holding every
 * committed transaction; the last ones may be lost on power failure, which dedup tolerates),
 * prepared statements held in fields, a synchronous API.
 *
 * Schema version 1 (`PRAGMA user_version`, `PRAGMA application_id` = "ltdd"):
 *
 *   entries(seq INTEGER PRIMARY KEY, bucket, alg, digest BLOB, url, date, record_id, file,
 *           offset, length, status, etag, last_modified)
 *     one row per entry, appended in `seq` order ("most recent" = highest seq); bucket and file
 *     are ids into `buckets` / `files` (a name is stored once, not 10 million times), alg is
 *     1 = sha1, 2 = sha256, record_id is 16 bytes for lathe's own `<urn:uuid:…>` ids
 *     (sqliteKeys.ts); partial index entries_file(file, offset) for removeFileTail.
 *   by_digest(key, seq) WITHOUT ROWID        key = digestKey(bucket, alg, digest)
 *   by_url(key, seq, tag) WITHOUT ROWID      key = urlKey(bucket, url), tag = digestTag(digest)
 *     the two lookup paths as compact integer-keyed B-trees (about 15 and 17 bytes an entry)
 *     instead of indexes over (bucket, alg, digest, seq) and (bucket, url, seq) (about 40 and
 *     110 bytes): at 10 million entries they stay small enough to be cached, and add() inserts
 *     into each in key order, so a bulk load touches each of their pages once per batch instead
 *     of once per entry. Every lookup verifies bucket, alg, digest and url on the row itself.
 *   meta(key, value)   created_by, requires (the lathe a newer schema needs), entries (count).
 *
 * Opening never resets or rewrites a database it does not recognise: a file that is not SQLite,
 * a SQLite file that is not a lathe dedup database, a damaged one, or one with a newer schema
 * fails with ProxyError("ERR_CONFIG") naming the file and what to do.
 */
import { closeSync, mkdirSync, openSync, readSync, statSync } from "node:fs";
import { dirname, resolve } from "node:path";
import Database from "better-sqlite3";
import { errorMessage, ProxyError, systemCode } from "../core/errors.js";
import type { Logger } from "../core/log.js";
import { VERSION } from "../core/version.js";
import type { DigestAlgorithm } from "../warc/digest.js";
import {
  ALG_CODE,
  ALG_NAME,
  DIGEST_BYTES,
  digestKey,
  digestTag,
  packRecordId,
  unpackRecordId,
  urlKey,
} from "./sqliteKeys.js";
import type { DedupEntry, DedupStore, DigestKey } from "./types.js";

export const SCHEMA_VERSION = 1;
/** `PRAGMA application_id`: "ltdd" (lathe dedup), so a stray SQLite file is never taken for ours. */
export const APPLICATION_ID = 0x6c746464;

export interface SqliteDedupStoreOptions {
  log?: Logger;
  /** Open for lookups only: the file must exist and hold a dedup database; add/remove throw. */
  readonly?: boolean;
  /** SQLite page cache in MiB (default 32). Bulk loads of millions of entries want ~512. */
  cacheMiB?: number;
}

const SCHEMA = `
CREATE TABLE meta(key TEXT PRIMARY KEY, value) WITHOUT ROWID;
CREATE TABLE buckets(id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);
CREATE TABLE files(id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);
CREATE TABLE entries(
  seq INTEGER PRIMARY KEY,
  bucket INTEGER NOT NULL,
  alg INTEGER NOT NULL,
  digest BLOB NOT NULL,
  url TEXT NOT NULL,
  date TEXT NOT NULL,
  record_id,
  file INTEGER,
  offset INTEGER,
  length INTEGER,
  status INTEGER,
  etag TEXT,
  last_modified TEXT
);
CREATE INDEX entries_file ON entries(file, offset) WHERE file IS NOT NULL;
CREATE TABLE by_digest(key INTEGER NOT NULL, seq INTEGER NOT NULL, PRIMARY KEY(key, seq)) WITHOUT ROWID;
CREATE TABLE by_url(key INTEGER NOT NULL, seq INTEGER NOT NULL, tag INTEGER NOT NULL, PRIMARY KEY(key, seq)) WITHOUT ROWID;
`;
const TABLES = ["meta", "buckets", "files", "entries", "by_digest", "by_url"];

const COLUMNS = `e.seq, e.alg, e.digest, e.url, e.date, e.record_id AS recordId, f.name AS filename,
  e.offset, e.length, e.status, e.etag, e.last_modified AS lastModified`;

interface Row {
  seq: number;
  alg: number;
  digest: Buffer;
  url: string;
  date: string;
  recordId: string | Buffer | null;
  filename: string | null;
  offset: number | null;
  length: number | null;
  status: number | null;
  etag: string | null;
  lastModified: string | null;
}

type Stmt<P extends unknown[], R = unknown> = Database.Statement<P, R>;

const SQLITE_MAGIC = "SQLite format 3\0";
/** Entries sorted before they go into by_digest / by_url (smaller batches: as they come). */
const SORT_MIN = 64;
/** Sort chunk: the batch index takes the low 20 bits of the sort value. */
const SORT_CHUNK = 1 << 20;
const CACHE_LIMIT = 10_000;

function sqliteCode(e: unknown): string {
  return systemCode(e) ?? "";
}

/** What to tell the operator about a database problem, by SQLite error code. */
function describe(path: string, e: unknown): ProxyError {
  const code = sqliteCode(e);
  const why = errorMessage(e);
  if (code === "SQLITE_NOTADB") {
    return new ProxyError("ERR_CONFIG", `dedup database ${path} is not a SQLite database (${why}); lathe leaves it untouched: move it away or set dedup.dbPath to another file`, e);
  }
  if (code.startsWith("SQLITE_CORRUPT")) {
    return new ProxyError(
      "ERR_CONFIG",
      `dedup database ${path} is damaged (${why}); lathe does not repair or replace it: restore it from a backup, or move it away and rebuild it with \`lathe index --dedup-db ${path} WARC...\``,
      e,
    );
  }
  if (code.startsWith("SQLITE_CANTOPEN") || code.startsWith("SQLITE_PERM") || code.startsWith("SQLITE_READONLY")) {
    return new ProxyError("ERR_CONFIG", `cannot open dedup database ${path} for ${code.startsWith("SQLITE_READONLY") ? "writing" : "reading"} (${why}): check that it exists and its permissions`, e);
  }
  if (code === "SQLITE_FULL") return new ProxyError("ERR_CONFIG", `dedup database ${path}: the disk is full (${why})`, e);
  if (code === "SQLITE_BUSY" || code.startsWith("SQLITE_BUSY")) {
    return new ProxyError("ERR_CONFIG", `dedup database ${path} is locked by another process for too long (${why})`, e);
  }
  return new ProxyError("ERR_INTERNAL", `dedup database ${path}: ${why}${code ? ` (${code})` : ""}`, e);
}

/** The first 16 bytes of a non-empty file, or null when it does not exist or is empty. */
function header(path: string): Buffer | null {
  let fd: number;
  try {
    fd = openSync(path, "r");
  } catch (e) {
    if (systemCode(e) === "ENOENT") return null;
    throw new ProxyError("ERR_CONFIG", `cannot read dedup database ${path}: ${errorMessage(e)}`, e);
  }
  try {
    const buf = Buffer.alloc(16);
    const n = readSync(fd, buf, 0, 16, 0);
    return n === 0 ? null : buf.subarray(0, n);
  } finally {
    closeSync(fd);
  }
}

function checkDigest(d: DigestKey, what: string): number {
  const code = ALG_CODE[d?.alg as DigestAlgorithm];
  if (!code) throw new ProxyError("ERR_INTERNAL", `${what}: unknown digest algorithm ${JSON.stringify(d?.alg)}`);
  if (!(d.bytes instanceof Uint8Array) || d.bytes.length !== DIGEST_BYTES[d.alg]) {
    throw new ProxyError("ERR_INTERNAL", `${what}: a ${d.alg} digest has ${DIGEST_BYTES[d.alg]} bytes, got ${d.bytes?.length}`);
  }
  return code;
}

function asBuffer(b: Uint8Array): Buffer {
  return Buffer.isBuffer(b) ? b : Buffer.from(b.buffer, b.byteOffset, b.byteLength);
}

function checkInt(v: unknown, name: string, i: number): void {
  if (v !== null && !(Number.isSafeInteger(v) && (v as number) >= 0)) {
    throw new ProxyError("ERR_INTERNAL", `dedup entry ${i}: ${name} must be a non-negative integer or null, got ${JSON.stringify(v)}`);
  }
}

function checkEntry(e: DedupEntry, i: number): number {
  if (typeof e.bucket !== "string" || e.bucket === "") throw new ProxyError("ERR_INTERNAL", `dedup entry ${i}: bucket must be a non-empty string`);
  if (typeof e.url !== "string" || typeof e.date !== "string") throw new ProxyError("ERR_INTERNAL", `dedup entry ${i}: url and date must be strings`);
  checkInt(e.offset, "offset", i);
  checkInt(e.length, "length", i);
  checkInt(e.status, "status", i);
  return checkDigest(e.digest, `dedup entry ${i}`);
}

/**
 * Sort `n` keys (47-bit) and call `each(i)` in key order. Keys are sorted on their top 33 bits
 * with the index in the low 20 (a Float64Array sorts natively, without a comparator).
 */
function inKeyOrder(keys: Float64Array, n: number, each: (i: number) => void): void {
  if (n < SORT_MIN) {
    for (let i = 0; i < n; i++) each(i);
    return;
  }
  for (let base = 0; base < n; base += SORT_CHUNK) {
    const m = Math.min(SORT_CHUNK, n - base);
    const order = new Float64Array(m);
    for (let j = 0; j < m; j++) order[j] = Math.floor(keys[base + j]! / 16384) * SORT_CHUNK + j;
    order.sort();
    for (let j = 0; j < m; j++) each(base + (order[j]! % SORT_CHUNK));
  }
}

/**
 * Inserts rows `ROWS` at a time with one multi-row INSERT (one call into SQLite instead of
 * `ROWS`), the rest one by one. Callers write a row's values into `p` from the offset `slot()`
 * returns, then call `finish()`.
 */
class Inserter {
  readonly p: unknown[];
  readonly #cols: number;
  readonly #one: Stmt<unknown[]>;
  readonly #many: Stmt<unknown[]>;
  #pos = 0;

  constructor(db: Database.Database, table: string, columns: string[], rows: number) {
    this.#cols = columns.length;
    const tuple = `(${columns.map(() => "?").join(",")})`;
    const head = `INSERT INTO ${table}(${columns.join(", ")}) VALUES `;
    this.#one = db.prepare(head + tuple);
    this.#many = db.prepare(head + Array.from({ length: rows }, () => tuple).join(","));
    this.p = new Array(rows * this.#cols).fill(null);
  }

  reset(): void {
    this.#pos = 0;
  }

  slot(): number {
    if (this.#pos === this.p.length) {
      this.#many.run(this.p);
      this.#pos = 0;
    }
    const at = this.#pos;
    this.#pos += this.#cols;
    return at;
  }

  finish(): void {
    if (this.#pos === this.p.length) this.#many.run(this.p);
    else for (let at = 0; at < this.#pos; at += this.#cols) this.#one.run(this.p.slice(at, at + this.#cols));
    this.#pos = 0;
  }
}

class SqliteDedupStore implements DedupStore {
  readonly #path: string;
  readonly #db: Database.Database;
  readonly #readonly: boolean;
  #closed = false;
  /** name → id, for names known to exist (ids are never reused or changed). */
  readonly #bucketIds = new Map<string, number>();
  readonly #fileIds = new Map<string, number>();

  readonly #bucketId: Stmt<[string], number>;
  readonly #insBucket: Stmt<[string]>;
  readonly #fileId: Stmt<[string], number>;
  readonly #insFile: Stmt<[string]>;
  readonly #maxSeq: Stmt<[], number | null>;
  readonly #insEntries: Inserter;
  readonly #insByDigest: Inserter;
  readonly #insByUrl: Inserter;
  readonly #byDigest: Stmt<[number, number, number, Buffer], Row>;
  readonly #byUrlAndDigest: Stmt<[number, number, number, string, number, Buffer], Row>;
  readonly #byUrl: Stmt<[number, number, string, number], Row>;
  readonly #tail: Stmt<[number, number], { seq: number; bucket: number; alg: number; digest: Buffer; url: string }>;
  readonly #delByDigest: Stmt<[number, number]>;
  readonly #delByUrl: Stmt<[number, number]>;
  readonly #delTail: Stmt<[number, number]>;
  readonly #count: Stmt<[], number>;
  readonly #addCount: Stmt<[number]>;
  readonly #add: Database.Transaction<(entries: DedupEntry[]) => void>;
  readonly #removeTail: Database.Transaction<(file: number, from: number) => number>;

  constructor(path: string, db: Database.Database, readonly: boolean) {
    this.#path = path;
    this.#db = db;
    this.#readonly = readonly;
    this.#bucketId = db.prepare<[string], number>("SELECT id FROM buckets WHERE name = ?").pluck();
    this.#insBucket = db.prepare("INSERT INTO buckets(name) VALUES (?)");
    this.#fileId = db.prepare<[string], number>("SELECT id FROM files WHERE name = ?").pluck();
    this.#insFile = db.prepare("INSERT INTO files(name) VALUES (?)");
    this.#maxSeq = db.prepare<[], number | null>("SELECT max(seq) FROM entries").pluck();
    if (!readonly) {
      const cols = ["seq", "bucket", "alg", "digest", "url", "date", "record_id", "file", "offset", "length", "status", "etag", "last_modified"];
      this.#insEntries = new Inserter(db, "entries", cols, 64);
      this.#insByDigest = new Inserter(db, "by_digest", ["key", "seq"], 256);
      this.#insByUrl = new Inserter(db, "by_url", ["key", "seq", "tag"], 256);
    } else {
      this.#insEntries = this.#insByDigest = this.#insByUrl = null as unknown as Inserter;
    }
    // CROSS JOIN: walk the key's entries newest first, read each row until one really matches.
    this.#byDigest = db.prepare(
      `SELECT ${COLUMNS} FROM by_digest k CROSS JOIN entries e ON e.seq = k.seq LEFT JOIN files f ON f.id = e.file
       WHERE k.key = ? AND e.bucket = ? AND e.alg = ? AND e.digest = ? ORDER BY k.seq DESC LIMIT 1`,
    );
    this.#byUrlAndDigest = db.prepare(
      `SELECT ${COLUMNS} FROM by_url k CROSS JOIN entries e ON e.seq = k.seq LEFT JOIN files f ON f.id = e.file
       WHERE k.key = ? AND k.tag = ? AND e.bucket = ? AND e.url = ? AND e.alg = ? AND e.digest = ? ORDER BY k.seq DESC LIMIT 1`,
    );
    this.#byUrl = db.prepare(
      `SELECT ${COLUMNS} FROM by_url k CROSS JOIN entries e ON e.seq = k.seq LEFT JOIN files f ON f.id = e.file
       WHERE k.key = ? AND e.bucket = ? AND e.url = ? ORDER BY k.seq DESC LIMIT ?`,
    );
    this.#tail = db.prepare("SELECT seq, bucket, alg, digest, url FROM entries WHERE file = ? AND offset >= ?");
    this.#delByDigest = db.prepare("DELETE FROM by_digest WHERE key = ? AND seq = ?");
    this.#delByUrl = db.prepare("DELETE FROM by_url WHERE key = ? AND seq = ?");
    this.#delTail = db.prepare("DELETE FROM entries WHERE file = ? AND offset >= ?");
    this.#count = db.prepare<[], number>("SELECT value FROM meta WHERE key = 'entries'").pluck();
    this.#addCount = db.prepare("UPDATE meta SET value = value + ? WHERE key = 'entries'");
    this.#add = db.transaction((entries: DedupEntry[]) => this.#addTx(entries));
    this.#removeTail = db.transaction((file: number, from: number) => this.#removeTailTx(file, from));
  }

  /** Run `fn`, turning SQLite errors into ProxyErrors that name the file. */
  #guard<T>(fn: () => T): T {
    if (this.#closed) throw new ProxyError("ERR_INTERNAL", `dedup database ${this.#path} is closed`);
    try {
      return fn();
    } catch (e) {
      if (e instanceof ProxyError) throw e;
      throw describe(this.#path, e);
    }
  }

  #writable(): void {
    if (this.#readonly) throw new ProxyError("ERR_INTERNAL", `dedup database ${this.#path} is open read-only`);
  }

  #lookupBucket(name: string): number | undefined {
    let id = this.#bucketIds.get(name);
    if (id === undefined) {
      id = this.#bucketId.get(name);
      if (id !== undefined) this.#remember(this.#bucketIds, name, id);
    }
    return id;
  }

  #remember(map: Map<string, number>, name: string, id: number): void {
    if (map.size >= CACHE_LIMIT) map.clear();
    map.set(name, id);
  }

  #toEntry(bucket: string, r: Row): DedupEntry {
    return {
      bucket,
      digest: { alg: ALG_NAME[r.alg]!, bytes: r.digest },
      url: r.url,
      date: r.date,
      recordId: unpackRecordId(r.recordId),
      filename: r.filename,
      offset: r.offset,
      length: r.length,
      status: r.status,
      etag: r.etag,
      lastModified: r.lastModified,
    };
  }

  byDigest(bucket: string, digest: DigestKey): DedupEntry | null {
    const alg = checkDigest(digest, "byDigest");
    return this.#guard(() => {
      const b = this.#lookupBucket(bucket);
      if (b === undefined) return null;
      const bytes = asBuffer(digest.bytes);
      const r = this.#byDigest.get(digestKey(b, alg, bytes), b, alg, bytes);
      return r ? this.#toEntry(bucket, r) : null;
    });
  }

  byUrlAndDigest(bucket: string, url: string, digest: DigestKey): DedupEntry | null {
    const alg = checkDigest(digest, "byUrlAndDigest");
    return this.#guard(() => {
      const b = this.#lookupBucket(bucket);
      if (b === undefined) return null;
      const bytes = asBuffer(digest.bytes);
      const r = this.#byUrlAndDigest.get(urlKey(b, url), digestTag(bytes), b, url, alg, bytes);
      return r ? this.#toEntry(bucket, r) : null;
    });
  }

  byUrl(bucket: string, url: string, limit: number): DedupEntry[] {
    if (!Number.isSafeInteger(limit) || limit < 0) throw new ProxyError("ERR_INTERNAL", `byUrl: limit must be a non-negative integer, got ${limit}`);
    return this.#guard(() => {
      const b = limit === 0 ? undefined : this.#lookupBucket(bucket);
      if (b === undefined) return [];
      return this.#byUrl.all(urlKey(b, url), b, url, limit).map((r) => this.#toEntry(bucket, r));
    });
  }

  add(entries: DedupEntry[]): void {
    this.#writable();
    if (entries.length === 0) return;
    for (let i = 0; i < entries.length; i++) checkEntry(entries[i]!, i);
    this.#guard(() => {
      try {
        this.#add.immediate(entries);
      } catch (e) {
        // ids cached during a rolled-back transaction do not exist
        this.#bucketIds.clear();
        this.#fileIds.clear();
        throw e;
      }
    });
  }

  #addTx(entries: DedupEntry[]): void {
    const n = entries.length;
    const first = (this.#maxSeq.get() ?? 0) + 1;
    const dkeys = new Float64Array(n);
    const ukeys = new Float64Array(n);
    const tags = new Uint16Array(n);
    const rows = this.#insEntries;
    const p = rows.p;
    rows.reset();
    for (let i = 0; i < n; i++) {
      const e = entries[i]!;
      let b = this.#bucketIds.get(e.bucket) ?? this.#lookupBucket(e.bucket);
      if (b === undefined) {
        b = Number(this.#insBucket.run(e.bucket).lastInsertRowid);
        this.#remember(this.#bucketIds, e.bucket, b);
      }
      let f: number | null = null;
      const filename = e.filename;
      if (filename !== null && filename !== undefined) {
        f = this.#fileIds.get(filename) ?? null;
        if (f === null) {
          f = this.#fileId.get(filename) ?? Number(this.#insFile.run(filename).lastInsertRowid);
          this.#remember(this.#fileIds, filename, f);
        }
      }
      const alg = ALG_CODE[e.digest.alg];
      const bytes = asBuffer(e.digest.bytes);
      const at = rows.slot();
      p[at] = first + i;
      p[at + 1] = b;
      p[at + 2] = alg;
      p[at + 3] = bytes;
      p[at + 4] = e.url;
      p[at + 5] = e.date;
      p[at + 6] = packRecordId(e.recordId ?? null);
      p[at + 7] = f;
      p[at + 8] = e.offset ?? null;
      p[at + 9] = e.length ?? null;
      p[at + 10] = e.status ?? null;
      p[at + 11] = e.etag ?? null;
      p[at + 12] = e.lastModified ?? null;
      dkeys[i] = digestKey(b, alg, bytes);
      ukeys[i] = urlKey(b, e.url);
      tags[i] = digestTag(bytes);
    }
    rows.finish();
    const byDigest = this.#insByDigest;
    const pd = byDigest.p;
    byDigest.reset();
    inKeyOrder(dkeys, n, (i) => {
      const at = byDigest.slot();
      pd[at] = dkeys[i];
      pd[at + 1] = first + i;
    });
    byDigest.finish();
    const byUrl = this.#insByUrl;
    const pu = byUrl.p;
    byUrl.reset();
    inKeyOrder(ukeys, n, (i) => {
      const at = byUrl.slot();
      pu[at] = ukeys[i];
      pu[at + 1] = first + i;
      pu[at + 2] = tags[i];
    });
    byUrl.finish();
    this.#addCount.run(n);
  }

  removeFileTail(filename: string, fromOffset: number): number {
    this.#writable();
    if (!Number.isSafeInteger(fromOffset) || fromOffset < 0) throw new ProxyError("ERR_INTERNAL", `removeFileTail: bad offset ${fromOffset}`);
    return this.#guard(() => {
      const f = this.#fileIds.get(filename) ?? this.#fileId.get(filename);
      if (f === undefined) return 0;
      return this.#removeTail.immediate(f, fromOffset);
    });
  }

  #removeTailTx(file: number, from: number): number {
    for (const r of this.#tail.all(file, from)) {
      this.#delByDigest.run(digestKey(r.bucket, r.alg, r.digest), r.seq);
      this.#delByUrl.run(urlKey(r.bucket, r.url), r.seq);
    }
    const n = this.#delTail.run(file, from).changes;
    if (n) this.#addCount.run(-n);
    return n;
  }

  count(): number {
    return this.#guard(() => this.#count.get() ?? 0);
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    try {
      if (!this.#readonly) this.#db.pragma("optimize");
    } catch {
      // advisory only
    }
    try {
      this.#db.close();
    } catch (e) {
      throw describe(this.#path, e);
    }
  }
}

function pragmaValue(db: Database.Database, name: string): unknown {
  return db.pragma(name, { simple: true });
}

/** Why a SQLite database we did not create cannot be used, or null when it is a fresh, empty one. */
function checkExisting(path: string, db: Database.Database): ProxyError | "fresh" | null {
  const appId = Number(pragmaValue(db, "application_id"));
  const version = Number(pragmaValue(db, "user_version"));
  const tables = db.prepare<[], string>("SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name").pluck().all();
  if (appId === 0 && version === 0 && tables.length === 0) return "fresh";
  if (appId !== APPLICATION_ID) {
    return new ProxyError(
      "ERR_CONFIG",
      `${path} is a SQLite database but not a lathe dedup database (application_id ${appId}, tables: ${tables.join(", ") || "none"}); lathe leaves it untouched: set dedup.dbPath to another file`,
    );
  }
  if (version > SCHEMA_VERSION) {
    let by = "";
    try {
      const meta = new Map(db.prepare<[], { key: string; value: unknown }>("SELECT key, value FROM meta").all().map((r) => [r.key, String(r.value)]));
      by = meta.get("requires") ? `; it needs ${meta.get("requires")} or newer` : meta.get("created_by") ? `; it was written by ${meta.get("created_by")}` : "";
    } catch {
      // a newer schema may not have meta; the version number says enough
    }
    return new ProxyError(
      "ERR_CONFIG",
      `dedup database ${path} has schema version ${version}, newer than lathe ${VERSION} understands (version ${SCHEMA_VERSION})${by}: run a newer lathe, or set dedup.dbPath to another file`,
    );
  }
  const missing = TABLES.filter((t) => !tables.includes(t));
  if (version < 1 || missing.length) {
    return new ProxyError(
      "ERR_CONFIG",
      `dedup database ${path} is damaged (schema version ${version}, missing tables: ${missing.join(", ") || "none"}); lathe does not repair or replace it: move it away or set dedup.dbPath to another file`,
    );
  }
  return null;
}

export function openSqliteDedupStore(path: string, opts: SqliteDedupStoreOptions = {}): DedupStore {
  const memory = path === ":memory:";
  const file = memory ? path : resolve(path);
  const readonly = opts.readonly === true;
  const cacheMiB = opts.cacheMiB ?? 32;
  if (!(cacheMiB > 0)) throw new ProxyError("ERR_CONFIG", `dedup cacheMiB must be positive, got ${cacheMiB}`);

  if (!memory) {
    if (!readonly) {
      try {
        mkdirSync(dirname(file), { recursive: true });
      } catch (e) {
        throw new ProxyError("ERR_CONFIG", `cannot create the directory of dedup database ${file}: ${errorMessage(e)}`, e);
      }
    }
    // Refuse a non-SQLite file before SQLite sees it: nothing may write to it.
    const head = header(file);
    if (head && head.toString("latin1") !== SQLITE_MAGIC) {
      let size = "";
      try {
        size = ` (${statSync(file).size} bytes)`;
      } catch {}
      throw new ProxyError("ERR_CONFIG", `dedup database ${file}${size} is not a SQLite database; lathe leaves it untouched: move it away or set dedup.dbPath to another file`);
    }
    if (!head && readonly) throw new ProxyError("ERR_CONFIG", `dedup database ${file} does not exist or is empty (opened read-only, so lathe will not create it)`);
  }

  let db: Database.Database;
  try {
    db = new Database(file, { readonly, fileMustExist: readonly, timeout: 5000 });
  } catch (e) {
    throw describe(file, e);
  }
  try {
    let created = false;
    let state = checkExisting(file, db);
    if (state === "fresh") {
      if (readonly) throw new ProxyError("ERR_CONFIG", `dedup database ${file} is empty (opened read-only, so lathe will not create its schema)`);
      // page size and WAL before the first table; then the schema in one transaction, re-checked
      // inside it in case another process created it meanwhile.
      db.pragma("page_size = 4096");
      db.pragma("journal_mode = WAL");
      db.transaction(() => {
        state = checkExisting(file, db);
        if (state !== "fresh") return;
        db.exec(SCHEMA);
        db.prepare("INSERT INTO meta(key, value) VALUES ('created_by', ?), ('entries', 0)").run(`lathe ${VERSION}`);
        db.pragma(`application_id = ${APPLICATION_ID}`);
        db.pragma(`user_version = ${SCHEMA_VERSION}`);
        created = true;
      }).immediate();
      if (!created) state = checkExisting(file, db);
    }
    if (state instanceof ProxyError) throw state;
    if (!readonly) {
      const mode = String(pragmaValue(db, "journal_mode = WAL"));
      if (mode !== "wal" && !memory) opts.log?.warn("dedup-db-not-wal", { path: file, journalMode: mode });
      db.pragma("synchronous = NORMAL");
      db.pragma("journal_size_limit = 67108864");
    }
    db.pragma(`cache_size = -${Math.round(cacheMiB * 1024)}`);
    db.pragma("temp_store = MEMORY");
    for (const p of (process.env.LATHE_DEDUP_PRAGMAS ?? "").split(";").filter(Boolean)) db.pragma(p); // TEMP experiment
    const store = new SqliteDedupStore(file, db, readonly);
    opts.log?.info("dedup-db-open", { path: file, entries: store.count(), created, readonly });
    return store;
  } catch (e) {
    try {
      db.close();
    } catch {}
    if (e instanceof ProxyError) throw e;
    throw describe(file, e);
  }
}
