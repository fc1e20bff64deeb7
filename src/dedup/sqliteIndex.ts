/**
 * The embedded SQLite store behind the DedupIndex interface recording uses. One process owns the
 * database, so there is nobody to claim a digest against: the Deduplicator's own in-flight map
 * already makes identical payloads of this instance wait for each other.
 */
import type { Claim, DedupEntry, DedupIndex, DedupStore, DigestKey } from "./types.js";

const MINE: Claim = { kind: "mine", release: () => undefined };

export class SqliteDedupIndex implements DedupIndex {
  readonly engine = "sqlite";
  readonly store: DedupStore;

  constructor(store: DedupStore) {
    this.store = store;
  }

  async byDigest(bucket: string, digest: DigestKey): Promise<DedupEntry | null> {
    return this.store.byDigest(bucket, digest);
  }

  async byUrlAndDigest(bucket: string, url: string, digest: DigestKey): Promise<DedupEntry | null> {
    return this.store.byUrlAndDigest(bucket, url, digest);
  }

  async byUrl(bucket: string, url: string, limit: number): Promise<DedupEntry[]> {
    return this.store.byUrl(bucket, url, limit);
  }

  async add(entries: DedupEntry[]): Promise<void> {
    this.store.add(entries);
  }

  async claim(): Promise<Claim> {
    return MINE;
  }

  async removeFileTail(filename: string, fromOffset: number): Promise<number> {
    return this.store.removeFileTail(filename, fromOffset);
  }

  count(): number {
    return this.store.count();
  }

  report(): Record<string, unknown> {
    return {};
  }

  async close(): Promise<void> {
    this.store.close();
  }
}
