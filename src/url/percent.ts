/**
 * Percent-decoding and percent-encoding of binary strings (./binary.ts), the steps Python
 * `surt` and iipc/urlcanon share.
 *
 * Pure: no I/O.
 */

/**
 * The bytes Google's URL canonicalizer escapes: controls, space, bytes ≥ 0x7F, `#` and `%`.
 * Python `surt` writes it as `quote(s, safe="!\"$&'()*+,-./:;<=>?@[\\]^_`{|}~")` (everything but
 * letters, digits and those); urlcanon as its `GOOGLE` encode set. They are the same set.
 */
export const GOOGLE_ESCAPES = /[\x00-\x20\x7f-\xff#%]/g;

/** Percent-encode (upper-case hex) every byte of `s` that `escapes` (a global regex) matches. */
export function percentEncode(s: string, escapes: RegExp): string {
  return s.replace(escapes, (c) => "%" + c.charCodeAt(0).toString(16).toUpperCase().padStart(2, "0"));
}

/** One pass of Python's `unquote_to_bytes`: `%XX` with two hex digits becomes the byte, anything else stays. */
function percentDecodeOnce(s: string): string {
  if (!s.includes("%")) return s;
  return s.replace(/%([0-9a-fA-F]{2})/g, (_m, h: string) => String.fromCharCode(parseInt(h, 16)));
}

/** Decode until nothing changes (`%2541` → `%41` → `A`), as both references do. */
export function percentDecodeRepeatedly(s: string): string {
  for (;;) {
    const decoded = percentDecodeOnce(s);
    if (decoded === s) return s;
    s = decoded;
  }
}
