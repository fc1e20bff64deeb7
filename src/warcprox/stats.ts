/**
 * warcprox-style stats buckets (warcprox-compat.md §5): in memory, updated atomically when a
 * capture's outcome is final, plus the in-flight reservations that let limits.ts count exactly
 * (§2 "Exact counting").
 *
 * Buckets of a capture (stats.py `unravel_buckets`): `__all__` always; each `stats.buckets` name;
 * `<bucket>:<domain>` for each tally domain the URL's host equals or is a subdomain of (IP exact;
 * domain via urlcanon `normalize_host`, host via urlcanon `semantic`); `__unspecified__` only when
 * the header has no `stats.buckets` at all. A bucket listed twice is counted once.
 *
 * Pure: no I/O.
 */
import type { WarcproxMeta } from "./warcproxMeta.js";
import { hostMatchesDomain, normalizeHost, semanticHost } from "./urlcanon.js";

export type StatsSub = "total" | "new" | "revisit";
export type StatsCounter = "urls" | "wire_bytes";

export interface StatsCounts {
  urls: number;
  wire_bytes: number;
}

/** The bucket object of §5, exactly this key order. */
export interface BucketStats {
  bucket: string;
  total: StatsCounts;
  new: StatsCounts;
  revisit: StatsCounts;
}

/** The final outcome of one counted capture. */
export interface CaptureOutcome {
  /** Records were written (false: `warc-prefix: "-"`, dropped by a mime-type filter…). */
  written: boolean;
  /** The first record written is a revisit. */
  revisit: boolean;
  /** Bytes read from the origin: status line + headers + body as on the wire; body length for WRITE_RECORD. */
  wireBytes: number;
}

/** What an in-flight capture may still add to; decided when it is admitted. */
export interface ReservationScope {
  /** It may end up counted in `new` (default true). */
  mayBeNew?: boolean;
  /** It may end up counted in `revisit` (default true). */
  mayBeRevisit?: boolean;
}

/** An admitted, in-flight capture. `settle` is idempotent: only the first call counts. */
export interface Reservation {
  readonly buckets: readonly string[];
  /** Commit `outcome` to the stats (a completed capture), or release the reservation (null: not counted). */
  settle(outcome: CaptureOutcome | null): void;
  readonly settled: boolean;
}

interface InFlight {
  total: number;
  new: number;
  revisit: number;
}

export const ALL_BUCKET = "__all__";
export const UNSPECIFIED_BUCKET = "__unspecified__";

/** A bucket with nothing counted yet. */
export function emptyBucket(name: string): BucketStats {
  return { bucket: name, total: { urls: 0, wire_bytes: 0 }, new: { urls: 0, wire_bytes: 0 }, revisit: { urls: 0, wire_bytes: 0 } };
}
/** Count one completed capture in `b` (§5 `_tally_batch`): `total` always, plus `new` or `revisit` when records were written. */
export function addOutcome(b: BucketStats, o: CaptureOutcome): void {
  const bytes = Number.isFinite(o.wireBytes) && o.wireBytes > 0 ? o.wireBytes : 0;
  b.total.urls += 1;
  b.total.wire_bytes += bytes;
  if (o.written) {
    const sub = o.revisit ? b.revisit : b.new;
    sub.urls += 1;
    sub.wire_bytes += bytes;
  }
}

const copyBucket = (b: BucketStats): BucketStats => ({
  bucket: b.bucket,
  total: { ...b.total },
  new: { ...b.new },
  revisit: { ...b.revisit },
});

/** The buckets a capture of `url` with this header counts in (§5), in order, without duplicates. */
export function bucketsOf(meta: WarcproxMeta | null, url: string): string[] {
  const out = [ALL_BUCKET];
  const add = (b: string) => {
    if (!out.includes(b)) out.push(b);
  };
  if (!meta || meta.statsBuckets === undefined) {
    add(UNSPECIFIED_BUCKET);
    return out;
  }
  let host: string | undefined;
  for (const sb of meta.statsBuckets) {
    add(sb.bucket);
    if (sb.tallyDomains.length === 0) continue;
    host ??= safeHost(url);
    for (const d of sb.tallyDomains) {
      const domain = normalizeHost(d);
      if (hostMatchesDomain(host, domain)) add(`${sb.bucket}:${domain}`);
    }
  }
  return out;
}

/**
 * A class, not an object literal with a `settled` getter: such a literal is built through V8's
 * runtime each time (~0.7 µs per getter in Node 20), and every admitted exchange holds one.
 */
class HeldReservation implements Reservation {
  readonly buckets: readonly string[];
  readonly #end: (outcome: CaptureOutcome | null) => void;
  #settled = false;

