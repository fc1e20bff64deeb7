/**
 * The dedup store in the shared PostgreSQL (issue "A fleet…": dedup across instances).
 *
 * - Lookups are one indexed query each (the most recent entry wins, as in SQLite). While the
 *   server is away they fail at once, and the capture is written as a full response: a revisit
 *   that cannot be verified is never written.
 * - Entries are added only after their records are on disk (the Deduplicator's rule); while the
 *   server is away they queue in the outbox (outbox.ts), which drains, in order, when it is back
 *   and before anything new reaches it.
 * - Claims: a capture about to write an original claims its digest (one INSERT … ON CONFLICT),
 *   so an identical payload captured by another instance at the same moment waits for that
 *   original instead of becoming a second one. A claim ends when its capture's entry is added
 *   (or it failed), when it expires, or when the registry drops its dead instance.
 */
import type { Logger } from "../core/log.js";
import { checkDigest, checkEntry, checkLimit, checkOffset } from "../dedup/entryChecks.js";
import { ALG_CODE, ALG_NAME } from "../dedup/sqliteKeys.js";
import type { Claim, DedupEntry, DedupIndex, DigestKey } from "../dedup/types.js";
import { isConnectionError } from "./connect.js";
import type { SharedDatabase } from "./database.js";
import { Outbox } from "./outbox.js";

/** The digest algorithms' codes in the `alg` column: the same as the SQLite store's. */
const ALG = ALG_CODE;

/** A claim outlives a killed instance at most this long (the registry usually removes it sooner). */
const CLAIM_TTL = "10 minutes";
const COUNT_EVERY_MS = 10_000;

const COLUMNS = "bucket, alg, digest, url, warc_date, record_id, filename, file_offset, record_length, status, etag, last_modified";

interface Row {
  bucket: string;
  alg: number;
  digest: Buffer;
  url: string;
  warc_date: string;
  record_id: string | null;
  filename: string | null;
  file_offset: string | null;
  record_length: string | null;
  status: number | null;
  etag: string | null;
  last_modified: string | null;
}

const num = (v: string | null): number | null => (v === null ? null : Number(v));

function entryOf(r: Row): DedupEntry {
  return {
    bucket: r.bucket,
    digest: { alg: ALG_NAME[r.alg]!, bytes: r.digest },
    url: r.url,
    date: r.warc_date,
    recordId: r.record_id,
    filename: r.filename,
    offset: num(r.file_offset),
    length: num(r.record_length),
    status: r.status,
    etag: r.etag,
    lastModified: r.last_modified,
  };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms).unref());

export class PostgresDedupIndex implements DedupIndex {
  readonly engine = "postgresql";
  readonly #db: SharedDatabase;
  readonly #outbox: Outbox;
  readonly #log: Logger;
  #count = 0;
  #counter: NodeJS.Timeout | null = null;

  constructor(db: SharedDatabase, outbox: Outbox, log: Logger) {
    this.#db = db;
    this.#outbox = outbox;
    this.#log = log;
    // What was queued lands before the server takes anything new.
    db.onUp(async () => {
      const n = await this.#outbox.drain((batch) => this.#insert(batch));
      if (n) this.#log.info("dedup-outbox-drained", { entries: n, store: db.name });
    });
  }

  /** Drain what a previous run queued, and start counting entries in the background. */
  async start(): Promise<void> {
    if (this.#outbox.pending) {
      const n = await this.#outbox.drain((batch) => this.#insert(batch));
      this.#log.info("dedup-outbox-drained", { entries: n, store: this.#db.name, atStart: true });
    }
    await this.#refreshCount();
    this.#counter = setInterval(() => void this.#refreshCount(), COUNT_EVERY_MS);
    this.#counter.unref();
  }

