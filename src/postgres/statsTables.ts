/**
 * The SQL of the shared Warcprox-Meta stats (tables `stats_buckets`, `stats_reservations`,
 * `applied_batches` of schema.ts). What the counts mean and when to count lives in
 * warcprox/fleetStats.ts; this file only knows the rows.
 *
 * Locking, so that a limit of N lets exactly N through across the fleet and no two transactions
 * ever wait on each other in a cycle:
 * - An admission locks the rows of all its buckets, one statement, in "C" collation order:
 *   `FOR UPDATE` the buckets whose limits it evaluates (it reads C and R and must see every
 *   reservation committed before it decides), `FOR KEY SHARE` the others (it only adds a
 *   reservation to them, which must not slip past another admission evaluating that bucket).
 *   Two admissions that evaluate no common bucket never wait for each other, so `__all__`, which
 *   every capture counts in, is not a fleet-wide bottleneck.
 * - A settle adds counters (a row update: `FOR NO KEY UPDATE`, which waits for evaluating
 *   admissions but not for reserving ones) and deletes its reservation in ONE statement, in the
 *   same order, so C + R never drops below the truth.
 * - Every statement that locks several rows takes them in the same "C" order.
 */
import { liveRow } from "./registry.js";
import type pg from "pg";
import { sqlState } from "./connect.js";

/** The NOTIFY channel: a reservation was settled somewhere in the fleet. */
export const SETTLED_CHANNEL = "lathe_stats_settled";

/** Prefix of the batch ids stats keeps in `applied_batches` (the dedup outbox has its own). */
export const STATS_BATCH_PREFIX = "stats:";

export interface Counts {
  urls: number;
  wire_bytes: number;
}

/** A bucket's counters, or counters to add to it; the shape of warcprox-compat.md §5, in its key order. */
export interface BucketRow {
  bucket: string;
  total: Counts;
  new: Counts;
  revisit: Counts;
}

/** In-flight reservations of a bucket that may still count in each sub-counter (R of §2). */
export interface ReservedCounts {
  total: number;
  new: number;
  revisit: number;
}

export interface ReservationRow {
  id: string;
  buckets: readonly string[];
  mayNew: boolean;
  mayRevisit: boolean;
}

/** Something to run a statement on: the pool, or a client inside a transaction. */
export type Sql = pg.Pool | pg.PoolClient;

const COLUMNS = "bucket, total_urls, total_bytes, new_urls, new_bytes, revisit_urls, revisit_bytes";

interface RawBucket {
  bucket: string;
  total_urls: string;
  total_bytes: string;
  new_urls: string;
  new_bytes: string;
  revisit_urls: string;
  revisit_bytes: string;
}

function bucketOf(r: RawBucket): BucketRow {
  return {
    bucket: r.bucket,
    total: { urls: Number(r.total_urls), wire_bytes: Number(r.total_bytes) },
    new: { urls: Number(r.new_urls), wire_bytes: Number(r.new_bytes) },
    revisit: { urls: Number(r.revisit_urls), wire_bytes: Number(r.revisit_bytes) },
  };
}

/** The parameters ($first…$first+6) of an `unnest` of deltas, column by column. */
function deltaColumns(deltas: readonly BucketRow[]): unknown[] {
  return [
    deltas.map((d) => d.bucket),
    deltas.map((d) => d.total.urls),
    deltas.map((d) => d.total.wire_bytes),
    deltas.map((d) => d.new.urls),
    deltas.map((d) => d.new.wire_bytes),
    deltas.map((d) => d.revisit.urls),
    deltas.map((d) => d.revisit.wire_bytes),
  ];
}

