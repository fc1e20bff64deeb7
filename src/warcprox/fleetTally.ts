/**
 * Counts an instance of the fleet holds before they reach the shared store:
 * - tallies of captures that took no reservation (no limits and no `stats.buckets`, so they count
 *   only in `__all__` and `__unspecified__`; or any capture without limits admitted while the
 *   store was away), summed per bucket and sent as one batch (a round trip per batch, not per
 *   capture). A batch keeps its id until acknowledged and the id is recorded in
 *   `applied_batches` in the same statement, so a batch sent again counts once;
 * - settles that failed (the store went away between admission and settle): sent again until
 *   acknowledged; a settle counts only while its reservation exists, so a repeat counts once, and
 *   it deletes the reservation, which then stops holding back the fleet's limits.
 * While the store is away nothing is sent and the tallies keep summing, so what is held stays
 * one entry per bucket plus one per failed settle. Held in memory: a killed instance loses them.
 */
import { randomUUID } from "node:crypto";
import { ALL_BUCKET, type BucketStats, type CaptureOutcome, addOutcome, emptyBucket } from "./stats.js";
import { STATS_BATCH_PREFIX, type Sql, type StatsTables } from "../postgres/statsTables.js";

/** The counters one completed capture adds to each of `buckets`. */
export function outcomeDeltas(buckets: readonly string[], o: CaptureOutcome): BucketStats[] {
  return buckets.map((name) => {
    const d = emptyBucket(name);
    addOutcome(d, o);
    return d;
  });
}

interface Held {
  id: string;
  deltas: BucketStats[];
}

export class HeldCounts {
  readonly #tables: StatsTables;
  /** Tallies not yet in a batch. */
  #tally = new Map<string, BucketStats>();
  /** Batches sent but not acknowledged (they keep their id). */
  readonly #batches: Held[] = [];
  /** Failed settles, by reservation id. */
  readonly #settles: Held[] = [];
  /** Ids of acknowledged batches whose records can go. */
  #forget: string[] = [];
  #flushing: Promise<void> | null = null;

  constructor(tables: StatsTables) {
    this.#tables = tables;
  }

  /** Nothing is held. */
  get empty(): boolean {
    return this.#tally.size === 0 && this.#batches.length === 0 && this.#settles.length === 0;
  }

  /** Captures and failed settles held, for logs. */
  get summary(): { captures: number; settles: number } {
    const all = [...this.#batches.flatMap((b) => b.deltas), ...this.#tally.values()].filter((d) => d.bucket === ALL_BUCKET);
    return { captures: all.reduce((n, d) => n + d.total.urls, 0), settles: this.#settles.length };
  }

  /** Count a capture that holds no reservation. */
  tally(buckets: readonly string[], o: CaptureOutcome): void {
    for (const d of outcomeDeltas(buckets, o)) {
      const b = this.#tally.get(d.bucket);
      if (!b) this.#tally.set(d.bucket, d);
      else for (const sub of ["total", "new", "revisit"] as const) {
        b[sub].urls += d[sub].urls;
        b[sub].wire_bytes += d[sub].wire_bytes;
      }
    }
  }

  /** Keep a settle of reservation `id` that could not be sent (deltas: none when not counted). */
  deferSettle(id: string, deltas: BucketStats[]): void {
    this.#settles.push({ id, deltas });
  }

  /**
   * Send everything held on `sql` (failed settles, then batches, oldest first); stops at the first
   * failure, which is thrown, keeping that and the rest. One flush at a time: a call during a
   * flush waits for it and does not send again.
   */
  flush(sql: Sql): Promise<void> {
    this.#flushing ??= this.#send(sql).finally(() => (this.#flushing = null));
    return this.#flushing;
  }

  async #send(sql: Sql): Promise<void> {
    while (this.#settles.length) {
      const s = this.#settles[0]!;
      await this.#tables.settle(sql, s.id, s.deltas);
      this.#settles.shift();
    }
    if (this.#tally.size) {
      this.#batches.push({ id: `${STATS_BATCH_PREFIX}${this.#tables.instance}:${randomUUID()}`, deltas: [...this.#tally.values()] });
      this.#tally = new Map();
    }
    while (this.#batches.length) {
      const b = this.#batches[0]!;
      await this.#tables.applyBatch(sql, b.id, b.deltas, this.#forget);
      this.#batches.shift();
      this.#forget = [b.id];
    }
  }
}
