/**
 * Warcprox-Meta stats buckets and limits shared by a fleet of lathe instances through PostgreSQL
 * (issue #22), with the semantics and answers of limits.ts (warcprox-compat.md §2, §5).
 *
 * - A capture whose header has limits, soft limits or `stats.buckets` is admitted in one
 *   transaction (postgres/statsTables.ts): its bucket rows locked, C and R counted (R: the
 *   reservations of live instances), judged exactly as limits.ts judges, and on admission a
 *   reservation row inserted. Its release adds the outcome and deletes the reservation in one
 *   statement. A limit of N therefore lets exactly N through across the fleet.
 * - Undecided (C < N ≤ C + R): decided again whenever a reservation settles anywhere (LISTEN/
 *   NOTIFY: a waiter hears of a settle one round trip after it commits, and nothing is polled
 *   while nothing settles), plus once a second in case a notification was missed or a dead
 *   instance's reservations stopped counting; pessimistic at the timeout, as limits.ts.
 * - Captures without limits and without `stats.buckets` count only in `__all__` and
 *   `__unspecified__`: they take no reservation and no round trip; their tallies are sent in
 *   batches (fleetTally.ts). So a limit on `__all__` or `__unspecified__` is exact only against
 *   the captures that carry Warcprox-Meta limits or stats buckets.
 * - The store away: a request with limits is refused with 503 naming the store (never admitted
 *   past a limit nobody can check); one without limits is admitted and its counts are held until
 *   the store is back, as are settles that failed (fleetTally.ts).
 * - Reads (`bucket`, `buckets`) ask the store each time: fleet-wide figures, exact as of the read.
 */
import { randomUUID } from "node:crypto";
import { ProxyError, errorMessage } from "../core/errors.js";
import { KeyedQueue } from "../core/keyedQueue.js";
import type { Logger } from "../core/log.js";
import type { SharedDatabase } from "../postgres/database.js";
import { isConnectionError } from "../postgres/connect.js";
import { NotifyListener } from "../postgres/notifyListener.js";
import { type BucketRow, type ReservedCounts, SETTLED_CHANNEL, StatsTables, retryDeadlocks } from "../postgres/statsTables.js";
import type { WarcproxMeta } from "./warcproxMeta.js";
import { type ActiveLimit, type AdmissionScope, type AdmitOptions, type AdmitResult, type Admitted, DEFAULT_WAIT_MS, type LimitCounts, activeLimits, admissionScope, judge, refusal, storeUnavailable } from "./limits.js";
import { type BucketStats, type CaptureOutcome, bucketsOf } from "./stats.js";
import type { StatsStore } from "./statsStore.js";
import { HeldCounts, outcomeDeltas } from "./fleetTally.js";
import { type Decision, WAIT, awaitVerdict } from "./fleetWait.js";

export interface FleetStatsOptions {
  db: SharedDatabase;
  log: Logger;
  /** How often held tallies are sent (default 250 ms). */
  flushMs?: number;
  /** How often undecided admissions decide again without a notification (default 1000 ms). */
  recheckMs?: number;
}

/** One admission that goes through the store. */
interface Request {
  buckets: string[];
  scope: AdmissionScope;
  limits: ActiveLimit[];
  /** The buckets whose limits it evaluates. */
  evaluated: Set<string>;
}

const HOUSEKEEPING_MS = 10 * 60_000;
/** Reservations of an instance gone this long, and stats batch records this old, are removed. */
const ABANDONED_MS = 24 * 3600_000;

export class FleetStats implements StatsStore {
  readonly #db: SharedDatabase;
  readonly #log: Logger;
  readonly #tables: StatsTables;
  readonly #held: HeldCounts;
  readonly #listener: NotifyListener;
  /** Undecided admissions: each re-decides when kicked. */
  readonly #waiting = new Set<() => void>();
  /**
   * This instance's decisions on the same limited buckets, one at a time: they would wait for
   * the same row lock anyway, and waiting here holds no pooled connection (under a burst on one
   * bucket the pool would otherwise run dry and the store be taken for away).
   */
  readonly #deciding = new KeyedQueue();
  /** Settles on their way to the store (awaited by close). */
  readonly #settling = new Set<Promise<void>>();
  readonly #timers: NodeJS.Timeout[] = [];
  #lastHousekeeping = Date.now();
  /** The last flush failure logged (a failure that repeats every flush is logged once). */
  #lastFlushError: string | null = null;

