/**
 * The lookup keys of the SQLite dedup store (schema version 1). They are part of the on-disk
 * format: changing any function here means a new schema version (`PRAGMA user_version`), and
 * test/dedup/sqliteKeys.test.ts pins their values.
 *
 * Keys are 47-bit non-negative integers, which SQLite stores in 6 bytes and JavaScript holds
 * exactly in a number. They only narrow the search: every lookup compares the full bucket,
 * algorithm, digest bytes and URL on the entry it finds, so a collision costs one extra row read,
 * never a wrong answer.
 */
import type { DigestAlgorithm } from "../warc/digest.js";

/** Algorithm codes stored in `entries.alg`. */
export const ALG_CODE: Record<DigestAlgorithm, number> = { sha1: 1, sha256: 2 };
export const ALG_NAME: Record<number, DigestAlgorithm> = { 1: "sha1", 2: "sha256" };

const TWO32 = 0x1_0000_0000;
/** Keys lie in [0, KEY_SPACE). */
export const KEY_SPACE = 2 ** 47;

/** murmur3's 32-bit finalizer. */
function mix32(h: number): number {
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b);
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
  return (h ^ (h >>> 16)) >>> 0;
}

/**
 * `by_digest.key`: bytes 0..5 of the digest (a cryptographic hash, so already uniform) XORed
 * with a salt derived from (bucket id, algorithm code), top bit dropped.
 */
export function digestKey(bucketId: number, alg: number, digest: Uint8Array): number {
  const lo = mix32(bucketId * 8 + alg);
  const hi = mix32(lo ^ 0x9e3779b9);
  const d0 = (digest[0]! << 8) | digest[1]!;
  const d1 = ((digest[2]! << 24) | (digest[3]! << 16) | (digest[4]! << 8) | digest[5]!) >>> 0;
  return ((d0 ^ hi) & 0x7fff) * TWO32 + ((d1 ^ lo) >>> 0);
}

/** `by_url.tag`: digest bytes 6..7, a cheap filter for byUrlAndDigest before reading the row. */
export function digestTag(digest: Uint8Array): number {
  return (digest[6]! << 8) | digest[7]!;
}

/**
 * `by_url.key`: a 47-bit hash (cyrb53's mixing, public domain, by bryc) of the URL's UTF-16 code
 * units, seeded with the bucket id.
 */
export function urlKey(bucketId: number, url: string): number {
  let h1 = 0xdeadbeef ^ bucketId;
  let h2 = 0x41c6ce57 ^ bucketId;
  for (let i = 0; i < url.length; i++) {
    const c = url.charCodeAt(i);
    h1 = Math.imul(h1 ^ c, 2654435761);
    h2 = Math.imul(h2 ^ c, 1597334677);
  }
  h1 = Math.imul(h1 ^ (h1 >>> 16), 2246822507);
  h1 ^= Math.imul(h2 ^ (h2 >>> 13), 3266489909);
  h2 = Math.imul(h2 ^ (h2 >>> 16), 2246822507);
  h2 ^= Math.imul(h1 ^ (h1 >>> 13), 3266489909);
  return (h2 & 0x7fff) * TWO32 + (h1 >>> 0);
}

/** 0..15 for a lowercase hex digit, -1 otherwise. */
function hexDigit(c: number): number {
  if (c >= 48 && c <= 57) return c - 48;
  if (c >= 97 && c <= 102) return c - 87;
  return -1;
}

/**
 * `entries.record_id`: lathe's own ids (`<urn:uuid:` + lowercase UUID + `>`, 47 characters) are
 * stored as their 16 bytes; any other spelling (other tools, uppercase) verbatim as TEXT.
 */
export function packRecordId(id: string | null): string | Buffer | null {
  if (id === null) return null;
  if (id.length !== 47 || id.charCodeAt(46) !== 62 || !id.startsWith("<urn:uuid:")) return id;
  const out = Buffer.allocUnsafe(16);
  let j = 0;
  for (let i = 10; i < 46; i += 2) {
    if (i === 18 || i === 23 || i === 28 || i === 33) {
      if (id.charCodeAt(i) !== 45) return id;
      i--;
      continue;
    }
    const hi = hexDigit(id.charCodeAt(i));
    const lo = hexDigit(id.charCodeAt(i + 1));
    if (hi < 0 || lo < 0) return id;
    out[j++] = (hi << 4) | lo;
  }
  return out;
}

export function unpackRecordId(v: unknown): string | null {
  if (v === null || v === undefined) return null;
  if (typeof v === "string") return v;
  const h = (v as Buffer).toString("hex");
  return `<urn:uuid:${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}>`;
}
