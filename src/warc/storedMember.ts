/**
 * A gzip member made of deflate *stored* blocks, built by hand (RFC 1951 §3.2.4, RFC 1952):
 * for payloads deflate cannot shrink (media, archives, random bytes). zlib's level 0 still runs
 * every byte through its window and copies it twice (~1.6 ms per MB here); a stored block is a
 * 5-byte header before up to 65535 bytes copied as they are, so the member costs a CRC-32
 * (`zlib.crc32`, ~0.2 ms per MB) and no copy at all: the record's own buffers go to the file.
 *
 * Every block holds exactly STORED_BLOCK_MAX bytes except the last, so the member's size is
 * known from the record's size alone, before a byte is read: a spooled body streams straight
 * into the WARC file with no spool of its own (rollover needs the size first).
 * The header is zlib's for level 0 (XFL 4, OS 3); every gzip reader inflates the member.
 */
import zlib from "node:zlib";

/** Most bytes a stored block can hold (LEN is 16 bits). */
export const STORED_BLOCK_MAX = 65535;
const BLOCK_HEADER_BYTES = 5;
const GZIP_HEADER = Buffer.from([0x1f, 0x8b, 0x08, 0x00, 0, 0, 0, 0, 0x04, 0x03]);
const TRAILER_BYTES = 8;

/** Blocks of a member of `n` bytes (an empty member still has one final, empty block). */
const blockCount = (n: number) => Math.max(1, Math.ceil(n / STORED_BLOCK_MAX));

/** Bytes on disk of the stored member of `n` input bytes. */
export function storedMemberSize(n: number): number {
  return GZIP_HEADER.length + n + BLOCK_HEADER_BYTES * blockCount(n) + TRAILER_BYTES;
}

/** BFINAL/BTYPE=00, then LEN and NLEN little-endian. */
function blockHeader(len: number, final: boolean): Buffer {
  const b = Buffer.allocUnsafe(BLOCK_HEADER_BYTES);
  b[0] = final ? 1 : 0;
  b.writeUInt16LE(len, 1);
  b.writeUInt16LE(~len & 0xffff, 3);
  return b;
}

/**
 * Turns the record's bytes, in whatever chunks they come, into the member's pieces: the gzip
 * header first, a block header wherever a block starts, views of the input (never copies), and
 * the trailer once `total` bytes have gone through. The caller supplies exactly `total` bytes.
 */
export class StoredMemberEncoder {
  readonly #total: number;
  #seen = 0;
  #leftInBlock = 0;
  #crc = 0;

  constructor(total: number) {
    this.#total = total;
  }

  /** The gzip header (and, for an empty member, its one empty final block). */
  start(): Buffer[] {
    return this.#total === 0 ? [GZIP_HEADER, blockHeader(0, true)] : [GZIP_HEADER];
  }

  /** The pieces that carry `chunk`, in order. */
  push(chunk: Uint8Array): Uint8Array[] {
    if (this.#seen + chunk.byteLength > this.#total) throw new Error(`stored member: more than the ${this.#total} bytes announced`);
    this.#crc = zlib.crc32(chunk, this.#crc);
    const out: Uint8Array[] = [];
    let at = 0;
    while (at < chunk.byteLength) {
      if (this.#leftInBlock === 0) {
        const len = Math.min(STORED_BLOCK_MAX, this.#total - this.#seen - at);
        out.push(blockHeader(len, this.#seen + at + len === this.#total));
        this.#leftInBlock = len;
      }
      const take = Math.min(this.#leftInBlock, chunk.byteLength - at);
      out.push(at === 0 && take === chunk.byteLength ? chunk : chunk.subarray(at, at + take));
      this.#leftInBlock -= take;
      at += take;
    }
    this.#seen += chunk.byteLength;
    return out;
  }

  /** CRC-32 and ISIZE; only once every announced byte went through. */
  finish(): Buffer {
    if (this.#seen !== this.#total) throw new Error(`stored member: ${this.#seen} of the ${this.#total} bytes announced`);
    const t = Buffer.allocUnsafe(TRAILER_BYTES);
    t.writeUInt32LE(this.#crc >>> 0, 0);
    t.writeUInt32LE(this.#total >>> 0, 4);
    return t;
  }
}

/** The whole stored member of `parts` concatenated, as pieces (views of `parts`, no copy). */
export function storedMemberParts(parts: readonly Uint8Array[]): Uint8Array[] {
  const total = parts.reduce((n, p) => n + p.byteLength, 0);
  const enc = new StoredMemberEncoder(total);
  const out: Uint8Array[] = enc.start();
  for (const p of parts) if (p.byteLength > 0) out.push(...enc.push(p));
  out.push(enc.finish());
  return out;
}
