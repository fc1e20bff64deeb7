/**
 * The little DER (X.690) that lathe's certificates need: an encoder for building a
 * TBSCertificate by concatenation, and a reader for picking fields out of the CA certificate.
 * Pure: no I/O. Certificate libraries cost milliseconds per leaf; concatenating buffers costs
 * microseconds.
 */

export const TAG = {
  BOOLEAN: 0x01,
  INTEGER: 0x02,
  BIT_STRING: 0x03,
  OCTET_STRING: 0x04,
  OID: 0x06,
  UTF8_STRING: 0x0c,
  UTC_TIME: 0x17,
  GENERALIZED_TIME: 0x18,
  SEQUENCE: 0x30,
  SET: 0x31,
} as const;

/** Context-specific tag number `n`: constructed for EXPLICIT wrappers, primitive for IMPLICIT ones. */
export const contextTag = (n: number, constructed: boolean): number => (constructed ? 0xa0 : 0x80) | n;

function lengthBytes(len: number): Buffer {
  if (len < 0x80) return Buffer.from([len]);
  const bytes: number[] = [];
  for (let n = len; n > 0; n = Math.floor(n / 256)) bytes.unshift(n & 0xff);
  return Buffer.from([0x80 | bytes.length, ...bytes]);
}

/** One TLV; `parts` are already-encoded contents, concatenated. */
export function tlv(tag: number, ...parts: Uint8Array[]): Buffer {
  const body = parts.length === 1 ? Buffer.from(parts[0]!) : Buffer.concat(parts);
  return Buffer.concat([Buffer.from([tag]), lengthBytes(body.length), body]);
}

export const sequence = (...parts: Uint8Array[]): Buffer => tlv(TAG.SEQUENCE, ...parts);
export const set = (...parts: Uint8Array[]): Buffer => tlv(TAG.SET, ...parts);
export const octetString = (b: Uint8Array): Buffer => tlv(TAG.OCTET_STRING, b);
export const utf8String = (s: string): Buffer => tlv(TAG.UTF8_STRING, Buffer.from(s, "utf8"));
export const booleanTrue = (): Buffer => Buffer.from([TAG.BOOLEAN, 1, 0xff]);

/** BIT STRING holding whole bytes (keys, signatures): zero unused bits. */
export const bitString = (b: Uint8Array): Buffer => tlv(TAG.BIT_STRING, Buffer.from([0]), b);

/** A non-negative INTEGER from big-endian magnitude bytes, in minimal form (X.690 §8.3.2). */
export function unsignedInteger(magnitude: Uint8Array): Buffer {
  let i = 0;
  while (i < magnitude.length - 1 && magnitude[i] === 0) i++;
  const m = magnitude.subarray(i);
  if (m.length === 0) return Buffer.from([TAG.INTEGER, 1, 0]);
  return m[0]! & 0x80 ? tlv(TAG.INTEGER, Buffer.from([0]), m) : tlv(TAG.INTEGER, m);
}

export function oid(dotted: string): Buffer {
  const arcs = dotted.split(".").map(Number);
  const out: number[] = [arcs[0]! * 40 + arcs[1]!];
  for (const arc of arcs.slice(2)) {
    const base128: number[] = [arc & 0x7f];
    for (let n = Math.floor(arc / 128); n > 0; n = Math.floor(n / 128)) base128.unshift(0x80 | (n & 0x7f));
    out.push(...base128);
  }
  return tlv(TAG.OID, Buffer.from(out));
}

const pad2 = (n: number): string => String(n).padStart(2, "0");

/**
 * X.509 Time (RFC 5280 §4.1.2.5): UTCTime through 2049, GeneralizedTime from 2050, always UTC
 * with seconds and no fraction.
 */
export function time(ms: number): Buffer {
  const d = new Date(ms);
  const y = d.getUTCFullYear();
  const rest = pad2(d.getUTCMonth() + 1) + pad2(d.getUTCDate()) + pad2(d.getUTCHours()) +
    pad2(d.getUTCMinutes()) + pad2(d.getUTCSeconds()) + "Z";
  return y < 2050 && y >= 1950
    ? tlv(TAG.UTC_TIME, Buffer.from(pad2(y % 100) + rest, "latin1"))
    : tlv(TAG.GENERALIZED_TIME, Buffer.from(String(y).padStart(4, "0") + rest, "latin1"));
}

// ---- reading ----

export interface Tlv {
  tag: number;
  /** Offset of the tag byte, of the contents, and just past the contents, in `buf`. */
  start: number;
  contentStart: number;
  end: number;
  buf: Buffer;
}

/** Reads the TLV at `offset`; throws on truncation or forms DER forbids (indefinite length). */
export function readTlv(buf: Buffer, offset = 0): Tlv {
  if (offset + 2 > buf.length) throw new Error("DER: truncated");
  const tag = buf[offset]!;
  if ((tag & 0x1f) === 0x1f) throw new Error("DER: multi-byte tags are not supported");
  let len = buf[offset + 1]!;
  let p = offset + 2;
  if (len & 0x80) {
    const n = len & 0x7f;
    if (n === 0 || n > 4) throw new Error("DER: unsupported length form");
    if (p + n > buf.length) throw new Error("DER: truncated");
    len = 0;
    for (let i = 0; i < n; i++) len = len * 256 + buf[p + i]!;
    p += n;
  }
  if (p + len > buf.length) throw new Error("DER: truncated");
  return { tag, start: offset, contentStart: p, end: p + len, buf };
}

/** The children of a constructed TLV, in order. */
export function children(t: Tlv): Tlv[] {
  const out: Tlv[] = [];
  for (let p = t.contentStart; p < t.end; ) {
    const c = readTlv(t.buf, p);
    if (c.end > t.end) throw new Error("DER: child overruns its parent");
    out.push(c);
    p = c.end;
  }
  return out;
}

/** The whole encoding (tag, length, contents) of `t`, as a view. */
export const raw = (t: Tlv): Buffer => t.buf.subarray(t.start, t.end);
export const content = (t: Tlv): Buffer => t.buf.subarray(t.contentStart, t.end);

/** Decodes a UTCTime or GeneralizedTime of the form RFC 5280 allows (…SSZ) to epoch ms. */
export function readTime(t: Tlv): number {
  const s = content(t).toString("latin1");
  const m = /^(\d{2}|\d{4})(\d{2})(\d{2})(\d{2})(\d{2})(\d{2})Z$/.exec(s);
  if (!m || (t.tag === TAG.UTC_TIME) !== (m[1]!.length === 2)) throw new Error(`DER: bad time ${JSON.stringify(s)}`);
  let y = Number(m[1]);
  if (t.tag === TAG.UTC_TIME) y += y < 50 ? 2000 : 1900;
  return Date.UTC(y, Number(m[2]) - 1, Number(m[3]), Number(m[4]), Number(m[5]), Number(m[6]));
}

/** Dotted form of an OBJECT IDENTIFIER. */
export function readOid(t: Tlv): string {
  const b = content(t);
  const arcs: number[] = [];
  let n = 0;
  for (const byte of b) {
    n = n * 128 + (byte & 0x7f);
    if (!(byte & 0x80)) {
      arcs.push(n);
      n = 0;
    }
  }
  const first = arcs.shift() ?? 0;
  const top = first < 80 ? Math.floor(first / 40) : 2;
  return [top, first - top * 40, ...arcs].join(".");
}
