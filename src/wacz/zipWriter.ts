/**
 * The ZIP container of a WACZ (issue #23), written as a stream: every entry STORED (the WARCs'
 * gzip members must stay byte-addressable), each entry's size known before it starts, its CRC-32
 * only after (so general purpose bit 3 and a data descriptor follow the data), ZIP64 records
 * where a size, an offset or the entry count outgrows the classic fields (APPNOTE 6.3.10 §4.3,
 * §4.5). `zipLength` says in advance exactly how many bytes the writer will emit, which is what
 * an HTTP answer's Content-Length needs.
 *
 * Why not yazl: see README's dependency section. In short, yazl hashes every byte again in
 * JavaScript (CRC-32 at ~340 MB/s here) where this writer takes the CRC from zlib.crc32 over the
 * buffers the packager already holds for SHA-256.
 */
import { crc32 } from "node:zlib";

/** Receives the archive's bytes in order; the promise settles when `chunk` may be reused. */
export type ByteSink = (chunk: Buffer) => Promise<void>;

export interface ZipEntrySpec {
  /** Path inside the archive, `/`-separated, UTF-8. */
  name: string;
  /** Exact number of bytes the entry will hold. */
  size: number;
  mtime: Date;
}

export interface ZipOptions {
  /** Write every ZIP64 structure even where the classic fields would do (tests exercise that path with small files). */
  forceZip64?: boolean;
}

const LOCAL_HEADER = 30;
const CENTRAL_HEADER = 46;
const EOCD = 22;
const ZIP64_EOCD = 56;
const ZIP64_LOCATOR = 20;
const DESCRIPTOR = 16;
const ZIP64_DESCRIPTOR = 24;
/** Local ZIP64 extra field: tag, size, uncompressed and compressed size (zero: they follow in the descriptor). */
const ZIP64_LOCAL_EXTRA = 20;
const MAX32 = 0xffffffff;
const MAX16 = 0xffff;
/** Bit 3 (sizes and CRC in the data descriptor) and bit 11 (names are UTF-8). */
const FLAGS = 0x0808;
const VERSION_MADE_BY = (3 << 8) | 63; // Unix, APPNOTE 6.3
const VERSION_NEEDED = 20;
const VERSION_NEEDED_ZIP64 = 45;
const FILE_MODE = 0o100644;

/** Whether an entry's own sizes need ZIP64 (the local extra field and an 8-byte descriptor). */
const sizeNeedsZip64 = (size: number, o: ZipOptions) => o.forceZip64 === true || size >= MAX32;

/** Bytes the central directory record of an entry takes. */
function centralRecordLength(nameBytes: number, size: number, offset: number, o: ZipOptions): number {
  const bySize = sizeNeedsZip64(size, o);
  const byOffset = o.forceZip64 === true || offset >= MAX32;
  const extra = bySize || byOffset ? 4 + (bySize ? 16 : 0) + (byOffset ? 8 : 0) : 0;
  return CENTRAL_HEADER + nameBytes + extra;
}

/** Exactly how many bytes ZipWriter emits for these entries, in this order. */
export function zipLength(entries: ReadonlyArray<Pick<ZipEntrySpec, "name" | "size">>, o: ZipOptions = {}): number {
  let offset = 0;
  let central = 0;
  for (const e of entries) {
    const nameBytes = Buffer.byteLength(e.name);
    const z64 = sizeNeedsZip64(e.size, o);
    central += centralRecordLength(nameBytes, e.size, offset, o);
    offset += LOCAL_HEADER + nameBytes + (z64 ? ZIP64_LOCAL_EXTRA : 0) + e.size + (z64 ? ZIP64_DESCRIPTOR : DESCRIPTOR);
  }
  return offset + central + endLength(entries.length, central, offset, o);
}

function eocdNeedsZip64(count: number, centralBytes: number, centralOffset: number, o: ZipOptions): boolean {
  return o.forceZip64 === true || count >= MAX16 || centralBytes >= MAX32 || centralOffset >= MAX32;
}

function endLength(count: number, centralBytes: number, centralOffset: number, o: ZipOptions): number {
  return EOCD + (eocdNeedsZip64(count, centralBytes, centralOffset, o) ? ZIP64_EOCD + ZIP64_LOCATOR : 0);
}