  constructor(buckets: readonly string[], end: (outcome: CaptureOutcome | null) => void) {
    this.buckets = buckets;
    this.#end = end;
  }

  get settled(): boolean {
    return this.#settled;
  }

  settle(outcome: CaptureOutcome | null): void {
    if (this.#settled) return;
    this.#settled = true;
    this.#end(outcome);
  }
}

export class StatsRegistry {
  private readonly data = new Map<string, BucketStats>();
  private readonly inflight = new Map<string, InFlight>();
  /** FIFO of callbacks re-run whenever a reservation settles; a callback returns true when done. */
  private readonly waiters: Array<() => boolean> = [];
  private notifying = false;
  private renotify = false;

  /** The buckets a capture of `url` with this header counts in (§5), in order, without duplicates. */
  bucketsOf(meta: WarcproxMeta | null, url: string): string[] {
    return bucketsOf(meta, url);
  }

  /**
   * Count one completed capture in `buckets` (§5 `_tally_batch`): `total` always, plus `new` or
   * `revisit` when records were written. Use this only for captures that never went through a
   * reservation; reserved ones are counted by `Reservation.settle(outcome)`.
   */
  tally(buckets: readonly string[], outcome: CaptureOutcome): void {
    this.commit(buckets, outcome);
    this.notify();
  }

  /** The bucket object, or null when nothing was ever counted in it (→ `404 {}`). */
  get(bucket: string): BucketStats | null {
    const b = this.data.get(bucket);
    return b ? copyBucket(b) : null;
  }

  /** A committed counter (0 for an unknown bucket). */
  value(bucket: string, sub: StatsSub, counter: StatsCounter): number {
    return this.data.get(bucket)?.[sub][counter] ?? 0;
  }

  /** In-flight reservations of `bucket` that may still count in `sub` (R of §2). */
  reserved(bucket: string, sub: StatsSub): number {
    return this.inflight.get(bucket)?.[sub] ?? 0;
  }

  /** Names of every bucket with stats, in creation order. */
  names(): string[] {
    return [...this.data.keys()];
  }

  /** Every bucket object, in creation order. */
  all(): BucketStats[] {
    return [...this.data.values()].map(copyBucket);
  }

  /**
   * Reserve a place for an admitted capture in each of `buckets`. Synchronous, so a caller that
   * checks `value` + `reserved` and then reserves without awaiting in between is atomic.
   */
  reserve(buckets: readonly string[], scope: ReservationScope = {}): Reservation {
    const bs = [...new Set(buckets)];
    const mayNew = scope.mayBeNew !== false ? 1 : 0;
    const mayRevisit = scope.mayBeRevisit !== false ? 1 : 0;
    for (const b of bs) {
      let f = this.inflight.get(b);
      if (!f) this.inflight.set(b, (f = { total: 0, new: 0, revisit: 0 }));
      f.total += 1;
      f.new += mayNew;
      f.revisit += mayRevisit;
    }
    return new HeldReservation(bs, (outcome) => this.endReservation(bs, mayNew, mayRevisit, outcome));
  }

  private endReservation(bs: readonly string[], mayNew: number, mayRevisit: number, outcome: CaptureOutcome | null): void {
    for (const b of bs) {
      const f = this.inflight.get(b)!;
      f.total -= 1;
      f.new -= mayNew;
      f.revisit -= mayRevisit;
      if (f.total === 0) this.inflight.delete(b);
    }
    if (outcome) this.commit(bs, outcome);
    this.notify();
  }

  /**
   * Run `check` now and again after every settle, in FIFO order with the other waiters, until it
   * returns true. Returns a function that removes it.
   */
  addWaiter(check: () => boolean): () => void {
    this.waiters.push(check);
    return () => {
      const i = this.waiters.indexOf(check);
      if (i >= 0) this.waiters.splice(i, 1);
    };
  }

  private commit(buckets: readonly string[], o: CaptureOutcome): void {
    for (const name of new Set(buckets)) {
      let b = this.data.get(name);
      if (!b) this.data.set(name, (b = emptyBucket(name)));
      addOutcome(b, o);
    }
  }

  private notify(): void {
    if (this.notifying) {
      this.renotify = true;
      return;
    }
    this.notifying = true;
    try {
      do {
        this.renotify = false;
        for (const w of [...this.waiters]) {
          if (!this.waiters.includes(w)) continue;
          let done = true;
          try {
            done = w();
          } catch {
            done = true;
          }
          if (done) {
            const i = this.waiters.indexOf(w);
            if (i >= 0) this.waiters.splice(i, 1);
          }
        }
      } while (this.renotify);
    } finally {
      this.notifying = false;
    }
  }
}

function safeHost(url: string): string {
  try {
    return semanticHost(url);
  } catch {
    return "";
  }
}
