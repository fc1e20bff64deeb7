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