  async #one(sql: string, params: unknown[]): Promise<DedupEntry | null> {
    const r = await this.#db.run((p) => p.query<Row>(sql, params));
    return r.rows[0] ? entryOf(r.rows[0]) : null;
  }

  byDigest(bucket: string, digest: DigestKey): Promise<DedupEntry | null> {
    checkDigest(digest, "byDigest");
    return this.#one(`SELECT ${COLUMNS} FROM dedup_entries WHERE bucket = $1 AND alg = $2 AND digest = $3 ORDER BY seq DESC LIMIT 1`, [bucket, ALG[digest.alg], digest.bytes]);
  }

  byUrlAndDigest(bucket: string, url: string, digest: DigestKey): Promise<DedupEntry | null> {
    checkDigest(digest, "byUrlAndDigest");
    return this.#one(`SELECT ${COLUMNS} FROM dedup_entries WHERE bucket = $1 AND alg = $2 AND digest = $3 AND url = $4 ORDER BY seq DESC LIMIT 1`, [bucket, ALG[digest.alg], digest.bytes, url]);
  }

  async byUrl(bucket: string, url: string, limit: number): Promise<DedupEntry[]> {
    checkLimit(limit);
    const r = await this.#db.run((p) => p.query<Row>(`SELECT ${COLUMNS} FROM dedup_entries WHERE bucket = $1 AND md5(url) = md5($2) AND url = $2 ORDER BY seq DESC LIMIT $3`, [bucket, url, limit]));
    return r.rows.map(entryOf);
  }

  async add(entries: DedupEntry[]): Promise<void> {
    if (entries.length === 0) return;
    entries.forEach(checkEntry);
    if (this.#db.up) {
      try {
        await this.#insert(entries);
        return;
      } catch (e) {
        if (!isConnectionError(e)) throw e; // a statement the server refused, not an outage
        this.#db.markDown(e);
      }
    }
    this.#outbox.append(entries);
  }

  /** One multi-row INSERT (arrays unnested server-side: one statement whatever the batch size). */
  async #insert(entries: DedupEntry[]): Promise<void> {
    const col = <T>(f: (e: DedupEntry) => T) => entries.map(f);
    await this.#db.pool.query(
      `INSERT INTO dedup_entries (${COLUMNS}, instance)
       SELECT *, $13::text FROM unnest($1::text[], $2::smallint[], $3::bytea[], $4::text[], $5::text[], $6::text[], $7::text[], $8::bigint[], $9::bigint[], $10::int[], $11::text[], $12::text[])`,
      [
        col((e) => e.bucket),
        col((e) => ALG[e.digest.alg]),
        col((e) => e.digest.bytes),
        col((e) => e.url),
        col((e) => e.date),
        col((e) => e.recordId),
        col((e) => e.filename),
        col((e) => e.offset),
        col((e) => e.length),
        col((e) => e.status),
        col((e) => e.etag),
        col((e) => e.lastModified),
        this.#db.instanceId,
      ],
    );
  }

  async claim(digest: DigestKey, waitMs: number): Promise<Claim> {
    checkDigest(digest, "claim");
    const key = [ALG[digest.alg], digest.bytes];
    const deadline = Date.now() + waitMs;
    try {
      const won = await this.#db.run((p) =>
        p.query(
          `INSERT INTO dedup_claims (alg, digest, instance, expires_at) VALUES ($1, $2, $3, now() + interval '${CLAIM_TTL}')
           ON CONFLICT (alg, digest) DO UPDATE SET instance = EXCLUDED.instance, expires_at = EXCLUDED.expires_at
           WHERE dedup_claims.expires_at < now() OR dedup_claims.instance = EXCLUDED.instance
           RETURNING instance`,
          [...key, this.#db.instanceId],
        ),
      );
      if (won.rowCount) return { kind: "mine", release: () => this.#release(key), lookAgain: true };
      // Another instance is writing this payload: wait (bounded) for its claim to end.
      for (let pause = 10; Date.now() < deadline; pause = Math.min(pause * 2, 100)) {
        await sleep(Math.min(pause, Math.max(deadline - Date.now(), 0)));
        const held = await this.#db.run((p) => p.query("SELECT 1 FROM dedup_claims WHERE alg = $1 AND digest = $2 AND expires_at > now()", key));
        if (!held.rowCount) return { kind: "settled" };
      }
    } catch (e) {
      if (this.#db.up) this.#log.warn("dedup-claim-failed", { error: (e as Error).message });
    }
    return { kind: "undecided" };
  }

  #release(key: unknown[]): void {
    // Best effort: a claim left behind expires, and the registry removes a dead instance's claims.
    this.#db.run((p) => p.query("DELETE FROM dedup_claims WHERE alg = $1 AND digest = $2 AND instance = $3", [...key, this.#db.instanceId])).catch(() => undefined);
  }

  async removeFileTail(filename: string, fromOffset: number): Promise<number> {
    checkOffset(fromOffset);
    const queued = await this.#outbox.removeFileTail(filename, fromOffset);
    const r = await this.#db.run((p) => p.query("DELETE FROM dedup_entries WHERE filename = $1 AND file_offset >= $2", [filename, fromOffset]));
    return queued + (r.rowCount ?? 0);
  }

  /** Exact below a million entries; above, the planner's estimate (counting would scan the table). */
  async #refreshCount(): Promise<void> {
    try {
      const r = await this.#db.run((p) => p.query<{ n: string }>("SELECT reltuples::bigint AS n FROM pg_class WHERE oid = 'dedup_entries'::regclass"));
      let n = Number(r.rows[0]?.n ?? -1);
      if (n < 1_000_000) n = Number((await this.#db.run((p) => p.query<{ n: string }>("SELECT count(*) AS n FROM dedup_entries"))).rows[0]!.n);
      this.#count = n;
    } catch {
      // away: keep the last figure
    }
  }

  count(): number {
    return this.#count;
  }

  report(): Record<string, unknown> {
    return {
      store: this.#db.name,
      reachable: this.#db.up,
      unreachableReason: this.#db.downReason,
      ...this.#outbox.report(),
    };
  }

  async close(): Promise<void> {
    if (this.#counter) clearInterval(this.#counter);
  }
}
