/**
 * The dedup store (issue "Deduplication"): what an earlier capture with a payload digest left
 * behind, so that a later identical payload becomes a small `revisit` pointing at it
 * (warc-records.md §4, decisions.md §7).
 */
import type { DigestAlgorithm } from "../warc/digest.js";

/** A digest compared as (algorithm, bytes), never as a string: hex and base32 sha1 match. */
export interface DigestKey {
  alg: DigestAlgorithm;
  bytes: Buffer;
}

export interface DedupEntry {
  bucket: string;
  digest: DigestKey;
  /** WARC-Target-URI of the original. */
  url: string;
  /** WARC-Date of the original, verbatim. */
  date: string;
  /** WARC-Record-ID of the original (`<urn:uuid:...>`); null when an external index had none. */
  recordId: string | null;
  /** WARC file (final name) and offset/length of the original's record (its gzip member). */
  filename: string | null;
  offset: number | null;
  length: number | null;
  /** HTTP status of the original response. */
  status: number | null;
  /** The original response's ETag and Last-Modified, for server-not-modified revisits. */
  etag: string | null;
  lastModified: string | null;
}

export interface BucketCounters {
  captures: number;
  revisits: number;
  bytesSaved: number;
}

export interface DedupStore {
  /** The most recent entry in `bucket` with this payload digest. */
  byDigest(bucket: string, digest: DigestKey): DedupEntry | null;
  /** The most recent entry in `bucket` for this URL with this payload digest. */
  byUrlAndDigest(bucket: string, url: string, digest: DigestKey): DedupEntry | null;
  /** Entries for this URL, most recent first (server-not-modified matching); at most `limit`. */
  byUrl(bucket: string, url: string, limit: number): DedupEntry[];
  /** Store entries (one transaction). Only ever called after their records are on disk. */
  add(entries: DedupEntry[]): void;
  /** Remove entries pointing into `filename` at offsets ≥ `fromOffset` (recovery); returns how many. */
  removeFileTail(filename: string, fromOffset: number): number;
  /** Number of entries (all buckets). */
  count(): number;
  close(): void;
}

/**
 * Cross-instance in-flight dedup: a capture about to be written as an original claims its digest,
 * so an identical payload captured at the same moment by another instance waits for it.
 */
export type Claim =
  /**
   * This capture writes the original; call release() once its entry is added (or it failed).
   * `lookAgain`: the store is shared, so another instance may have added the original and let go
   * of its claim between the caller's lookup and this claim; look once more before writing.
   */
  | { kind: "mine"; release(): void; lookAgain: boolean }
  /** Another capture held the claim and let go (written or failed): look the digest up again. */
  | { kind: "settled" }
  /** Not decided in time (or the store is away): write a full response. */
  | { kind: "undecided" };

/**
 * The dedup store as recording uses it, whichever engine holds the entries: the embedded SQLite
 * store (synchronous underneath) or PostgreSQL shared by a fleet (a round trip, possibly away).
 * Lookups that fail reject; the caller then writes a full response, never an unverified revisit.
 */
export interface DedupIndex {
  /** "sqlite" or "postgresql", for /status. */
  readonly engine: string;
  byDigest(bucket: string, digest: DigestKey): Promise<DedupEntry | null>;
  byUrlAndDigest(bucket: string, url: string, digest: DigestKey): Promise<DedupEntry | null>;
  byUrl(bucket: string, url: string, limit: number): Promise<DedupEntry[]>;
  /**
   * Store entries whose records are on disk. Resolves once they are stored or, for a store that is
   * away, safely queued; rejects only when they could be neither.
   */
  add(entries: DedupEntry[]): Promise<void>;
  /** Claim `digest` for an original about to be written, waiting at most `waitMs` for another instance's claim. */
  claim(digest: DigestKey, waitMs: number): Promise<Claim>;
  /** Remove entries pointing into `filename` at offsets ≥ `fromOffset` (crash recovery); returns how many. */
  removeFileTail(filename: string, fromOffset: number): Promise<number>;
  /** Entries in the store (the last figure known; a shared store counts in the background). */
  count(): number;
  /** Figures for /status beyond the count (queued entries, the store being away…). */
  report(): Record<string, unknown>;
  close(): Promise<void>;
}