/** MS-DOS date and time (local time, 2-second steps), clamped to what the format can hold. */
function dosDateTime(d: Date): { date: number; time: number } {
  const y = d.getFullYear();
  if (y < 1980) return { date: (1 << 5) | 1, time: 0 };
  if (y > 2107) return { date: (127 << 9) | (12 << 5) | 31, time: (23 << 11) | (59 << 5) | 29 };
  return {
    date: ((y - 1980) << 9) | ((d.getMonth() + 1) << 5) | d.getDate(),
    time: (d.getHours() << 11) | (d.getMinutes() << 5) | (d.getSeconds() >> 1),
  };
}

interface Written {
  name: Buffer;
  size: number;
  crc: number;
  offset: number;
  dos: { date: number; time: number };
}

interface Current extends Written {
  seen: number;
}

/**
 * Writes entries one after the other through `sink`: `begin`, then `data` for each chunk (the
 * CRC-32 is taken from it there), then `end`; `finish` writes the central directory.
 */
export class ZipWriter {
  readonly #sink: ByteSink;
  readonly #o: ZipOptions;
  readonly #done: Written[] = [];
  #cur: Current | null = null;
  #offset = 0;

  constructor(sink: ByteSink, o: ZipOptions = {}) {
    this.#sink = sink;
    this.#o = o;
  }

  /** Bytes handed to the sink so far. */
  get offset(): number {
    return this.#offset;
  }

