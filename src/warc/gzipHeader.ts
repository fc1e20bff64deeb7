/**
 * Where a gzip member's deflate data starts (RFC 1952 §2.3), and the sizes its 'sl' extra field
 * announces (warc-files.md §3.1), for the reader. Pure: bytes in, header out.
 */

/** ID1 ID2 CM(deflate): the first bytes of every gzip member, as the reader resyncs on them. */
export const GZ_MAGIC = Buffer.from([0x1f, 0x8b, 0x08]);

export interface GzipHeader {
  /** Bytes of the header: deflate data starts here (relative to the member start). */
  length: number;
  /** From the 'sl' extra field: whole member on disk, and inflated size. */
  sl: { clen: number; ulen: number } | null;
}

/** RFC 1952 §2.3 member header at b[0..]; "short" when `b` ends inside it; "bad" when it is not one. */
export function parseGzipHeader(b: Buffer): GzipHeader | "short" | "bad" {
  if (b.length < 10) return b.length >= 3 && !b.subarray(0, 3).equals(GZ_MAGIC) ? "bad" : "short";
  if (b[0] !== 0x1f || b[1] !== 0x8b || b[2] !== 8 || (b[3]! & 0xe0) !== 0) return "bad";
  const flg = b[3]!;
  let p = 10;
  let sl: GzipHeader["sl"] = null;
  if (flg & 0x04) {
    if (b.length < p + 2) return "short";
    const xlen = b.readUInt16LE(p);
    p += 2;
    if (b.length < p + xlen) return "short";
    // Subfields: SI1 SI2 LEN(2) data.
    for (let q = p; q + 4 <= p + xlen; ) {
      const len = b.readUInt16LE(q + 2);
      if (b[q] === 0x73 && b[q + 1] === 0x6c && len === 8 && q + 12 <= p + xlen) {
        sl = { clen: b.readUInt32LE(q + 4), ulen: b.readUInt32LE(q + 8) };
      }
      q += 4 + len;
    }
    p += xlen;
  }
  for (const bit of [0x08, 0x10]) {
    if (!(flg & bit)) continue; // FNAME, FCOMMENT: zero-terminated
    const z = b.indexOf(0, p);
    if (z < 0) return "short";
    p = z + 1;
  }
  if (flg & 0x02) p += 2; // FHCRC
  if (b.length < p) return "short";
  return { length: p, sl };
}
