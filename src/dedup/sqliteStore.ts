/**
 * The dedup store in SQLite (issue "Deduplication", Store; decisions.md §7): better-sqlite3, WAL
 * with synchronous=NORMAL (a kill -9 at any moment leaves a consistent database holding every
 * committed transaction; the last ones may be lost on power failure, which dedup tolerates),
 * prepared statements held in fields, a synchronous API.
 *
 * Schema version 1 (`PRAGMA user_version`; `PRAGMA application_id` = "ltdd"):
 *
 *   entries(seq INTEGER PRIMARY KEY, bucket, alg, digest, url, date, record_id, file, offset,
 *           length, status, etag, last_modified)
 *     one row per entry, appended in `seq` order ("most recent" = highest seq). bucket and file
 *     are ids into buckets(id, name) / files(id, name), so a name is stored once, not per entry;
 *     alg is 1 = sha1, 2 = sha256; record_id holds lathe's own `<urn:uuid:…>` ids as 16 bytes,
 *     any other id verbatim (sqliteKeys.ts). Partial index entries_file(file, offset) serves
 *     removeFileTail.
 *   by_digest(key, seq), by_url(key, seq, tag): the two lookup paths, WITHOUT ROWID B-trees on
 *     47-bit integer keys (digestKey(bucket, alg, digest), urlKey(bucket, url); tag = two more
 *     digest bytes), about 16 bytes an entry where indexes over (bucket, alg, digest, seq) and
 *     (bucket, url, seq) take about 40 and 110. A key only narrows the search: every lookup
 *     checks bucket, alg, digest and url on the entry itself.
 *   by_digest_new, by_url_new: the same, for recent entries (a small log-structured level).
 *     Random keys make every B-tree insert land on a different page, so with 10 million entries
 *     a batch of 100,000 would rewrite nearly all of by_digest and by_url (hundreds of MB of WAL).
 *     New entries go to the small *_new trees instead (sorted, which keeps them cache-hot), and
 *     each add() moves the entries of one key range — the next slice of key space after a
 *     persistent cursor, about as many as it added — into the big trees, in key order, touching
 *     only that slice of their pages. For any one key every entry in *_new is newer than every
 *     entry in the big tree, so lookups read *_new first, then the big tree.
 *   state(entries, staged_digest, staged_url, cursor_digest, cursor_url): one row, counters and
 *     cursors, updated in the same transaction as the entries.
 *   meta(key, value): created_by, and `requires` (the lathe a newer schema needs).
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
  KEY_SPACE,
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
  /**
   * Read the database through mmap, up to this many MiB (default 0: off). Lookups in a large
   * database get about 2x faster at the tail (p99), at the price of a SIGBUS instead of an error
   * should the disk fail under a mapped page, and of mapped pages counting in the RSS.
   */
  mmapMiB?: number;
  /**
   * Tuning (tests use small values): the least number of entries kept in the *_new trees before
   * add() moves them to the big ones (the bound adapts to batch sizes above it). Default 65536.
   */
  stagedMin?: number;
}

const SCHEMA = `
CREATE TABLE meta(key TEXT PRIMARY KEY, value) WITHOUT ROWID;
CREATE TABLE state(
  id INTEGER PRIMARY KEY CHECK (id = 1),
  entries INTEGER NOT NULL,
  staged_digest INTEGER NOT NULL,
  staged_url INTEGER NOT NULL,
  cursor_digest INTEGER NOT NULL,
  cursor_url INTEGER NOT NULL
);
INSERT INTO state VALUES (1, 0, 0, 0, 0, 0);
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
CREATE TABLE by_digest_new(key INTEGER NOT NULL, seq INTEGER NOT NULL, PRIMARY KEY(key, seq)) WITHOUT ROWID;
CREATE TABLE by_url(key INTEGER NOT NULL, seq INTEGER NOT NULL, tag INTEGER NOT NULL, PRIMARY KEY(key, seq)) WITHOUT ROWID;
CREATE TABLE by_url_new(key INTEGER NOT NULL, seq INTEGER NOT NULL, tag INTEGER NOT NULL, PRIMARY KEY(key, seq)) WITHOUT ROWID;
`;
const TABLES = ["meta", "state", "buckets", "files", "entries", "by_digest", "by_digest_new", "by_url", "by_url_new"];

