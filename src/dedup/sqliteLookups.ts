/**
 * The three lookups of the SQLite dedup store: find the key's rows in the *_new tree, then in the
 * big one (every entry in *_new is newer, sqliteSchema.ts), and read each entry until one really
 * matches. The caller has checked its arguments (entryChecks.ts).
 *
 * Each lookup is one statement, the *_new tree's arm first in a UNION ALL (SQLite runs a compound
 * SELECT's arms in order, and the outer LIMIT stops it once it has enough rows; the model tests in
 * sqliteStore.test.ts fail should the big tree's arm ever answer first): every
 * statement is a read transaction of its own, whose locks on the WAL index cost about as much as
 * the search itself, and one statement reads both trees in one snapshot even while another
 * process moves keys from one to the other. Rows come back raw (arrays): better-sqlite3 builds an
 * object row property by property, which costs more than the columns themselves.
 */
import type Database from "better-sqlite3";
import type { DigestAlgorithm } from "../warc/digest.js";
import { asBuffer } from "./entryChecks.js";
import { ALG_NAME, digestKey, digestTag, unpackRecordId, urlKey } from "./sqliteKeys.js";
import type { NameIds } from "./sqliteNames.js";
import type { DedupEntry } from "./types.js";

// The file name as a scalar subquery on files' rowid: a LEFT JOIN would let the planner choose to
// scan `files` whenever its statistics (PRAGMA optimize) say it is small.
const FIELDS = `e.url, e.date, e.record_id, (SELECT name FROM files WHERE id = e.file), e.offset, e.length, e.status, e.etag, e.last_modified`;

/** The FIELDS of an entry, in their order, from index `at` of a raw row. */
type Row = unknown[];

type Stmt<P extends unknown[]> = Database.Statement<P, Row>;

/** A raw row read as an entry: its FIELDS start at `at`; `alg` and `bytes` are the digest the query compared, or the row's own. */
function toEntry(bucket: string, alg: DigestAlgorithm, bytes: Buffer, r: Row, at: number): DedupEntry {
  return {
    bucket,
    digest: { alg, bytes },
    url: r[at] as string,
    date: r[at + 1] as string,
    recordId: unpackRecordId(r[at + 2]),
    filename: r[at + 3] as string | null,
    offset: r[at + 4] as number | null,
    length: r[at + 5] as number | null,
    status: r[at + 6] as number | null,
    etag: r[at + 7] as string | null,
    lastModified: r[at + 8] as string | null,
  };
}

/**
 * One statement over the tree's *_new level then its big one: `select(from)` is the query of one
 * level (with its own ORDER BY and LIMIT), so its parameters are bound once for each level.
 */
function newThenBig<P extends unknown[]>(db: Database.Database, tree: "by_digest" | "by_url", select: (from: string) => string, limit: string): Stmt<P> {
  // CROSS JOIN: walk the key's rows newest first, read each entry until one really matches.
  const from = (t: string) => `FROM ${t} k CROSS JOIN entries e ON e.seq = k.seq`;
  const sql = `SELECT * FROM (${select(from(`${tree}_new`))}) UNION ALL SELECT * FROM (${select(from(tree))}) LIMIT ${limit}`;
  return db.prepare<P, Row>(sql).raw() as unknown as Stmt<P>;
}

export class SqliteLookups {
  readonly #buckets: NameIds;
  readonly #byDigest: Stmt<[number, number, number, Buffer, number, number, number, Buffer]>;
  readonly #byUrlAndDigest: Stmt<[number, number, number, string, number, Buffer, number, number, number, string, number, Buffer]>;
  readonly #byUrl: Stmt<[number, number, string, number, number, number, string, number, number]>;

  constructor(db: Database.Database, buckets: NameIds) {
    this.#buckets = buckets;
    this.#byDigest = newThenBig(db, "by_digest", (from) => `SELECT ${FIELDS} ${from} WHERE k.key = ? AND e.bucket = ? AND e.alg = ? AND e.digest = ? ORDER BY k.seq DESC LIMIT 1`, "1");
    this.#byUrlAndDigest = newThenBig(
      db,
      "by_url",
      (from) => `SELECT ${FIELDS} ${from} WHERE k.key = ? AND k.tag = ? AND e.bucket = ? AND e.url = ? AND e.alg = ? AND e.digest = ? ORDER BY k.seq DESC LIMIT 1`,
      "1",
    );
    this.#byUrl = newThenBig(db, "by_url", (from) => `SELECT e.alg, e.digest, ${FIELDS} ${from} WHERE k.key = ? AND e.bucket = ? AND e.url = ? ORDER BY k.seq DESC LIMIT ?`, "?");
  }

  /** `alg` is the digest's code (sqliteKeys.ts ALG_CODE). */
  byDigest(bucket: string, alg: number, digest: Uint8Array): DedupEntry | null {
    const b = this.#buckets.find(bucket);
    if (b === undefined) return null;
    const bytes = asBuffer(digest);
    const key = digestKey(b, alg, bytes);
    const r = this.#byDigest.get(key, b, alg, bytes, key, b, alg, bytes);
    return r ? toEntry(bucket, ALG_NAME[alg]!, Buffer.from(bytes), r, 0) : null;
  }

  byUrlAndDigest(bucket: string, url: string, alg: number, digest: Uint8Array): DedupEntry | null {
    const b = this.#buckets.find(bucket);
    if (b === undefined) return null;
    const bytes = asBuffer(digest);
    const key = urlKey(b, url);
    const tag = digestTag(bytes);
    const r = this.#byUrlAndDigest.get(key, tag, b, url, alg, bytes, key, tag, b, url, alg, bytes);
    return r ? toEntry(bucket, ALG_NAME[alg]!, Buffer.from(bytes), r, 0) : null;
  }

  byUrl(bucket: string, url: string, limit: number): DedupEntry[] {
    const b = limit === 0 ? undefined : this.#buckets.find(bucket);
    if (b === undefined) return [];
    const key = urlKey(b, url);
    const rows = this.#byUrl.all(key, b, url, limit, key, b, url, limit, limit);
    return rows.map((r) => toEntry(bucket, ALG_NAME[r[0] as number]!, r[1] as Buffer, r, 2));
  }
}
