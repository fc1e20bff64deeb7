/**
 * `lathe index --dedup-db postgresql://…` (issue #22, "Import"): the entries the import finds
 * (src/dedup/importer.ts, the same reading and choice of entries as for the SQLite file) go
 * into `dedup_entries` with COPY FROM STDIN, one transaction per WARC file: a file's entries are
 * all there or none is (a file read to its damage keeps the entries of its whole records before
 * the damage, as the SQLite import does).
 *
 * A file no entry names yet — the usual case — is copied straight into `dedup_entries`, so the
 * server indexes rows while the next records are read. A file the store has seen (imported
 * before, or written by an instance) goes through a temporary table and only its records not
 * already stored are inserted, in one statement: importing the same files again adds nothing,
 * and no per-record query slows the load.
 */
import { once } from "node:events";
import { hostname } from "node:os";
import { basename } from "node:path";
import { finished } from "node:stream/promises";
import type pg from "pg";
import { from as copyFrom, type CopyStreamQuery } from "pg-copy-streams";
import { errorMessage } from "../core/errors.js";
import type { Logger } from "../core/log.js";
import type { ImportSink } from "../dedup/importer.js";
import { ALG_CODE } from "../dedup/sqliteKeys.js";
import type { DedupEntry } from "../dedup/types.js";
import { describeStartupError } from "./connect.js";
import { openSharedDatabase } from "./database.js";

const COLUMNS = "bucket, alg, digest, url, warc_date, record_id, filename, file_offset, record_length, status, etag, last_modified";

const STAGING = "lathe_import_staging";

/** Per session; emptied by every COMMIT. `ord` keeps the records' order for `seq`. */
const CREATE_STAGING = `CREATE TEMP TABLE ${STAGING} (
  ord bigserial, bucket text, alg smallint, digest bytea, url text, warc_date text, record_id text,
  filename text, file_offset bigint, record_length bigint, status integer, etag text, last_modified text
) ON COMMIT DELETE ROWS`;

/** A file's responses the store does not hold yet (same bucket, record and digest). */
const INSERT_NEW_RESPONSES = `INSERT INTO dedup_entries (${COLUMNS})
SELECT ${COLUMNS} FROM ${STAGING} s
WHERE NOT EXISTS (
  SELECT 1 FROM dedup_entries d
  WHERE d.filename = s.filename AND d.file_offset = s.file_offset AND d.record_length = s.record_length
    AND d.bucket = s.bucket AND d.url = s.url AND d.alg = s.alg AND d.digest = s.digest)
ORDER BY s.ord`;

/**
 * Revisits' originals whose URL and digest have no entry yet, or whose latest entry has no file
 * and another date (as storeSink decides for the SQLite file).
 */
const INSERT_MISSING_ORIGINALS = `INSERT INTO dedup_entries (${COLUMNS})
SELECT ${COLUMNS} FROM ${STAGING} s
WHERE NOT EXISTS (
  SELECT 1 FROM (
    SELECT d.filename, d.warc_date FROM dedup_entries d
    WHERE d.bucket = s.bucket AND d.alg = s.alg AND d.digest = s.digest AND md5(d.url) = md5(s.url) AND d.url = s.url
    ORDER BY d.seq DESC LIMIT 1) latest
  WHERE latest.filename IS NOT NULL OR latest.warc_date = s.warc_date)
ORDER BY s.ord`;

/** Two-key advisory locks live apart from the one-key lock the schema takes: "lath", then the file. */
const FILE_LOCK_CLASS = 0x6c617468;

const ESCAPES: Record<string, string> = { "\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r" };

/** A value in COPY's text format (tab-separated, `\N` for NULL). */
function copyText(v: string | null): string {
  if (v === null) return "\\N";
  return /[\\\t\n\r]/.test(v) ? v.replace(/[\\\t\n\r]/g, (c) => ESCAPES[c]!) : v;
}

const copyNumber = (v: number | null): string => (v === null ? "\\N" : String(v));

/** Entries as COPY text rows, in COLUMNS order. */
export function copyRows(entries: DedupEntry[]): string {
  let out = "";
  for (const e of entries) {
    out +=
      `${copyText(e.bucket)}\t${ALG_CODE[e.digest.alg]}\t\\\\x${e.digest.bytes.toString("hex")}\t${copyText(e.url)}\t${copyText(e.date)}\t` +
      `${copyText(e.recordId)}\t${copyText(e.filename)}\t${copyNumber(e.offset)}\t${copyNumber(e.length)}\t${copyNumber(e.status)}\t` +
      `${copyText(e.etag)}\t${copyText(e.lastModified)}\n`;
  }
  return out;
}

/** One COPY FROM STDIN on `c`: write rows, then `end` resolves with the rows the server took. */
class CopyIn {
  readonly #stream: CopyStreamQuery;
  #failure: unknown = null;

  constructor(c: pg.PoolClient, table: string) {
    this.#stream = c.query(copyFrom(`COPY ${table} (${COLUMNS}) FROM STDIN`));
    // Without a listener a server error would be thrown out of the event loop; it surfaces at the next write or at end.
    this.#stream.on("error", (e) => (this.#failure ??= e));
  }

