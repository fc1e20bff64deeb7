/**
 * Host steps Python `surt` and iipc/urlcanon share: the dotted form of an IPv4 number and the
 * SURT order of a host's labels. (How each finds the IPv4 number differs: see their files.)
 *
 * Pure: no I/O.
 */

/** An IPv4 address (0 … 2³²−1) as `a.b.c.d`. */
export function dottedQuad(n: number): string {
  return [n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255].join(".");
}

/** A host's dot-separated labels, last first (`www.example.com` → `com`, `example`, `www`). */
export function reversedLabels(host: string): string[] {
  return host.split(".").reverse();
}

/**
 * `reversedLabels(host).join(sep)` without the array: a SURT key is built for every record the
 * live index writes.
 */
export function joinReversedLabels(host: string, sep: string): string {
  let out = "";
  let end = host.length;
  for (;;) {
    const dot = end === 0 ? -1 : host.lastIndexOf(".", end - 1);
    out += host.slice(dot + 1, end);
    if (dot < 0) return out;
    out += sep;
    end = dot;
  }
}