  #emit(b: Buffer): Promise<void> {
    this.#offset += b.length;
    return this.#sink(b);
  }

  begin(e: ZipEntrySpec): Promise<void> {
    if (this.#cur) throw new Error(`zip: ${this.#cur.name.toString()} is not finished`);
    if (!Number.isSafeInteger(e.size) || e.size < 0) throw new Error(`zip: bad size ${e.size} for ${e.name}`);
    const name = Buffer.from(e.name, "utf8");
    if (name.length > MAX16) throw new Error(`zip: name too long: ${e.name}`);
    const z64 = sizeNeedsZip64(e.size, this.#o);
    this.#cur = { name, size: e.size, crc: 0, offset: this.#offset, dos: dosDateTime(e.mtime), seen: 0 };
    const h = Buffer.alloc(LOCAL_HEADER + name.length + (z64 ? ZIP64_LOCAL_EXTRA : 0));
    h.writeUInt32LE(0x04034b50, 0);
    h.writeUInt16LE(z64 ? VERSION_NEEDED_ZIP64 : VERSION_NEEDED, 4);
    h.writeUInt16LE(FLAGS, 6);
    h.writeUInt16LE(0, 8); // stored
    h.writeUInt16LE(this.#cur.dos.time, 10);
    h.writeUInt16LE(this.#cur.dos.date, 12);
    // CRC and sizes: zero, they follow in the data descriptor (bit 3); 0xFFFFFFFF sizes point to the ZIP64 extra.
    h.writeUInt32LE(0, 14);
    h.writeUInt32LE(z64 ? MAX32 : 0, 18);
    h.writeUInt32LE(z64 ? MAX32 : 0, 22);
    h.writeUInt16LE(name.length, 26);
    h.writeUInt16LE(z64 ? ZIP64_LOCAL_EXTRA : 0, 28);
    name.copy(h, LOCAL_HEADER);
    if (z64) {
      h.writeUInt16LE(0x0001, LOCAL_HEADER + name.length);
      h.writeUInt16LE(16, LOCAL_HEADER + name.length + 2);
    }
    return this.#emit(h);
  }

  /** One chunk of the current entry's bytes; its CRC-32 is folded in here. */
  data(chunk: Buffer): Promise<void> {
    const c = this.#cur;
    if (!c) throw new Error("zip: data outside an entry");
    c.seen += chunk.length;
    if (c.seen > c.size) throw new Error(`zip: ${c.name.toString()} is longer than the ${c.size} bytes announced`);
    c.crc = crc32(chunk, c.crc);
    return this.#emit(chunk);
  }

  end(): Promise<void> {
    const c = this.#cur;
    if (!c) throw new Error("zip: end outside an entry");
    if (c.seen !== c.size) throw new Error(`zip: ${c.name.toString()} has ${c.seen} bytes, not the ${c.size} announced`);
    this.#cur = null;
    this.#done.push(c);
    const z64 = sizeNeedsZip64(c.size, this.#o);
    const d = Buffer.alloc(z64 ? ZIP64_DESCRIPTOR : DESCRIPTOR);
    d.writeUInt32LE(0x08074b50, 0);
    d.writeUInt32LE(c.crc, 4);
    if (z64) {
      d.writeBigUInt64LE(BigInt(c.size), 8);
      d.writeBigUInt64LE(BigInt(c.size), 16);
    } else {
      d.writeUInt32LE(c.size, 8);
      d.writeUInt32LE(c.size, 12);
    }
    return this.#emit(d);
  }

  /** The central directory and the end records; returns the archive's length. */
  async finish(): Promise<number> {
    if (this.#cur) throw new Error(`zip: ${this.#cur.name.toString()} is not finished`);
    const centralOffset = this.#offset;
    const records = this.#done.map((e) => this.#centralRecord(e));
    const central = Buffer.concat(records);
    await this.#emit(central);
    await this.#emit(this.#end(central.length, centralOffset));
    return this.#offset;
  }

  #centralRecord(e: Written): Buffer {
    const o = this.#o;
    const bySize = sizeNeedsZip64(e.size, o);
    const byOffset = o.forceZip64 === true || e.offset >= MAX32;
    const r = Buffer.alloc(centralRecordLength(e.name.length, e.size, e.offset, o));
    r.writeUInt32LE(0x02014b50, 0);
    r.writeUInt16LE(VERSION_MADE_BY, 4);
    r.writeUInt16LE(bySize || byOffset ? VERSION_NEEDED_ZIP64 : VERSION_NEEDED, 6);
    r.writeUInt16LE(FLAGS, 8);
    r.writeUInt16LE(0, 10);
    r.writeUInt16LE(e.dos.time, 12);
    r.writeUInt16LE(e.dos.date, 14);
    r.writeUInt32LE(e.crc, 16);
    r.writeUInt32LE(bySize ? MAX32 : e.size, 20);
    r.writeUInt32LE(bySize ? MAX32 : e.size, 24);
    r.writeUInt16LE(e.name.length, 28);
    r.writeUInt16LE(r.length - CENTRAL_HEADER - e.name.length, 30);
    // comment length, disk number, internal attributes: 0
    r.writeUInt32LE((FILE_MODE << 16) >>> 0, 38);
    r.writeUInt32LE(byOffset ? MAX32 : e.offset, 42);
    e.name.copy(r, CENTRAL_HEADER);
    let p = CENTRAL_HEADER + e.name.length;
    if (bySize || byOffset) {
      // APPNOTE 4.5.3: only the fields set to 0xFFFFFFFF above, in this order.
      r.writeUInt16LE(0x0001, p);
      r.writeUInt16LE(r.length - p - 4, p + 2);
      p += 4;
      if (bySize) {
        r.writeBigUInt64LE(BigInt(e.size), p);
        r.writeBigUInt64LE(BigInt(e.size), p + 8);
        p += 16;
      }
      if (byOffset) r.writeBigUInt64LE(BigInt(e.offset), p);
    }
    return r;
  }

  #end(centralBytes: number, centralOffset: number): Buffer {
    const o = this.#o;
    const count = this.#done.length;
    const z64 = eocdNeedsZip64(count, centralBytes, centralOffset, o);
    const b = Buffer.alloc(endLength(count, centralBytes, centralOffset, o));
    let p = 0;
    if (z64) {
      b.writeUInt32LE(0x06064b50, 0);
      b.writeBigUInt64LE(BigInt(ZIP64_EOCD - 12), 4);
      b.writeUInt16LE(VERSION_MADE_BY, 12);
      b.writeUInt16LE(VERSION_NEEDED_ZIP64, 14);
      // disk numbers: 0
      b.writeBigUInt64LE(BigInt(count), 24);
      b.writeBigUInt64LE(BigInt(count), 32);
      b.writeBigUInt64LE(BigInt(centralBytes), 40);
      b.writeBigUInt64LE(BigInt(centralOffset), 48);
      b.writeUInt32LE(0x07064b50, ZIP64_EOCD);
      b.writeBigUInt64LE(BigInt(centralOffset + centralBytes), ZIP64_EOCD + 8);
      b.writeUInt32LE(1, ZIP64_EOCD + 16);
      p = ZIP64_EOCD + ZIP64_LOCATOR;
    }
    // With ZIP64, readers look for its records when a field holds its maximum (wabac.js checks the count and the offset).
    const n = z64 ? MAX16 : count;
    b.writeUInt32LE(0x06054b50, p);
    b.writeUInt16LE(n, p + 8);
    b.writeUInt16LE(n, p + 10);
    b.writeUInt32LE(z64 ? MAX32 : centralBytes, p + 12);
    b.writeUInt32LE(z64 ? MAX32 : centralOffset, p + 16);
    return b;
  }
}
