/**
 * What every DedupStore refuses from its callers, whatever holds the entries: a digest that is not
 * (sha1 | sha256, bytes of its length), an entry with a missing bucket, url or date or a bad
 * number, a negative limit or offset. Each is a caller's bug, so ProxyError("ERR_INTERNAL").
 */
import { ProxyError } from "../core/errors.js";
import type { DigestAlgorithm } from "../warc/digest.js";
import { DIGEST_BYTES } from "./digestKey.js";
import type { DedupEntry, DigestKey } from "./types.js";

export function checkDigest(d: DigestKey, what: string): void {
  if (!DIGEST_BYTES[d?.alg as DigestAlgorithm]) throw new ProxyError("ERR_INTERNAL", `${what}: unknown digest algorithm ${JSON.stringify(d?.alg)}`);
  if (!(d.bytes instanceof Uint8Array) || d.bytes.length !== DIGEST_BYTES[d.alg]) {
    throw new ProxyError("ERR_INTERNAL", `${what}: a ${d.alg} digest has ${DIGEST_BYTES[d.alg]} bytes, got ${d.bytes?.length}`);
  }
}

function checkInt(v: unknown, name: string, i: number): void {
  if (v !== null && !(Number.isSafeInteger(v) && (v as number) >= 0)) {
    throw new ProxyError("ERR_INTERNAL", `dedup entry ${i}: ${name} must be a non-negative integer or null, got ${JSON.stringify(v)}`);
  }
}

/** `e` is entry `i` of an add() batch. */
export function checkEntry(e: DedupEntry, i: number): void {
  if (typeof e.bucket !== "string" || e.bucket === "") throw new ProxyError("ERR_INTERNAL", `dedup entry ${i}: bucket must be a non-empty string`);
  if (typeof e.url !== "string" || typeof e.date !== "string") throw new ProxyError("ERR_INTERNAL", `dedup entry ${i}: url and date must be strings`);
  checkInt(e.offset, "offset", i);
  checkInt(e.length, "length", i);
  checkInt(e.status, "status", i);
  checkDigest(e.digest, `dedup entry ${i}`);
}

export function checkLimit(limit: number): void {
  if (!Number.isSafeInteger(limit) || limit < 0) throw new ProxyError("ERR_INTERNAL", `byUrl: limit must be a non-negative integer, got ${limit}`);
}

export function checkOffset(fromOffset: number): void {
  if (!Number.isSafeInteger(fromOffset) || fromOffset < 0) throw new ProxyError("ERR_INTERNAL", `removeFileTail: offset must be a non-negative integer, got ${fromOffset}`);
}

/** Digest bytes as a Buffer (callers may hand any Uint8Array), without a copy. */
export function asBuffer(b: Uint8Array): Buffer {
  return Buffer.isBuffer(b) ? b : Buffer.from(b.buffer, b.byteOffset, b.byteLength);
}
