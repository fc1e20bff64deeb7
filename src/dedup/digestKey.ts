import { ProxyError } from "../core/errors.js";
import type { DigestAlgorithm } from "../warc/digest.js";
import type { DigestKey } from "./types.js";

/** Digest lengths in bytes: parseDigest refuses other lengths, and a store given one has a caller's bug. */
export const DIGEST_BYTES: Record<DigestAlgorithm, number> = { sha1: 20, sha256: 32 };
const B32 = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";

/** Each ASCII character's base32 value (either case), -1 for the others. */
const B32_VALUE = new Int8Array(128).fill(-1);
for (let i = 0; i < 32; i++) {
  B32_VALUE[B32.charCodeAt(i)] = i;
  B32_VALUE[B32.toLowerCase().charCodeAt(i)] = i;
}

/**
 * Base32 (RFC 4648, either case, trailing `=` ignored) decoded; leftover bits (fewer than 8) are
 * dropped. Every capture's digest passes here, so the usual all-ASCII spelling is decoded through
 * a table into the Buffer itself; anything else takes the general path, whose toUpperCase() also
 * turns a few non-ASCII letters into ASCII ones.
 */
function fromBase32(s: string): Buffer | null {
  let end = s.length;
  while (end > 0 && s.charCodeAt(end - 1) === 61) end--;
  const out = Buffer.allocUnsafe(Math.floor((end * 5) / 8));
  let bits = 0;
  let value = 0;
  let j = 0;
  for (let i = 0; i < end; i++) {
    const c = s.charCodeAt(i);
    if (c >= 128) return fromBase32General(s);
    const v = B32_VALUE[c]!;
    if (v < 0) return null;
    value = ((value << 5) | v) & 0xffff;
    bits += 5;
    if (bits >= 8) {
      out[j++] = (value >>> (bits - 8)) & 0xff;
      bits -= 8;
    }
  }
  return out;
}

function fromBase32General(s: string): Buffer | null {
  const clean = s.replace(/=+$/, "").toUpperCase();
  const out: number[] = [];
  let bits = 0;
  let value = 0;
  for (const ch of clean) {
    const v = B32.indexOf(ch);
    if (v < 0) return null;
    value = (value << 5) | v;
    bits += 5;
    if (bits >= 8) {
      out.push((value >>> (bits - 8)) & 0xff);
      bits -= 8;
    }
  }
  return Buffer.from(out);
}

/**
 * Parse a WARC digest value (`sha1:BASE32`, `sha1:hex`, `sha256:hex`, `sha256:BASE32[=]`,
 * `sha-1:` spellings) into (algorithm, bytes); null when it is not one we can compare.
 */
export function parseDigest(value: string): DigestKey | null {
  // Lathe's own spelling, that of every capture: `sha1:` and 32 base32 characters (never hex,
  // which is 40), decoded as below. Ending in a base32 character, it has nothing to trim.
  if (value.length === 37 && value.startsWith("sha1:") && B32_VALUE[value.charCodeAt(36)]! >= 0) {
    const bytes = fromBase32(value.slice(5));
    return bytes && bytes.length === 20 ? { alg: "sha1", bytes } : null;
  }
  const m = /^(sha-?1|sha-?256):(.+)$/i.exec(value.trim());
  if (!m) return null;
  const alg: DigestAlgorithm = m[1]!.toLowerCase().replace("-", "") === "sha1" ? "sha1" : "sha256";
  const text = m[2]!;
  const want = DIGEST_BYTES[alg];
  let bytes: Buffer | null = null;
  if (/^[0-9a-f]+$/i.test(text) && text.length === want * 2) bytes = Buffer.from(text, "hex");
  else bytes = fromBase32(text);
  if (!bytes || bytes.length !== want) return null;
  return { alg, bytes };
}

export function requireDigest(value: string): DigestKey {
  const d = parseDigest(value);
  if (!d) throw new ProxyError("ERR_INTERNAL", `not a digest lathe can compare: ${JSON.stringify(value)}`);
  return d;
}

export function sameDigest(a: DigestKey, b: DigestKey): boolean {
  return a.alg === b.alg && a.bytes.equals(b.bytes);
}