// The file name as a scalar subquery on files' rowid: a LEFT JOIN would let the planner choose to
// scan `files` whenever its statistics (PRAGMA optimize) say it is small.
const COLUMNS = `e.seq, e.alg, e.digest, e.url, e.date, e.record_id AS recordId,
  (SELECT name FROM files WHERE id = e.file) AS filename,
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

interface State {
  entries: number;
  staged_digest: number;
  staged_url: number;
  cursor_digest: number;
  cursor_url: number;
}

type Stmt<P extends unknown[], R = unknown> = Database.Statement<P, R>;

const SQLITE_MAGIC = "SQLite format 3\0";
/** Batches at least this large are sorted by key before they go into the *_new trees. */
const SORT_MIN = 64;
/** Sort chunk: the batch index takes the low 20 bits of the sort value. */
const SORT_CHUNK = 1 << 20;
const CACHE_LIMIT = 10_000;
const STAGED_MIN = 65_536;
const WAL_CHECKPOINT_BYTES = 256 * 1024 * 1024;

/** What to tell the operator about a database problem, by SQLite error code. */
function describe(path: string, e: unknown): ProxyError {
  const code = systemCode(e) ?? "";
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
  if (code.startsWith("SQLITE_BUSY")) return new ProxyError("ERR_CONFIG", `dedup database ${path} stayed locked by another process for 5 s (${why})`, e);
  return new ProxyError("ERR_INTERNAL", `dedup database ${path}: ${why}${code ? ` (${code})` : ""}`, e);
}

/** The first 16 bytes of a non-empty file, or null when it does not exist or is empty. */
function header(path: string): Buffer | null {
  let fd: number | undefined;
  try {
    fd = openSync(path, "r");
    const buf = Buffer.alloc(16);
    const n = readSync(fd, buf, 0, 16, 0);
    return n === 0 ? null : buf.subarray(0, n);
  } catch (e) {
    if (systemCode(e) === "ENOENT") return null;
    throw new ProxyError("ERR_CONFIG", `cannot read dedup database ${path}: ${errorMessage(e)}`, e);
  } finally {
    if (fd !== undefined) closeSync(fd);
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

function checkEntry(e: DedupEntry, i: number): void {
  if (typeof e.bucket !== "string" || e.bucket === "") throw new ProxyError("ERR_INTERNAL", `dedup entry ${i}: bucket must be a non-empty string`);
  if (typeof e.url !== "string" || typeof e.date !== "string") throw new ProxyError("ERR_INTERNAL", `dedup entry ${i}: url and date must be strings`);
  checkInt(e.offset, "offset", i);
  checkInt(e.length, "length", i);
  checkInt(e.status, "status", i);
  checkDigest(e.digest, `dedup entry ${i}`);
}

/**
 * Call `each(i)` for i < n in the order of keys[i] (47-bit). Sorted on the keys' top 33 bits with
 * the index in the low 20, which a Float64Array sorts natively, without a comparator.
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
 * Inserts rows `rows` at a time with one multi-row INSERT (one call into SQLite instead of
 * `rows`), the rest one by one. Callers write a row's values into `p` from the offset `slot()`
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
      this.#many.run(...this.p);
      this.#pos = 0;
    }
    const at = this.#pos;
    this.#pos += this.#cols;
    return at;
  }

  finish(): void {
    if (this.#pos === this.p.length) this.#many.run(...this.p);
    else for (let at = 0; at < this.#pos; at += this.#cols) this.#one.run(...this.p.slice(at, at + this.#cols));
    this.#pos = 0;
  }
}

/** One lookup path: its big tree, its *_new tree, and moving key ranges from one to the other. */
class KeyTree {
  readonly #promote: Stmt<[number, number]>;
  readonly #dropStaged: Stmt<[number, number]>;
  readonly #delete: Stmt<[number, number]>;
  readonly #deleteStaged: Stmt<[number, number]>;

  constructor(db: Database.Database, table: string, columns: string) {
    this.#promote = db.prepare(`INSERT INTO ${table}(${columns}) SELECT ${columns} FROM ${table}_new WHERE key >= ? AND key < ? ORDER BY key, seq`);
    this.#dropStaged = db.prepare(`DELETE FROM ${table}_new WHERE key >= ? AND key < ?`);
    this.#delete = db.prepare(`DELETE FROM ${table} WHERE key = ? AND seq = ?`);
    this.#deleteStaged = db.prepare(`DELETE FROM ${table}_new WHERE key = ? AND seq = ?`);
  }

  /**
   * Move the staged entries of the next key range after `cursor` to the big tree: a slice of key
   * space expected to hold `want` of the `staged` entries. Returns [moved, new cursor].
   */
  promote(cursor: number, staged: number, want: number): [number, number] {
    const width = Math.min(KEY_SPACE, Math.ceil((KEY_SPACE * want) / staged));
    let moved = 0;
    const end = cursor + width;
    const ranges: Array<[number, number]> = end <= KEY_SPACE ? [[cursor, end]] : [[cursor, KEY_SPACE], [0, end - KEY_SPACE]];
    for (const [a, b] of ranges) {
      this.#promote.run(a, b);
      moved += this.#dropStaged.run(a, b).changes;
    }
    return [moved, end % KEY_SPACE];
  }

  /** Remove one entry's row, wherever it is; true when it was staged. */
  remove(key: number, seq: number): boolean {
    if (this.#deleteStaged.run(key, seq).changes) return true;
    this.#delete.run(key, seq);
    return false;
  }
}

class SqliteDedupStore implements DedupStore {
  readonly #path: string;
  readonly #readonly: boolean;
  readonly #stagedMin: number;
  /** Moving average of add() batch sizes in this process: what the staging bound adapts to. */
  #batchAvg = 0;
  #closed = false;
  readonly #db: Database.Database;
  /** name → id, for names known to exist (ids are never reused or changed). */
  readonly #bucketIds = new Map<string, number>();
  readonly #fileIds = new Map<string, number>();

  readonly #bucketId: Stmt<[string], number>;
  readonly #insBucket: Stmt<[string]>;
  readonly #fileId: Stmt<[string], number>;
  readonly #insFile: Stmt<[string]>;
  readonly #maxSeq: Stmt<[], number | null>;
  readonly #state: Stmt<[], State>;
  readonly #setState: Stmt<[number, number, number, number, number]>;
  readonly #entries: Stmt<[], number>;
  readonly #insEntries: Inserter | null;
  readonly #insByDigest: Inserter | null;
  readonly #insByUrl: Inserter | null;
  readonly #digestTree: KeyTree | null;
  readonly #urlTree: KeyTree | null;
  /** [staged, big] each */
  readonly #byDigest: Array<Stmt<[number, number, number, Buffer], Row>>;
  readonly #byUrlAndDigest: Array<Stmt<[number, number, number, string, number, Buffer], Row>>;
  readonly #byUrl: Array<Stmt<[number, number, string, number], Row>>;
  readonly #tail: Stmt<[number, number], { seq: number; bucket: number; alg: number; digest: Buffer; url: string }>;
  readonly #delTail: Stmt<[number, number]>;
  readonly #add: Database.Transaction<(entries: DedupEntry[]) => void>;
  readonly #removeTail: Database.Transaction<(file: number, from: number) => number>;

  constructor(path: string, db: Database.Database, readonly: boolean, stagedMin: number) {
    this.#path = path;
    this.#db = db;
    this.#readonly = readonly;
    this.#stagedMin = stagedMin;
    this.#bucketId = db.prepare<[string], number>("SELECT id FROM buckets WHERE name = ?").pluck();
    this.#insBucket = db.prepare("INSERT INTO buckets(name) VALUES (?)");
    this.#fileId = db.prepare<[string], number>("SELECT id FROM files WHERE name = ?").pluck();
    this.#insFile = db.prepare("INSERT INTO files(name) VALUES (?)");
    this.#maxSeq = db.prepare<[], number | null>("SELECT max(seq) FROM entries").pluck();
    this.#state = db.prepare<[], State>("SELECT entries, staged_digest, staged_url, cursor_digest, cursor_url FROM state WHERE id = 1");
    this.#setState = db.prepare("UPDATE state SET entries = ?, staged_digest = ?, staged_url = ?, cursor_digest = ?, cursor_url = ? WHERE id = 1");
    this.#entries = db.prepare<[], number>("SELECT entries FROM state WHERE id = 1").pluck();
    if (readonly) {
      this.#insEntries = this.#insByDigest = this.#insByUrl = null;
      this.#digestTree = this.#urlTree = null;
    } else {
      const cols = ["seq", "bucket", "alg", "digest", "url", "date", "record_id", "file", "offset", "length", "status", "etag", "last_modified"];
      this.#insEntries = new Inserter(db, "entries", cols, 64);
      this.#insByDigest = new Inserter(db, "by_digest_new", ["key", "seq"], 256);
      this.#insByUrl = new Inserter(db, "by_url_new", ["key", "seq", "tag"], 256);
      this.#digestTree = new KeyTree(db, "by_digest", "key, seq");
      this.#urlTree = new KeyTree(db, "by_url", "key, seq, tag");
    }
    // CROSS JOIN: walk the key's rows newest first, read each entry until one really matches.
    const from = (t: string) => `FROM ${t} k CROSS JOIN entries e ON e.seq = k.seq`;
    this.#byDigest = ["by_digest_new", "by_digest"].map((t) =>
      db.prepare(`SELECT ${COLUMNS} ${from(t)} WHERE k.key = ? AND e.bucket = ? AND e.alg = ? AND e.digest = ? ORDER BY k.seq DESC LIMIT 1`),
    );
    this.#byUrlAndDigest = ["by_url_new", "by_url"].map((t) =>
      db.prepare(`SELECT ${COLUMNS} ${from(t)} WHERE k.key = ? AND k.tag = ? AND e.bucket = ? AND e.url = ? AND e.alg = ? AND e.digest = ? ORDER BY k.seq DESC LIMIT 1`),
    );
    this.#byUrl = ["by_url_new", "by_url"].map((t) =>
      db.prepare(`SELECT ${COLUMNS} ${from(t)} WHERE k.key = ? AND e.bucket = ? AND e.url = ? ORDER BY k.seq DESC LIMIT ?`),
    );
    this.#tail = db.prepare("SELECT seq, bucket, alg, digest, url FROM entries WHERE file = ? AND offset >= ?");
    this.#delTail = db.prepare("DELETE FROM entries WHERE file = ? AND offset >= ?");
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
      const key = digestKey(b, alg, bytes);
      const r = this.#byDigest[0]!.get(key, b, alg, bytes) ?? this.#byDigest[1]!.get(key, b, alg, bytes);
      return r ? this.#toEntry(bucket, r) : null;
    });
  }

  byUrlAndDigest(bucket: string, url: string, digest: DigestKey): DedupEntry | null {
    const alg = checkDigest(digest, "byUrlAndDigest");
    return this.#guard(() => {
      const b = this.#lookupBucket(bucket);
      if (b === undefined) return null;
      const bytes = asBuffer(digest.bytes);
      const key = urlKey(b, url);
      const tag = digestTag(bytes);
      const r = this.#byUrlAndDigest[0]!.get(key, tag, b, url, alg, bytes) ?? this.#byUrlAndDigest[1]!.get(key, tag, b, url, alg, bytes);
      return r ? this.#toEntry(bucket, r) : null;
    });
  }

  byUrl(bucket: string, url: string, limit: number): DedupEntry[] {
    if (!Number.isSafeInteger(limit) || limit < 0) throw new ProxyError("ERR_INTERNAL", `byUrl: limit must be a non-negative integer, got ${limit}`);
    return this.#guard(() => {
      const b = limit === 0 ? undefined : this.#lookupBucket(bucket);
      if (b === undefined) return [];
      const key = urlKey(b, url);
      const rows = this.#byUrl[0]!.all(key, b, url, limit);
      if (rows.length < limit) rows.push(...this.#byUrl[1]!.all(key, b, url, limit - rows.length));
      return rows.map((r) => this.#toEntry(bucket, r));
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

  #bucketFor(name: string): number {
    let b = this.#lookupBucket(name);
    if (b === undefined) {
      b = Number(this.#insBucket.run(name).lastInsertRowid);
      this.#remember(this.#bucketIds, name, b);
    }
    return b;
  }

  #fileFor(name: string): number {
    let f = this.#fileIds.get(name);
    if (f === undefined) {
      f = this.#fileId.get(name) ?? Number(this.#insFile.run(name).lastInsertRowid);
      this.#remember(this.#fileIds, name, f);
    }
    return f;
  }

  #addTx(entries: DedupEntry[]): void {
    const n = entries.length;
    const first = (this.#maxSeq.get() ?? 0) + 1;
    const dkeys = new Float64Array(n);
    const ukeys = new Float64Array(n);
    const tags = new Uint16Array(n);
    const rows = this.#insEntries!;
    const p = rows.p;
    rows.reset();
    for (let i = 0; i < n; i++) {
      const e = entries[i]!;
      const b = this.#bucketIds.get(e.bucket) ?? this.#bucketFor(e.bucket);
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
      p[at + 7] = e.filename === null || e.filename === undefined ? null : this.#fileFor(e.filename);
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
    const byDigest = this.#insByDigest!;
    const pd = byDigest.p;
    byDigest.reset();
    inKeyOrder(dkeys, n, (i) => {
      const at = byDigest.slot();
      pd[at] = dkeys[i];
      pd[at + 1] = first + i;
    });
    byDigest.finish();
    const byUrl = this.#insByUrl!;
    const pu = byUrl.p;
    byUrl.reset();
    inKeyOrder(ukeys, n, (i) => {
      const at = byUrl.slot();
      pu[at] = ukeys[i];
      pu[at + 1] = first + i;
      pu[at + 2] = tags[i];
    });
    byUrl.finish();

    // Keep the *_new trees near their bound, promoting as many entries as are over it (at most
    // about two batches' worth per add(), so a lowered bound never stalls one call). A batch of n
    // entries dirties about min(n, pages of the *_new tree) pages there, plus the fraction
    // n/staged of the big tree's pages when as many are promoted: sqrt(n × entries) staged
    // minimises the sum. Promoting costs CPU as well and pays only once the big tree holds well
    // over ~26 batches (below that a batch dirties most of its pages anyway): until then, none.
    const s = this.#state.get()!;
    const entriesNow = s.entries + n;
    this.#batchAvg = this.#batchAvg === 0 ? n : 0.8 * this.#batchAvg + 0.2 * n;
    const batch = this.#batchAvg;
    const bound = Math.max(this.#stagedMin, Math.ceil(Math.sqrt(batch * entriesNow)), entriesNow < 26 * batch ? entriesNow : 0);
    const most = 2 * n + 256;
    let [stagedD, cursorD, stagedU, cursorU] = [s.staged_digest + n, s.cursor_digest, s.staged_url + n, s.cursor_url];
    if (stagedD > bound) {
      const [moved, next] = this.#digestTree!.promote(cursorD, stagedD, Math.min(most, stagedD - bound));
      stagedD -= moved;
      cursorD = next;
    }
    if (stagedU > bound) {
      const [moved, next] = this.#urlTree!.promote(cursorU, stagedU, Math.min(most, stagedU - bound));
      stagedU -= moved;
      cursorU = next;
    }
    this.#setState.run(entriesNow, stagedD, stagedU, cursorD, cursorU);
  }

  removeFileTail(filename: string, fromOffset: number): number {
    this.#writable();
    if (!Number.isSafeInteger(fromOffset) || fromOffset < 0) throw new ProxyError("ERR_INTERNAL", `removeFileTail: offset must be a non-negative integer, got ${fromOffset}`);
    return this.#guard(() => {
      const f = this.#fileIds.get(filename) ?? this.#fileId.get(filename);
      if (f === undefined) return 0;
      return this.#removeTail.immediate(f, fromOffset);
    });
  }

  #removeTailTx(file: number, from: number): number {
    const s = this.#state.get()!;
    let [stagedD, stagedU] = [s.staged_digest, s.staged_url];
    for (const r of this.#tail.all(file, from)) {
      if (this.#digestTree!.remove(digestKey(r.bucket, r.alg, r.digest), r.seq)) stagedD--;
      if (this.#urlTree!.remove(urlKey(r.bucket, r.url), r.seq)) stagedU--;
    }
    const n = this.#delTail.run(file, from).changes;
    if (n) this.#setState.run(s.entries - n, stagedD, stagedU, s.cursor_digest, s.cursor_url);
    return n;
  }

  count(): number {
    return this.#guard(() => this.#entries.get() ?? 0);
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

/** Why a SQLite database cannot be used, "fresh" for an empty one, null when it is ours. */
function checkExisting(path: string, db: Database.Database): ProxyError | "fresh" | null {
  const appId = Number(db.pragma("application_id", { simple: true }));
  const version = Number(db.pragma("user_version", { simple: true }));
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

/**
 * Open (or create) the dedup database at `path`. Throws ProxyError("ERR_CONFIG") naming the file
 * when it cannot be used; never resets, recreates or repairs an existing file.
 */
export function openSqliteDedupStore(path: string, opts: SqliteDedupStoreOptions = {}): DedupStore {
  const memory = path === ":memory:";
  const file = memory ? path : resolve(path);
  const readonly = opts.readonly === true;
  const cacheMiB = opts.cacheMiB ?? 32;
  const mmapMiB = opts.mmapMiB ?? 0;
  const stagedMin = opts.stagedMin ?? STAGED_MIN;
  if (!(mmapMiB >= 0)) throw new ProxyError("ERR_CONFIG", `dedup mmapMiB must be 0 or more, got ${mmapMiB}`);
  if (!(cacheMiB > 0)) throw new ProxyError("ERR_CONFIG", `dedup cacheMiB must be positive, got ${cacheMiB}`);
  if (!(Number.isSafeInteger(stagedMin) && stagedMin > 0)) throw new ProxyError("ERR_CONFIG", `dedup stagedMin must be a positive integer, got ${stagedMin}`);

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
      // Page size and WAL before the first table; then the schema in one transaction, re-checked
      // inside it in case another process created it meanwhile. 8 KiB pages: bulk loads ~25%
      // faster than 4 KiB (less per-page work for the same bytes), lookups as fast, while a
      // one-entry add() still writes only ~7 pages (56 KB) of WAL; 16 KiB is no faster.
      db.pragma("page_size = 8192");
      db.pragma("journal_mode = WAL");
      db.transaction(() => {
        if (checkExisting(file, db) !== "fresh") return;
        db.exec(SCHEMA);
        db.prepare("INSERT INTO meta(key, value) VALUES ('created_by', ?)").run(`lathe ${VERSION}`);
        db.pragma(`application_id = ${APPLICATION_ID}`);
        db.pragma(`user_version = ${SCHEMA_VERSION}`);
        created = true;
      }).immediate();
      state = created ? null : checkExisting(file, db);
    }
    if (state instanceof ProxyError) throw state;
    if (!readonly) {
      const mode = String(db.pragma("journal_mode = WAL", { simple: true }));
      if (mode !== "wal" && !memory) opts.log?.warn("dedup-db-not-wal", { path: file, journalMode: mode });
      db.pragma("synchronous = NORMAL");
      // Checkpoint every 256 MB of WAL instead of 4 MB: a bulk add() dirties tens of MB, and
      // pages rewritten by several transactions then reach the database file once (-25% bytes
      // written at 10 million entries). The WAL is cut back to 64 MB after each checkpoint.
      db.pragma(`wal_autocheckpoint = ${Math.ceil(WAL_CHECKPOINT_BYTES / Number(db.pragma("page_size", { simple: true })))}`);
      db.pragma("journal_size_limit = 67108864");
    }
    db.pragma(`cache_size = -${Math.round(cacheMiB * 1024)}`);
    db.pragma("temp_store = MEMORY");
    if (mmapMiB > 0) db.pragma(`mmap_size = ${Math.round(mmapMiB * 1024 * 1024)}`);
    const store = new SqliteDedupStore(file, db, readonly, stagedMin);
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
