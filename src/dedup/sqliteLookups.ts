/**
 * The three lookups of the SQLite dedup store: find the key's rows in the *_new tree, then in the
 * big one (every entry in *_new is newer, sqliteSchema.ts), and read each entry until one really
 * matches. The caller has checked its arguments (entryChecks.ts).
 */
import type Database from "better-sqlite3";
import { asBuffer } from "./entryChecks.js";
import { ALG_NAME, digestKey, digestTag, unpackRecordId, urlKey } from "./sqliteKeys.js";
import type { NameIds } from "./sqliteNames.js";
import type { DedupEntry } from "./types.js";

// The file name as a scalar subquery on files' rowid: a LEFT JOIN would let the planner choose to
// scan `files` whenever its statistics (PRAGMA optimize) say it is small.
const COLUMNS = `e.seq, e.alg, e.digest, e.url, e.date, e.record_id AS recordId,
  (SELECT name FROM files WHERE id = e.file) AS filename,
  e.offset, e.length, e.status, e.etag, e.last_modified AS lastModified`;

/** An entry as the lookups read it: the digest's algorithm as its code, the record id packed. */
interface Row extends Pick<DedupEntry, "url" | "date" | "filename" | "offset" | "length" | "status" | "etag" | "lastModified"> {
  seq: number;
  alg: number;
  digest: Buffer;
  recordId: string | Buffer | null;
}

type Stmt<P extends unknown[], R = unknown> = Database.Statement<P, R>;

function toEntry(bucket: string, r: Row): DedupEntry {
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

export class SqliteLookups {
  readonly #buckets: NameIds;
  /** [staged, big] each */
  readonly #byDigest: Array<Stmt<[number, number, number, Buffer], Row>>;
  readonly #byUrlAndDigest: Array<Stmt<[number, number, number, string, number, Buffer], Row>>;
  readonly #byUrl: Array<Stmt<[number, number, string, number], Row>>;

  constructor(db: Database.Database, buckets: NameIds) {
    this.#buckets = buckets;
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
  }

  /** `alg` is the digest's code (sqliteKeys.ts ALG_CODE). */
  byDigest(bucket: string, alg: number, digest: Uint8Array): DedupEntry | null {
    const b = this.#buckets.find(bucket);
    if (b === undefined) return null;
    const bytes = asBuffer(digest);
    const key = digestKey(b, alg, bytes);
    const r = this.#byDigest[0]!.get(key, b, alg, bytes) ?? this.#byDigest[1]!.get(key, b, alg, bytes);
    return r ? toEntry(bucket, r) : null;
  }

  byUrlAndDigest(bucket: string, url: string, alg: number, digest: Uint8Array): DedupEntry | null {
    const b = this.#buckets.find(bucket);
    if (b === undefined) return null;
    const bytes = asBuffer(digest);
    const key = urlKey(b, url);
    const tag = digestTag(bytes);
    const r = this.#byUrlAndDigest[0]!.get(key, tag, b, url, alg, bytes) ?? this.#byUrlAndDigest[1]!.get(key, tag, b, url, alg, bytes);
    return r ? toEntry(bucket, r) : null;
  }

  byUrl(bucket: string, url: string, limit: number): DedupEntry[] {
    const b = limit === 0 ? undefined : this.#buckets.find(bucket);
    if (b === undefined) return [];
    const key = urlKey(b, url);
    const rows = this.#byUrl[0]!.all(key, b, url, limit);
    if (rows.length < limit) rows.push(...this.#byUrl[1]!.all(key, b, url, limit - rows.length));
    return rows.map((r) => toEntry(bucket, r));
  }
}