/** Add the deltas of `$first…` to their buckets, creating missing ones, rows locked in "C" order; only `WHERE guard`. */
function addDeltas(first: number, guard: string): string {
  const p = (i: number) => `$${first + i}`;
  return `INSERT INTO stats_buckets AS s (${COLUMNS})
    SELECT d.* FROM unnest(${p(0)}::text[], ${p(1)}::bigint[], ${p(2)}::bigint[], ${p(3)}::bigint[], ${p(4)}::bigint[], ${p(5)}::bigint[], ${p(6)}::bigint[])
      AS d(${COLUMNS})
    WHERE ${guard}
    ORDER BY d.bucket COLLATE "C"
    ON CONFLICT (bucket) DO UPDATE SET
      total_urls = s.total_urls + EXCLUDED.total_urls, total_bytes = s.total_bytes + EXCLUDED.total_bytes,
      new_urls = s.new_urls + EXCLUDED.new_urls, new_bytes = s.new_bytes + EXCLUDED.new_bytes,
      revisit_urls = s.revisit_urls + EXCLUDED.revisit_urls, revisit_bytes = s.revisit_bytes + EXCLUDED.revisit_bytes
    RETURNING 1`;
}

const UPSERT_BUCKETS = `INSERT INTO stats_buckets (bucket) SELECT b FROM unnest($1::text[]) AS b ORDER BY b COLLATE "C" ON CONFLICT (bucket) DO NOTHING`;

// The outer list is sorted and each LATERAL runs once per outer row, in that order, so the rows
// are locked in "C" order whatever their mode; the subquery of the other mode returns nothing.
const LOCK_BUCKETS = `SELECT n.bucket, coalesce(x.bucket, y.bucket) AS found,
    coalesce(x.total_urls, y.total_urls) AS total_urls, coalesce(x.total_bytes, y.total_bytes) AS total_bytes,
    coalesce(x.new_urls, y.new_urls) AS new_urls, coalesce(x.new_bytes, y.new_bytes) AS new_bytes,
    coalesce(x.revisit_urls, y.revisit_urls) AS revisit_urls, coalesce(x.revisit_bytes, y.revisit_bytes) AS revisit_bytes
  FROM (SELECT u.bucket, u.excl FROM unnest($1::text[], $2::boolean[]) AS u(bucket, excl) ORDER BY u.bucket COLLATE "C") AS n
  LEFT JOIN LATERAL (SELECT * FROM stats_buckets s WHERE s.bucket = n.bucket AND n.excl FOR UPDATE) AS x ON true
  LEFT JOIN LATERAL (SELECT * FROM stats_buckets s WHERE s.bucket = n.bucket AND NOT n.excl FOR KEY SHARE) AS y ON true`;

// An admission that evaluates no limit, in one statement: its rows locked FOR KEY SHARE in "C"
// order (the CTE is read whole before the first row is inserted), then the reservation, which is
// inserted only if every row exists.
const RESERVE_UNJUDGED = `WITH locked AS (SELECT bucket FROM stats_buckets WHERE bucket = ANY($3::text[]) ORDER BY bucket COLLATE "C" FOR KEY SHARE)
  INSERT INTO stats_reservations (id, instance, buckets, may_new, may_revisit)
  SELECT $1, $2, $3, $4, $5 WHERE (SELECT count(*) FROM locked) = cardinality($3::text[])
  RETURNING id`;

/** Reservation `r` is held by a live instance: this one (`me`), or one the registry lists as live. */
const liveInstance = (me: string) => `(r.instance = ${me} OR EXISTS (SELECT 1 FROM instances i WHERE i.id = r.instance AND ${liveRow("i")}))`;

const RESERVED = `SELECT b.bucket, count(*)::int AS total, (count(*) FILTER (WHERE r.may_new))::int AS new, (count(*) FILTER (WHERE r.may_revisit))::int AS revisit
  FROM stats_reservations r CROSS JOIN LATERAL unnest(r.buckets) AS b(bucket)
  WHERE r.buckets && $1::text[] AND b.bucket = ANY($1::text[]) AND ${liveInstance("$2")}
  GROUP BY b.bucket`;

// R as above, and this admission's own reservation inserted by the same statement (the count,
// from the statement's snapshot, does not see it): one round trip less while the rows are locked.
const RESERVE_COUNTING = `WITH mine AS (INSERT INTO stats_reservations (id, instance, buckets, may_new, may_revisit) VALUES ($3, $2, $4, $5, $6))
  ${RESERVED}`;

