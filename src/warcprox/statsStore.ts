/**
 * Where Warcprox-Meta stats buckets are counted and limits decided: the seam between one lathe
 * (the in-memory StatsRegistry) and a fleet sharing PostgreSQL (fleetStats.ts). The proxy, pushed
 * records and the status reports see only this.
 */
import type { WarcproxMeta } from "./warcproxMeta.js";
import { type AdmitOptions, type AdmitResult, admit } from "./limits.js";
import type { BucketStats, StatsRegistry } from "./stats.js";

export interface StatsStore {
  /**
   * Decide whether a capture of `url` may go ahead under the header's limits and soft limits
   * (limits.ts `admit`); an admitted capture counts in its buckets when it is released.
   * Rejects only when `opts.signal` aborts the wait.
   */
  admit(meta: WarcproxMeta | null, url: string, opts?: AdmitOptions): Promise<AdmitResult>;
  /** One bucket (§5's object), or null when nothing was ever counted in it (→ `404 {}`). */
  bucket(name: string): Promise<BucketStats | null>;
  /** Every bucket with stats, in creation order. */
  buckets(): Promise<BucketStats[]>;
  /** Count what is still held back and let go of any resource (after the proxy stopped). */
  close(): Promise<void>;
}

/** The standalone store: this lathe's own StatsRegistry, exactly as before. */
export function localStatsStore(registry: StatsRegistry): StatsStore {
  return {
    admit: (meta, url, opts) => admit(registry, meta, url, opts),
    bucket: async (name) => registry.get(name),
    buckets: async () => registry.all(),
    close: async () => undefined,
  };
}