  private constructor(o: FleetStatsOptions) {
    this.#db = o.db;
    this.#log = o.log;
    this.#tables = new StatsTables({ instance: () => o.db.instanceId });
    this.#held = new HeldCounts(this.#tables);
    this.#listener = new NotifyListener(o.db, SETTLED_CHANNEL, () => this.#kickAll());
  }

  /** Start: reservations left under this instance's id by a previous run are dropped first. */
  static async open(o: FleetStatsOptions): Promise<FleetStats> {
    const s = new FleetStats(o);
    const dropped = await o.db.run((pool) => s.#tables.dropOwnReservations(pool));
    if (dropped) o.log.info("stats-reservations-dropped", { instance: o.db.instanceId, reservations: dropped });
    s.#start(o.flushMs ?? 250, o.recheckMs ?? 1000);
    return s;
  }

  #start(flushMs: number, recheckMs: number): void {
    this.#listener.ensure();
    this.#db.onUp(() => this.#catchUp());
    const every = (ms: number, fn: () => void) => this.#timers.push(setInterval(fn, ms).unref());
    every(flushMs, () => {
      if (this.#db.up && !this.#held.empty) void this.#flush();
    });
    every(recheckMs, () => {
      this.#listener.ensure();
      this.#kickAll();
      if (Date.now() - this.#lastHousekeeping > HOUSEKEEPING_MS && this.#db.up) {
        this.#lastHousekeeping = Date.now();
        void this.#db.run((pool) => this.#tables.dropAbandoned(pool, ABANDONED_MS)).catch(() => undefined);
      }
    });
  }

  async admit(meta: WarcproxMeta | null, url: string, opts: AdmitOptions = {}): Promise<AdmitResult> {
    const buckets = bucketsOf(meta, url);
    const limits = activeLimits(meta, buckets);
    // Without limits nothing is decided; without stats buckets nobody else's limit can read them
    // except through __all__/__unspecified__ (see the head comment): counted locally, sent in batches.
    if (limits.length === 0 && (meta?.statsBuckets === undefined || !this.#db.up)) return this.#unreserved(buckets);
    const req: Request = { buckets, scope: admissionScope(meta, opts), limits, evaluated: new Set(limits.map((l) => l.k.bucket)) };
    const key = [...req.evaluated].sort().join("\n");
    return awaitVerdict({
      decide: (pessimistic) => (limits.length ? this.#deciding.run(key, () => this.#decide(req, pessimistic)) : this.#decide(req, pessimistic)),
      subscribe: (kick) => {
        this.#waiting.add(kick);
        return () => this.#waiting.delete(kick);
      },
      timeoutMs: opts.waitTimeoutMs ?? DEFAULT_WAIT_MS,
      ...(opts.signal ? { signal: opts.signal } : {}),
    });
  }

  /** One atomic decision in the store; never throws (a failure refuses with 503, or admits a request without limits). */
  async #decide(req: Request, pessimistic: boolean): Promise<Decision> {
    if (req.limits.length === 0) return this.#reserveUnjudged(req);
    let reservedId: string | null = null;
    try {
      const d = await retryDeadlocks(() =>
        this.#db.transaction(async (c) => {
          const rows = await this.#tables.lock(c, req.buckets, req.evaluated);
          // Reserved optimistically while R is counted; rolled back unless admitted.
          const id = randomUUID();
          const reserved = await this.#tables.reserveCounting(c, [...req.evaluated], { id, buckets: req.buckets, mayNew: req.scope.mayBeNew, mayRevisit: req.scope.mayBeRevisit });
          const v = judge(req.limits, req.scope, countsOf(rows, reserved), pessimistic);
          if (v.kind === "answer") throw new Undo(refusal(rows.get(v.limit.k.bucket) ?? null, v.limit));
          if (v.kind === "wait") throw new Undo(WAIT);
          reservedId = id;
          return this.#reserved(id, req.buckets);
        }),
      );
      this.#tables.remember(req.buckets);
      return d;
    } catch (e) {
      // Rolled back, bucket rows it created included: nothing to remember.
      if (e instanceof Undo) return e.decision;
      // If only the COMMIT failed, the reservation may exist: make sure it goes when the store is back.
      if (reservedId) this.#held.deferSettle(reservedId, []);
      return storeUnavailable(this.#why(e));
    }
  }

  /** A capture with stats buckets but no limit: nothing to decide, but others' limits must see it in flight. */
  async #reserveUnjudged(req: Request): Promise<Decision> {
    const id = randomUUID();
    try {
      await retryDeadlocks(() => this.#db.run((pool) => this.#tables.reserveUnjudged(pool, { id, buckets: req.buckets, mayNew: req.scope.mayBeNew, mayRevisit: req.scope.mayBeRevisit })));
      return this.#reserved(id, req.buckets);
    } catch {
      // The reservation may have been inserted even so (the answer was lost): make sure it goes.
      this.#held.deferSettle(id, []);
      return this.#unreserved(req.buckets);
    }
  }

  #why(e: unknown): string {
    if (e instanceof ProxyError && e.code === "ERR_SHARED_UNAVAILABLE") return e.message;
    return `the shared store (${this.#db.name}) failed: ${errorMessage(e)}`;
  }

  /** An admission holding reservation `id` in the store. */
  #reserved(id: string, buckets: string[]): Admitted {
    return admitted(buckets, (o) => {
      const deltas = o ? outcomeDeltas(buckets, o) : [];
      const p = this.#db
        .run((pool) => this.#tables.settle(pool, id, deltas))
        .then(
          () => {
            if (!this.#listener.listening) this.#kickAll();
          },
          () => this.#held.deferSettle(id, deltas),
        )
        .finally(() => this.#settling.delete(p));
      this.#settling.add(p);
    });
  }

  /** An admission without a reservation: its outcome is tallied here and sent in a batch. */
  #unreserved(buckets: string[]): Admitted {
    return admitted(buckets, (o) => {
      if (o) this.#held.tally(buckets, o);
    });
  }

  #kickAll(): void {
    for (const kick of [...this.#waiting]) kick();
  }

  async #flush(): Promise<void> {
    try {
      await this.#db.run((pool) => this.#held.flush(pool));
      this.#lastFlushError = null;
    } catch (e) {
      // The store away is logged by SharedDatabase; anything else once until it changes.
      if (isConnectionError(e) || e instanceof ProxyError || errorMessage(e) === this.#lastFlushError) return;
      this.#lastFlushError = errorMessage(e);
      this.#log.error("stats-flush-failed", { store: this.#db.name, error: this.#lastFlushError, ...this.#held.summary });
    }
  }

  /** The store is back (SharedDatabase.onUp, before new work reaches it): send what was held. */
  async #catchUp(): Promise<void> {
    if (this.#held.empty) return;
    const held = this.#held.summary;
    try {
      await this.#held.flush(this.#db.pool);
    } catch (e) {
      if (isConnectionError(e)) throw e;
      this.#log.error("stats-catch-up-failed", { store: this.#db.name, error: errorMessage(e) });
      return;
    }
    this.#log.info("stats-caught-up", { store: this.#db.name, ...held });
  }

  async bucket(name: string): Promise<BucketStats | null> {
    return this.#db.run((pool) => this.#tables.read(pool, name));
  }

  async buckets(): Promise<BucketStats[]> {
    return this.#db.run((pool) => this.#tables.readAll(pool));
  }

  async close(): Promise<void> {
    for (const t of this.#timers) clearInterval(t);
    await Promise.allSettled([...this.#settling]);
    if (!this.#held.empty && this.#db.up) await this.#flush();
    if (!this.#held.empty) this.#log.error("stats-not-counted", { store: this.#db.name, reason: "the store is away at shutdown", ...this.#held.summary });
    await this.#listener.close();
  }
}

/** Thrown out of an admission's transaction to roll its reservation back: the decision is not "admit". */
class Undo extends Error {
  constructor(readonly decision: Decision) {
    super("not admitted");
  }
}

/** C and R as limits.ts `judge` reads them, from the locked rows and the reservation counts. */
function countsOf(rows: Map<string, BucketRow>, reserved: Map<string, ReservedCounts>): LimitCounts {
  return {
    value: (bucket, sub, counter) => rows.get(bucket)?.[sub][counter] ?? 0,
    reserved: (bucket, sub) => reserved.get(bucket)?.[sub] ?? 0,
  };
}

/** An admission whose `release` runs `settle` once (later calls are ignored, as with the local registry). */
function admitted(buckets: string[], settle: (o: CaptureOutcome | null) => void): Admitted {
  let done = false;
  return {
    ok: true,
    buckets,
    release: (o) => {
      if (done) return;
      done = true;
      settle(o ?? null);
    },
  };
}
