/**
 * The dedup store in SQLite (issue "Deduplication", Store; decisions.md §7): better-sqlite3, WAL
 * with synchronous=NORMAL (a kill -9 at any moment leaves a consistent database holding every
 * committed transaction; the last ones may be lost on power failure, which dedup tolerates),
 * prepared statements held in fields, a synchronous API.
 *
 * This file opens the database and assembles the store from its parts: the schema and the check
 * that a database is ours (sqliteSchema.ts, the on-disk format), the file checks and error
 * messages (sqliteFile.ts), name ids (sqliteNames.ts), the lookups (sqliteLookups.ts), the writes
 * (sqliteWrites.ts, staging in sqliteStaging.ts) and the argument checks every store makes
 * (entryChecks.ts).
 *
 * Opening never resets or rewrites a database it does not recognise: a file that is not SQLite,
 * a SQLite file that is not a lathe dedup database, a damaged one, or one with a newer schema
 * fails with ProxyError("ERR_CONFIG") naming the file and what to do.
 */
import { resolve } from "node:path";
import Database from "better-sqlite3";
import { ProxyError } from "../core/errors.js";
import type { Logger } from "../core/log.js";
import { checkDigest, checkEntry, checkLimit, checkOffset } from "./entryChecks.js";
import { checkFile, describe } from "./sqliteFile.js";
import { ALG_CODE } from "./sqliteKeys.js";
import { SqliteLookups } from "./sqliteLookups.js";
import { NameIds } from "./sqliteNames.js";
import { checkExisting, createSchema } from "./sqliteSchema.js";
import { SqliteWrites } from "./sqliteWrites.js";
import type { DedupEntry, DedupStore, DigestKey } from "./types.js";

export { APPLICATION_ID, SCHEMA_VERSION } from "./sqliteSchema.js";

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

const STAGED_MIN = 65_536;
const WAL_CHECKPOINT_BYTES = 256 * 1024 * 1024;

/** The digest's algorithm code (sqliteKeys.ts), once the digest passes the checks. */
function algCode(d: DigestKey, what: string): number {
  checkDigest(d, what);
  return ALG_CODE[d.alg];
}

class SqliteDedupStore implements DedupStore {
  readonly #path: string;
  #closed = false;
  readonly #db: Database.Database;
  readonly #buckets: NameIds;
  readonly #files: NameIds;
  readonly #lookups: SqliteLookups;
  /** null when open read-only */
  readonly #writes: SqliteWrites | null;
  readonly #entries: Database.Statement<[], number>;

