import { createHash, hash, type Hash } from "node:crypto";

export type DigestAlgorithm = "sha1" | "sha256";

const B32 = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";

/** RFC 4648 base32, uppercase, no padding. */
export function base32(bytes: Uint8Array): string {
  let out = "";
  let bits = 0;
  let value = 0;
  for (const b of bytes) {
    value = (value << 8) | b;
    bits += 8;
    while (bits >= 5) {
      out += B32[(value >>> (bits - 5)) & 31];
      bits -= 5;
    }
  }
  if (bits > 0) out += B32[(value << (5 - bits)) & 31];
  return out;
}

/**
 * The WARC digest string: `sha1:` + base32 (the field's convention), `sha256:` + lowercase hex
 * (unpadded base32 fails warcio and jwarc; see spec warc-records.md §1).
 */
export function formatDigest(alg: DigestAlgorithm, bytes: Uint8Array): string {
  return alg === "sha1" ? `sha1:${base32(bytes)}` : `sha256:${Buffer.from(bytes).toString("hex")}`;
}

export function newHash(alg: DigestAlgorithm): Hash {
  return createHash(alg);
}

export function digestOf(alg: DigestAlgorithm, ...parts: Uint8Array[]): string {
  return formatDigest(alg, digestBytes(alg, parts));
}

/** The digest of `parts` concatenated, as bytes. */
export function digestBytes(alg: DigestAlgorithm, parts: readonly Uint8Array[]): Buffer {
  // One part (a revisit's head, a small body, a metadata block): hashed at once, no Hash object
  // (~1.5 µs less, and no native object for the GC to finalise).
  if (parts.length === 1) return hash(alg, parts[0]!, "buffer") as unknown as Buffer;
  const h = createHash(alg);
  for (const p of parts) h.update(p);
  return h.digest();
}
