/**
 * "Binary strings": the UTF-8 bytes of a URL held one char per byte (0–255). Both reference
 * canonicalizers (Python `surt` for CDXJ keys, iipc/urlcanon for warcprox rules) work on bytes,
 * so lower-casing and percent-encoding here act on bytes exactly as theirs do.
 *
 * Pure: no I/O.
 */

/** UTF-8 bytes of `s` as a binary string. */
export function toBinary(s: string): string {
  return Buffer.from(s, "utf8").toString("latin1");
}

/** Back from a binary string (bytes that are not UTF-8 become U+FFFD); ASCII comes back as is. */
export function fromBinary(b: string): string {
  return /[\x80-\xff]/.test(b) ? Buffer.from(b, "latin1").toString("utf8") : b;
}

/** ASCII-only lower-casing (Python `bytes.lower()`): bytes ≥ 0x80 are left alone. */
export function lowerAscii(s: string): string {
  // Most URL parts are lower case already: a test is cheaper than a replace with a callback.
  return RE_UPPER.test(s) ? s.replace(RE_UPPER_RUNS, (m) => m.toLowerCase()) : s;
}

const RE_UPPER = /[A-Z]/;
const RE_UPPER_RUNS = /[A-Z]+/g;