const SETTLE = `WITH gone AS (DELETE FROM stats_reservations WHERE id = $1 RETURNING id),
  counted AS (${addDeltas(2, "EXISTS (SELECT 1 FROM gone)")})
  SELECT (SELECT count(*) FROM gone)::int AS settled, pg_notify('${SETTLED_CHANNEL}', '') AS notified`;

const APPLY_BATCH = `WITH forgotten AS (DELETE FROM applied_batches WHERE id = ANY($2::text[])),
  fresh AS (INSERT INTO applied_batches (id) VALUES ($1) ON CONFLICT (id) DO NOTHING RETURNING id),
  counted AS (${addDeltas(3, "EXISTS (SELECT 1 FROM fresh)")})
  SELECT (SELECT count(*) FROM fresh)::int AS applied`;

export interface StatsTablesOptions {
  /** This instance's id (its reservations count even before its first heartbeat); read at each use, as it is final only once the proxy listens. */
  instance: () => string;
}

export class StatsTables {
  readonly #instance: () => string;
  /** Buckets known to have a committed row (rows are never deleted): their upsert is skipped. */
  readonly #known = new Set<string>();

  constructor(o: StatsTablesOptions) {
    this.#instance = o.instance;
  }

  get instance(): string {
    return this.#instance();
  }