  async write(rows: string): Promise<void> {
    if (this.#failure) throw this.#failure;
    if (!this.#stream.write(rows)) await once(this.#stream, "drain");
  }

  async end(): Promise<number> {
    if (this.#failure) throw this.#failure;
    this.#stream.end();
    await finished(this.#stream);
    return this.#stream.rowCount;
  }
}

/** The import's sink for PostgreSQL: one connection, one transaction per file. */
export class CopyImportSink implements ImportSink {
  /** Small writes keep the server indexing rows while the next records are read (one large write per file left it idle until the end). */
  readonly batchSize = 2000;
  readonly #c: pg.PoolClient;
  /** What the server is called in errors (no password). */
  readonly #where: string;
  #path = "";
  #copy: CopyIn | null = null;
  #staged = false;
  #inTransaction = false;
  #broken = false;

  private constructor(c: pg.PoolClient, where: string) {
    this.#c = c;
    this.#where = where;
  }

  /** Take one connection from `pool` for the whole import. `where` names the server in errors. */
  static async open(pool: pg.Pool, where: string): Promise<CopyImportSink> {
    const c = await pool.connect();
    try {
      // A large file is one COPY; it may take minutes and is no runaway statement.
      await c.query("SET statement_timeout = 0");
      await c.query(CREATE_STAGING);
    } catch (e) {
      c.release(true);
      throw e;
    }
    return new CopyImportSink(c, where);
  }

  async beginFile(path: string): Promise<void> {
    this.#path = path;
  }

  async add(entries: DedupEntry[]): Promise<void> {
    await this.#guard(async () => {
      this.#copy ??= await this.#startFile();
      await this.#copy.write(copyRows(entries));
    });
  }

  async endFile(): Promise<number> {
    if (!this.#copy) return 0;
    const copy = this.#copy;
    return this.#guard(async () => {
      const rows = await copy.end();
      const added = this.#staged ? ((await this.#c.query(INSERT_NEW_RESPONSES)).rowCount ?? 0) : rows;
      await this.#commit();
      this.#copy = null;
      return rows - added;
    });
  }

  async addOriginals(entries: DedupEntry[]): Promise<number> {
    this.#path = "";
    return this.#guard(async () => {
      await this.#begin();
      const copy = new CopyIn(this.#c, STAGING);
      for (let i = 0; i < entries.length; i += 10_000) await copy.write(copyRows(entries.slice(i, i + 10_000)));
      await copy.end();
      const added = (await this.#c.query(INSERT_MISSING_ORIGINALS)).rowCount ?? 0;
      await this.#commit();
      return added;
    });
  }

  /** Give the connection back; a transaction still open (an import that failed) is rolled back with it. */
  close(): void {
    this.#c.release(this.#broken || this.#inTransaction);
  }

  /** BEGIN; lock the file's name against a concurrent import of it; COPY straight in when no entry names it. */
  async #startFile(): Promise<CopyIn> {
    const name = basename(this.#path);
    await this.#begin();
    await this.#c.query("SELECT pg_advisory_xact_lock($1, hashtext($2))", [FILE_LOCK_CLASS, name]);
    const seen = await this.#c.query("SELECT 1 FROM dedup_entries WHERE filename = $1 LIMIT 1", [name]);
    this.#staged = (seen.rowCount ?? 0) > 0;
    return new CopyIn(this.#c, this.#staged ? STAGING : "dedup_entries");
  }

  async #begin(): Promise<void> {
    await this.#c.query("BEGIN");
    this.#inTransaction = true;
  }

  async #commit(): Promise<void> {
    await this.#c.query("COMMIT");
    this.#inTransaction = false;
  }

  /** Any failure leaves the connection unusable (the open transaction dies with it) and names the file. */
  async #guard<T>(fn: () => Promise<T>): Promise<T> {
    if (this.#broken) throw new Error(`${this.#where}: the import already failed`);
    try {
      return await fn();
    } catch (e) {
      this.#broken = true;
      const what = this.#path ? `loading the entries of ${this.#path}` : "loading the originals of revisits";
      const after = this.#path ? `; none of that file's entries was stored (the files before it were: run the same command again, they are skipped)` : "";
      throw new Error(`${this.#where}: ${what} failed: ${errorMessage(e)}${after}`, { cause: e });
    }
  }
}

/** The sink and what to close after the import. */
export interface CopyImportTarget {
  sink: CopyImportSink;
  close(): Promise<void>;
}

/**
 * Connect to the database `rawUrl` names (`from` says where the URL came from, for errors),
 * create or check lathe's schema, and take the import's connection. Rejects with a message that
 * says what to do (unreachable, login, missing database, not lathe's, newer schema, read-only).
 */
export async function openCopyImport(rawUrl: string, from: string, log: Logger): Promise<CopyImportTarget> {
  const db = await openSharedDatabase(rawUrl, from, { instanceId: `${hostname()}:index:${process.pid}`, log, max: 1, applicationName: "lathe index" });
  let sink: CopyImportSink;
  try {
    sink = await CopyImportSink.open(db.pool, `PostgreSQL at ${db.url.redacted}`);
  } catch (e) {
    await db.close();
    throw describeStartupError(db.url, e, from);
  }
  return {
    sink,
    async close() {
      sink.close();
      await db.close();
    },
  };
}