  constructor(path: string, db: Database.Database, readonly: boolean, stagedMin: number) {
    this.#path = path;
    this.#db = db;
    this.#buckets = new NameIds(db, "buckets");
    this.#files = new NameIds(db, "files");
    this.#lookups = new SqliteLookups(db, this.#buckets);
    this.#writes = readonly ? null : new SqliteWrites(db, this.#buckets, this.#files, stagedMin);
    this.#entries = db.prepare<[], number>("SELECT entries FROM state WHERE id = 1").pluck();
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

  #writable(): SqliteWrites {
    if (!this.#writes) throw new ProxyError("ERR_INTERNAL", `dedup database ${this.#path} is open read-only`);
    return this.#writes;
  }

  byDigest(bucket: string, digest: DigestKey): DedupEntry | null {
    const alg = algCode(digest, "byDigest");
    return this.#guard(() => this.#lookups.byDigest(bucket, alg, digest.bytes));
  }

  byUrlAndDigest(bucket: string, url: string, digest: DigestKey): DedupEntry | null {
    const alg = algCode(digest, "byUrlAndDigest");
    return this.#guard(() => this.#lookups.byUrlAndDigest(bucket, url, alg, digest.bytes));
  }

  byUrl(bucket: string, url: string, limit: number): DedupEntry[] {
    checkLimit(limit);
    return this.#guard(() => this.#lookups.byUrl(bucket, url, limit));
  }

  add(entries: DedupEntry[]): void {
    const writes = this.#writable();
    if (entries.length === 0) return;
    for (let i = 0; i < entries.length; i++) checkEntry(entries[i]!, i);
    this.#guard(() => {
      try {
        writes.add(entries);
      } catch (e) {
        // ids cached during a rolled-back transaction do not exist
        this.#buckets.forget();
        this.#files.forget();
        throw e;
      }
    });
  }

  removeFileTail(filename: string, fromOffset: number): number {
    const writes = this.#writable();
    checkOffset(fromOffset);
    return this.#guard(() => {
      const f = this.#files.find(filename);
      if (f === undefined) return 0;
      return writes.removeTail(f, fromOffset);
    });
  }

  count(): number {
    return this.#guard(() => this.#entries.get() ?? 0);
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    try {
      if (this.#writes) this.#db.pragma("optimize");
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

/** The options with their defaults, checked. */
interface Settings {
  readonly: boolean;
  cacheMiB: number;
  mmapMiB: number;
  stagedMin: number;
}

function settings(opts: SqliteDedupStoreOptions): Settings {
  const readonly = opts.readonly === true;
  const cacheMiB = opts.cacheMiB ?? 32;
  const mmapMiB = opts.mmapMiB ?? 0;
  const stagedMin = opts.stagedMin ?? STAGED_MIN;
  if (!(mmapMiB >= 0)) throw new ProxyError("ERR_CONFIG", `dedup mmapMiB must be 0 or more, got ${mmapMiB}`);
  if (!(cacheMiB > 0)) throw new ProxyError("ERR_CONFIG", `dedup cacheMiB must be positive, got ${cacheMiB}`);
  if (!(Number.isSafeInteger(stagedMin) && stagedMin > 0)) throw new ProxyError("ERR_CONFIG", `dedup stagedMin must be a positive integer, got ${stagedMin}`);
  return { readonly, cacheMiB, mmapMiB, stagedMin };
}

/** Give a fresh database its schema; returns whether this call created it. Throws when the database is not usable. */
function ensureSchema(file: string, db: Database.Database, readonly: boolean): boolean {
  let created = false;
  let state = checkExisting(file, db);
  if (state === "fresh") {
    if (readonly) throw new ProxyError("ERR_CONFIG", `dedup database ${file} is empty (opened read-only, so lathe will not create its schema)`);
    created = createSchema(file, db);
    state = created ? null : checkExisting(file, db);
  }
  if (state instanceof ProxyError) throw state;
  return created;
}

/** The pragmas of an open dedup database: WAL and checkpoints for a writer, cache and mmap for all. */
function tune(file: string, db: Database.Database, s: Settings, log: Logger | undefined): void {
  if (!s.readonly) {
    const mode = String(db.pragma("journal_mode = WAL", { simple: true }));
    if (mode !== "wal" && file !== ":memory:") log?.warn("dedup-db-not-wal", { path: file, journalMode: mode });
    db.pragma("synchronous = NORMAL");
    // Checkpoint every 256 MB of WAL instead of 4 MB: a bulk add() dirties tens of MB, and
    // pages rewritten by several transactions then reach the database file once (-25% bytes
    // written at 10 million entries). The WAL is cut back to 64 MB after each checkpoint.
    db.pragma(`wal_autocheckpoint = ${Math.ceil(WAL_CHECKPOINT_BYTES / Number(db.pragma("page_size", { simple: true })))}`);
    db.pragma("journal_size_limit = 67108864");
  }
  db.pragma(`cache_size = -${Math.round(s.cacheMiB * 1024)}`);
  db.pragma("temp_store = MEMORY");
  if (s.mmapMiB > 0) db.pragma(`mmap_size = ${Math.round(s.mmapMiB * 1024 * 1024)}`);
}

/**
 * Open (or create) the dedup database at `path`. Throws ProxyError("ERR_CONFIG") naming the file
 * when it cannot be used; never resets, recreates or repairs an existing file.
 */
export function openSqliteDedupStore(path: string, opts: SqliteDedupStoreOptions = {}): DedupStore {
  const memory = path === ":memory:";
  const file = memory ? path : resolve(path);
  const s = settings(opts);
  if (!memory) checkFile(file, s.readonly);

  let db: Database.Database;
  try {
    db = new Database(file, { readonly: s.readonly, fileMustExist: s.readonly, timeout: 5000 });
  } catch (e) {
    throw describe(file, e);
  }
  try {
    const created = ensureSchema(file, db, s.readonly);
    tune(file, db, s, opts.log);
    const store = new SqliteDedupStore(file, db, s.readonly, s.stagedMin);
    opts.log?.info("dedup-db-open", { path: file, entries: store.count(), created, readonly: s.readonly });
    return store;
  } catch (e) {
    try {
      db.close();
    } catch {}
    if (e instanceof ProxyError) throw e;
    throw describe(file, e);
  }
}