  /** Create the rows of `buckets` that this instance has not seen committed. */
  async #ensureRows(q: Sql, buckets: readonly string[]): Promise<void> {
    if (buckets.some((b) => !this.#known.has(b))) await q.query(UPSERT_BUCKETS, [buckets]);
  }

  /**
   * Create the missing rows of `buckets` and lock them all (inside a transaction): `exclusive`
   * ones FOR UPDATE, the others FOR KEY SHARE. Returns their committed counters.
   */
  async lock(c: pg.PoolClient, buckets: readonly string[], exclusive: ReadonlySet<string>): Promise<Map<string, BucketRow>> {
    await this.#ensureRows(c, buckets);
    const excl = buckets.map((b) => exclusive.has(b));
    let rows = (await c.query<RawBucket & { found: string | null }>(LOCK_BUCKETS, [buckets, excl])).rows;
    if (rows.some((r) => r.found === null)) {
      // A row this instance believed in is gone (the table was emptied by hand): create it again.
      await c.query(UPSERT_BUCKETS, [buckets]);
      rows = (await c.query<RawBucket & { found: string | null }>(LOCK_BUCKETS, [buckets, excl])).rows;
    }
    return new Map(rows.map((r) => [r.bucket, bucketOf(r)]));
  }

  /**
   * After the transaction that locked `buckets` committed: their rows exist for everyone. (Not
   * before: another transaction skipping the upsert would not see an uncommitted row.)
   */
  remember(buckets: readonly string[]): void {
    for (const b of buckets) this.#known.add(b);
  }

  /** R per bucket: reservations of live instances (this one, or a recent heartbeat) holding it. */
  async reserved(c: Sql, buckets: readonly string[]): Promise<Map<string, ReservedCounts>> {
    const r = await c.query<ReservedCounts & { bucket: string }>(RESERVED, [buckets, this.instance]);
    return reservedMap(r.rows);
  }

  /**
   * Insert reservation `r` and return R per bucket of `buckets` as it was before (inside the
   * transaction that locked them: roll back to take the reservation back).
   */
  async reserveCounting(c: pg.PoolClient, buckets: readonly string[], r: ReservationRow): Promise<Map<string, ReservedCounts>> {
    const res = await c.query<ReservedCounts & { bucket: string }>(RESERVE_COUNTING, [buckets, this.instance, r.id, r.buckets, r.mayNew, r.mayRevisit]);
    return reservedMap(res.rows);
  }

  /**
   * Reserve for an admission that evaluates no limit (it only has to be seen by those that do):
   * one statement, no transaction of its own, so one round trip once its rows exist.
   */
  async reserveUnjudged(q: Sql, r: ReservationRow): Promise<void> {
    const params = [r.id, this.instance, r.buckets, r.mayNew, r.mayRevisit];
    await this.#ensureRows(q, r.buckets);
    if ((await q.query(RESERVE_UNJUDGED, params)).rowCount) return this.remember(r.buckets);
    // A row this instance believed in is gone (the table was emptied by hand): create it again.
    await q.query(UPSERT_BUCKETS, [r.buckets]);
    if (!(await q.query(RESERVE_UNJUDGED, params)).rowCount) throw new Error(`stats buckets ${r.buckets.join(", ")} vanished while reserving`);
  }

  /**
   * End reservation `id`: add `deltas` (none: not counted) and delete it, atomically, and wake
   * the fleet's waiters. Counts only if the reservation still exists, so a settle that is retried
   * after its first attempt did commit counts once. Returns whether it counted.
   */
  async settle(q: Sql, id: string, deltas: readonly BucketRow[]): Promise<boolean> {
    const r = await q.query<{ settled: number }>(SETTLE, [id, ...deltaColumns(deltas)]);
    return r.rows[0]!.settled > 0;
  }

  /**
   * Add a batch of deltas once: batch `id` is recorded in `applied_batches` in the same
   * statement, and a batch already recorded adds nothing. `forget` are ids of batches known to be
   * applied (never retried again): their records are deleted. Returns whether it counted.
   */
  async applyBatch(q: Sql, id: string, deltas: readonly BucketRow[], forget: readonly string[]): Promise<boolean> {
    const r = await q.query<{ applied: number }>(APPLY_BATCH, [id, forget, ...deltaColumns(deltas)]);
    return r.rows[0]!.applied > 0;
  }

  /** A bucket in which something was counted, or null. */
  async read(q: Sql, bucket: string): Promise<BucketRow | null> {
    const r = await q.query<RawBucket>(`SELECT ${COLUMNS} FROM stats_buckets WHERE bucket = $1 AND total_urls > 0`, [bucket]);
    return r.rows[0] ? bucketOf(r.rows[0]) : null;
  }

  /** Every bucket in which something was counted, in creation order. */
  async readAll(q: Sql): Promise<BucketRow[]> {
    const r = await q.query<RawBucket>(`SELECT ${COLUMNS} FROM stats_buckets WHERE total_urls > 0 ORDER BY ord`);
    return r.rows.map(bucketOf);
  }

  /** At start: this instance holds no reservation yet, so any under its id were left by a previous run. */
  async dropOwnReservations(q: Sql): Promise<number> {
    return (await q.query("DELETE FROM stats_reservations WHERE instance = $1", [this.instance])).rowCount ?? 0;
  }

  /**
   * Housekeeping: reservations of instances that have been gone (no live heartbeat) for longer
   * than `olderThanMs`, and stats batch records left by runs that died before forgetting them.
   */
  async dropAbandoned(q: Sql, olderThanMs: number): Promise<void> {
    await q.query(`DELETE FROM stats_reservations r WHERE r.created_at < now() - $1::double precision * interval '1 millisecond' AND NOT ${liveInstance("$2")}`, [olderThanMs, this.instance]);
    await q.query(`DELETE FROM applied_batches WHERE id LIKE '${STATS_BATCH_PREFIX}%' AND applied_at < now() - $1::double precision * interval '1 millisecond'`, [olderThanMs]);
  }
}

function reservedMap(rows: Array<ReservedCounts & { bucket: string }>): Map<string, ReservedCounts> {
  return new Map(rows.map((x) => [x.bucket, { total: x.total, new: x.new, revisit: x.revisit }]));
}

/**
 * Run `fn` (a whole transaction) again when PostgreSQL aborted it as a deadlock victim or a
 * serialization failure. The lock order above rules deadlocks out among lathe's own statements;
 * this covers anything else holding the rows (a person's UPDATE, a future statement).
 */
export async function retryDeadlocks<T>(fn: () => Promise<T>, attempts = 3): Promise<T> {
  for (let i = 1; ; i++) {
    try {
      return await fn();
    } catch (e) {
      const state = sqlState(e);
      if (i >= attempts || (state !== "40P01" && state !== "40001")) throw e;
    }
  }
}
