/**
 * One serialized record → the exact bytes it will take on disk (warc-files.md §3): one gzip
 * member, or for `.warc` the record plus CRLF CRLF. Compression streams through node:zlib (the
 * threadpool, never a sync call) into a spool — memory up to a bound, then a temp file — so the
 * writer knows the member's exact size before it appends anything, as rollover needs.
 */
import { randomUUID } from "node:crypto";
import { open, unlink, type FileHandle } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { createGzip, gzipSync } from "node:zlib";
import { gzipMemberSync } from "./deflate.js";
import { storedMemberParts, storedMemberSize, StoredMemberEncoder } from "./storedMember.js";
import { DONE } from "../core/done.js";
import { ProxyError, errorMessage, isProxyError } from "../core/errors.js";
import { blockSize, partSize, RECORD_TRAILER } from "./serialize.js";
import type { BlockPart, StreamSource } from "./types.js";

/** The subset of FileHandle the writer appends with (a seam for tests). */
export interface PositionalWriter {
  write(buffer: Uint8Array, offset: number, length: number, position: number): Promise<{ bytesWritten: number }>;
  /** pwritev(2), where the handle has it (FileHandle does): several buffers, no copy into one. */
  writev?(buffers: Uint8Array[], position: number): Promise<{ bytesWritten: number }>;
}

export interface EncodeOptions {
  gzip: boolean;
  /** Deflate level, default 6. */
  level?: number;
  /** Add the 'sl' extra field (warc-files.md §3.1). */
  skipLength?: boolean;
  /** Where members too big for memory are spooled; default os.tmpdir(). */
  spoolDir?: string;
  /** Compressed bytes kept in memory before spilling to a temp file; default 1 MiB. */
  spoolMemoryBytes?: number;
}

export interface EncodedRecord {
  /** Bytes on disk: the whole gzip member, or the record with its CRLF CRLF. */
  readonly size: number;
  /** Bytes of the serialized record: header, block, CRLF CRLF (what the member inflates to). */
  readonly recordSize: number;
  /**
   * The member's bytes, in order, when they are all in memory (lets the writer coalesce a group
   * into one writev). Pieces, not one buffer: joining a 1 MiB member would allocate and free a
   * 1 MiB block per record, which raises glibc's mmap threshold and leaves RSS to fragmentation.
   */
  readonly parts: readonly Uint8Array[] | null;
  /** Write all `size` bytes at `position`. */
  writeTo(out: PositionalWriter, position: number): Promise<void>;
  /** Release the spool (temp file); idempotent. */
  dispose(): Promise<void>;
}

/** The dispose of a member with no spool: the shared settled promise, not a fresh one per record. */
const disposeNothing = (): Promise<void> => DONE;

export const GZIP_HEADER_BYTES = 10;
export const SL_EXTRA_BYTES = 14;
const MIB = 1024 * 1024;
/** Read window when copying a spooled member into the WARC file. */
const COPY_BYTES = 256 * 1024;
const TMP = tmpdir();
const UINT32_MAX = 0xffffffff;
/** Records up to this size are deflated in one synchronous call. */
const SYNC_GZIP_MAX_BYTES = 64 * 1024;
/** Bytes of payload sampled to decide whether deflating is worth it. */
const SAMPLE_BYTES = 4096;

/**
 * True for data deflate cannot shrink (random, media, already compressed): the byte entropy of
 * the sample is above 7.5 bits per byte. A histogram costs microseconds where a trial deflate
 * costs as much as the real one.
 */
export function incompressible(sample: Uint8Array): boolean {
  const n = Math.min(sample.byteLength, SAMPLE_BYTES);
  if (n < 1024) return false;
  const counts = new Uint32Array(256);
  for (let i = 0; i < n; i++) counts[sample[i]!]!++;
  let bits = 0;
  for (let i = 0; i < 256; i++) {
    const c = counts[i]!;
    if (c) bits -= c * Math.log2(c / n);
  }
  return bits / n > 7.5;
}

/** Pull at least `n` bytes (or everything) from an iterator; returns them and the rest. */
async function peek(it: AsyncGenerator<Uint8Array>, n: number): Promise<{ sample: Buffer; rest: AsyncGenerator<Uint8Array> }> {
  const parts: Uint8Array[] = [];
  let got = 0;
  while (got < n) {
    const r = await it.next();
    if (r.done) break;
    parts.push(r.value);
    got += r.value.byteLength;
  }
  return { sample: Buffer.concat(parts), rest: it };
}

/** The parts of a block when every one is in memory (a spool that never reached its file), else null. */
function memoryParts(block: BlockPart[]): Uint8Array[] | null {
  const out: Uint8Array[] = [];
  for (const part of block) {
    if (part instanceof Uint8Array) {
      if (part.byteLength > 0) out.push(part);
      continue;
    }
    const m = part.memory?.() ?? null;
    if (!m) return null;
    let n = 0;
    for (const c of m) {
      n += c.byteLength;
      if (c.byteLength > 0) out.push(c);
    }
    // The same check readSource makes: a part must hold exactly its declared size.
    if (n !== part.size) throw new ProxyError("ERR_SPOOL", `a record block part is ${n > part.size ? "longer" : "shorter"} than its declared ${part.size} bytes`);
  }
  return out;
}

/**
 * The member of a small record whose block is all in memory, built synchronously (no stream,
 * no spool, no threadpool round trip: most records of a crawl are a few KB); null when the
 * record is too large or a part is on disk, and `encodeRecord` must stream it.
 */
export function encodeRecordSync(head: Uint8Array, block: BlockPart[], opts: EncodeOptions): EncodedRecord | null {
  const recordSize = head.byteLength + blockSize(block) + RECORD_TRAILER.byteLength;
  if (recordSize > SYNC_GZIP_MAX_BYTES) return null;
  const parts = memoryParts(block);
  if (!parts) return null;
  const all = [head, ...parts, RECORD_TRAILER];
  let bytes: Buffer;
  let size: number;
  if (!opts.gzip) {
    bytes = Buffer.concat(all, recordSize);
    size = recordSize;
  } else {
    const level = opts.level ?? 6;
    // The payload follows the WARC header and the first block part (the HTTP head).
    const payload = block.length > 1 ? memoryParts(block.slice(1))! : parts;
    // Incompressible: stored blocks made by hand, views of the record's own buffers.
    if (level === 0 || incompressible(firstBytes(payload, SAMPLE_BYTES))) return storedRecord(all, recordSize, opts);
    const member = gzipMemberSync(all, level);
    const withSl = opts.skipLength === true;
    if (withSl) {
      size = member.length + SL_EXTRA_BYTES;
      bytes = Buffer.concat([member.subarray(0, GZIP_HEADER_BYTES), slExtraField(size, recordSize), member.subarray(GZIP_HEADER_BYTES)], size);
      bytes[3] = 0x04; // FLG.FEXTRA
    } else {
      bytes = member;
      size = member.length;
    }
  }
  return {
    size,
    recordSize,
    parts: [bytes],
    writeTo: (out, position) => writeFully(out, bytes, position),
    dispose: disposeNothing,
  };
}

/** Up to `n` bytes from the start of `parts` (a view when the first part is long enough). */
function firstBytes(parts: Uint8Array[], n: number): Uint8Array {
  const first = parts[0];
  if (!first) return new Uint8Array(0);
  if (first.byteLength >= n || parts.length === 1) return first.subarray(0, n);
  const out: Uint8Array[] = [];
  let got = 0;
  for (const p of parts) {
    if (got >= n) break;
    const take = p.subarray(0, n - got);
    out.push(take);
    got += take.byteLength;
  }
  return Buffer.concat(out, got);
}

export async function encodeRecord(head: Uint8Array, block: BlockPart[], opts: EncodeOptions): Promise<EncodedRecord> {
  const sync = encodeRecordSync(head, block, opts);
  if (sync) return sync;
  const recordSize = head.byteLength + blockSize(block) + RECORD_TRAILER.byteLength;
  if (!opts.gzip) return plainRecord(head, block, recordSize);

  const level = opts.level ?? 6;
  const payloadAt = head.byteLength + (block.length > 1 ? partSize(block[0]!) : 0);
  // Already-compressed or random payloads need not cost a deflate (decisions.md §8): a member
  // of stored blocks, whose size is known at once, streams into the file with no spool.
  if (recordSize > SYNC_GZIP_MAX_BYTES && recordSize <= UINT32_MAX) {
    const { sample, rest } = await peek(recordBytes(head, block), payloadAt + SAMPLE_BYTES);
    await rest.return(undefined); // let go of the source: it is read again from the start on its turn
    if (level === 0 || incompressible(sample.subarray(payloadAt))) return streamedStoredRecord(head, block, recordSize, opts);
  }
  const spool = new Spool(opts.spoolDir ?? TMP, opts.spoolMemoryBytes ?? MIB);
  try {
    if (recordSize <= SYNC_GZIP_MAX_BYTES) {
      // Small records: one synchronous deflate costs ~0.1 ms, far less than a zlib stream's
      // set-up and threadpool round trips; the member bytes are the same.
      const chunks: Uint8Array[] = [];
      for await (const c of recordBytes(head, block)) chunks.push(c);
      const whole = Buffer.concat(chunks);
      // The payload sits after the WARC header and the first block part (the HTTP head).
      if (level === 0 || incompressible(whole.subarray(payloadAt, whole.length - RECORD_TRAILER.byteLength))) {
        await spool.dispose();
        return storedRecord([whole], recordSize, opts);
      }
      await spool.write(gzipSync(whole, { level }));
    } else {
      await pipeline(
        // Byte mode with a 256 KiB window: object mode would queue 16 chunks (4 MiB) per record.
        Readable.from(recordBytes(head, block), { objectMode: false, highWaterMark: 256 * 1024 }),
        createGzip({ level, chunkSize: 64 * 1024 }),
      async (gz: AsyncIterable<Buffer>) => {
        for await (const c of gz) await spool.write(c);
      },
    );
    }
    await spool.finish();
  } catch (e) {
    await spool.dispose();
    throw e;
  }
  const h = spool.first;
  if (h[0] !== 0x1f || h[1] !== 0x8b || h[2] !== 8 || h[3] !== 0) {
    await spool.dispose();
    throw new ProxyError("ERR_INTERNAL", `zlib wrote an unexpected gzip header ${h.toString("hex")}`);
  }
  // The 'sl' field needs both lengths, known only now: patch FLG and insert the 14 bytes
  // after the fixed header instead of seeking back in the file.
  const withSl = opts.skipLength === true && spool.size + SL_EXTRA_BYTES <= UINT32_MAX && recordSize <= UINT32_MAX;
  const size = spool.size + (withSl ? SL_EXTRA_BYTES : 0);
  const header = withSl ? Buffer.concat([h, slExtraField(size, recordSize)]) : h;
  if (withSl) header[3] = 0x04; // FLG.FEXTRA
  const inMemory = spool.inMemory ? [header, ...spool.memoryAfter(GZIP_HEADER_BYTES)] : null;
  return {
    size,
    recordSize,
    parts: inMemory,
    async writeTo(out, position) {
      if (inMemory) return writevFully(out, inMemory, position);
      await writeFully(out, header, position);
      await spool.copyTo(out, position + header.length, GZIP_HEADER_BYTES);
    },
    dispose: () => spool.dispose(),
  };
}

/** The 'sl' field spliced into a hand-made member's header, when both lengths fit in it. */
function withSkipLength(header: Buffer, size: number, recordSize: number, opts: EncodeOptions): { header: Buffer; size: number } {
  if (opts.skipLength !== true || size + SL_EXTRA_BYTES > UINT32_MAX || recordSize > UINT32_MAX) return { header, size };
  const h = Buffer.concat([header, slExtraField(size + SL_EXTRA_BYTES, recordSize)]);
  h[3] = 0x04; // FLG.FEXTRA
  return { header: h, size: size + SL_EXTRA_BYTES };
}

/** An in-memory record as a member of stored blocks (storedMember.ts): views, no copy, no deflate. */
function storedRecord(record: Uint8Array[], recordSize: number, opts: EncodeOptions): EncodedRecord {
  const [plainHeader, ...rest] = storedMemberParts(record);
  const { header, size } = withSkipLength(plainHeader as Buffer, storedMemberSize(recordSize), recordSize, opts);
  const parts = [header, ...rest];
  return { size, recordSize, parts, writeTo: (out, position) => writevFully(out, parts, position), dispose: disposeNothing };
}

/**
 * A large record as a member of stored blocks, streamed from its sources into the file on its
 * turn: its size is known from the record's alone, so nothing is spooled.
 */
function streamedStoredRecord(head: Uint8Array, block: BlockPart[], recordSize: number, opts: EncodeOptions): EncodedRecord {
  const enc0 = new StoredMemberEncoder(recordSize);
  const { header, size } = withSkipLength(enc0.start()[0]!, storedMemberSize(recordSize), recordSize, opts);
  return {
    size,
    recordSize,
    parts: null,
    async writeTo(out, position) {
      const enc = new StoredMemberEncoder(recordSize); // a retried write starts over
      enc.start();
      const w = new BatchedWriter(out, position);
      await w.add([header]);
      for await (const c of recordBytes(head, block)) await w.add(enc.push(c));
      await w.add([enc.finish()]);
      await w.flush();
    },
    dispose: disposeNothing,
  };
}

/** Small pieces gathered into fewer pwritev(2) calls, large ones passed through as views. */
class BatchedWriter {
  #batch: Uint8Array[] = [];
  #bytes = 0;
  #pos: number;
  readonly #out: PositionalWriter;

  constructor(out: PositionalWriter, position: number) {
    this.#out = out;
    this.#pos = position;
  }

  async add(pieces: Uint8Array[]): Promise<void> {
    for (const p of pieces) {
      this.#batch.push(p);
      this.#bytes += p.byteLength;
    }
    if (this.#bytes >= 256 * 1024) await this.flush();
  }

  async flush(): Promise<void> {
    if (this.#bytes === 0) return;
    const batch = this.#batch;
    const n = this.#bytes;
    this.#batch = [];
    this.#bytes = 0;
    await writevFully(this.#out, batch, this.#pos);
    this.#pos += n;
  }
}

/** The 14 'sl' bytes: XLEN 12, 's' 'l', LEN 8, member length, record length (all LE). */
export function slExtraField(memberLength: number, recordLength: number): Buffer {
  const b = Buffer.alloc(SL_EXTRA_BYTES);
  b.writeUInt16LE(12, 0);
  b[2] = 0x73;
  b[3] = 0x6c;
  b.writeUInt16LE(8, 4);
  b.writeUInt32LE(memberLength, 6);
  b.writeUInt32LE(recordLength, 10);
  return b;
}

export async function writeFully(out: PositionalWriter, buf: Uint8Array, position: number): Promise<void> {
  let done = 0;
  while (done < buf.byteLength) {
    const { bytesWritten } = await out.write(buf, done, buf.byteLength - done, position + done);
    if (bytesWritten <= 0) throw new Error(`write made no progress at offset ${position + done}`);
    done += bytesWritten;
  }
}

/** At most this many buffers per pwritev(2) (IOV_MAX is 1024 on Linux). */
const WRITEV_MAX_BUFFERS = 512;

/**
 * Write `parts` one after another at `position`: pwritev(2) where the handle has it (partial
 * writes resumed), else one joined write.
 */
export async function writevFully(out: PositionalWriter, parts: readonly Uint8Array[], position: number): Promise<void> {
  const bufs = parts.filter((b) => b.byteLength > 0);
  if (bufs.length === 0) return;
  if (bufs.length === 1) return writeFully(out, bufs[0]!, position);
  if (!out.writev) return writeFully(out, Buffer.concat(bufs), position);
  let i = 0;
  let pos = position;
  while (i < bufs.length) {
    const batch = bufs.slice(i, i + WRITEV_MAX_BUFFERS);
    const want = batch.reduce((n, b) => n + b.byteLength, 0);
    const { bytesWritten } = await out.writev(batch, pos);
    if (bytesWritten <= 0) throw new Error(`write made no progress at offset ${pos}`);
    pos += bytesWritten;
    if (bytesWritten >= want) {
      i += batch.length;
      continue;
    }
    // A short write: drop what landed and go on from the first byte that did not.
    let landed = bytesWritten;
    while (landed >= bufs[i]!.byteLength) landed -= bufs[i++]!.byteLength;
    bufs[i] = bufs[i]!.subarray(landed);
  }
}

/** `.warc`: nothing to compress, so no spool; the block streams straight into the file. */
function plainRecord(head: Uint8Array, block: BlockPart[], size: number): EncodedRecord {
  return {
    size,
    recordSize: size,
    parts: null,
    async writeTo(out, position) {
      // Small pieces (head, in-memory parts, trailer) gathered into fewer pwritev(2) calls.
      const w = new BatchedWriter(out, position);
      for await (const c of recordBytes(head, block)) await w.add([c]);
      await w.flush();
    },
    dispose: disposeNothing,
  };
}

/** The serialized record as a byte stream: head, block parts, CRLF CRLF. */
async function* recordBytes(head: Uint8Array, block: BlockPart[]): AsyncGenerator<Uint8Array> {
  yield head;
  for (const part of block) {
    if (part instanceof Uint8Array) {
      if (part.byteLength > 0) yield part;
    } else {
      yield* readSource(part);
    }
  }
  yield RECORD_TRAILER;
}

/**
 * A spooled body must hold exactly its declared size: Content-Length was already computed from
 * it, and a mismatch would corrupt every record after this one. ERR_SPOOL marks the fault as the
 * source's, not the WARC file's.
 */
async function* readSource(src: StreamSource): AsyncGenerator<Uint8Array> {
  let n = 0;
  try {
    for await (const c of src.createReadStream()) {
      const b: Buffer = typeof c === "string" ? Buffer.from(c) : c;
      n += b.length;
      if (n > src.size) break;
      yield b;
    }
  } catch (e) {
    if (isProxyError(e)) throw e;
    throw new ProxyError("ERR_SPOOL", `cannot read a record block: ${errorMessage(e)}`, e);
  }
  if (n !== src.size) {
    throw new ProxyError("ERR_SPOOL", `a record block part is ${n > src.size ? "longer" : "shorter"} than its declared ${src.size} bytes`);
  }
}

/** Compressed bytes: memory up to a bound, then an (already unlinked where possible) temp file. */
class Spool {
  size = 0;
  readonly first = Buffer.alloc(GZIP_HEADER_BYTES);
  #buffered: Buffer[] = [];
  #bufferedBytes = 0;
  #fileBytes = 0;
  #fh: FileHandle | null = null;
  #path: string | null = null;
  readonly #dir: string;
  readonly #memoryLimit: number;

  constructor(dir: string, memoryLimit: number) {
    this.#dir = dir;
    this.#memoryLimit = memoryLimit;
  }

  get inMemory(): boolean {
    return this.#fh === null;
  }

  /** The buffered chunks from byte `from` on (views, no copy); only while nothing went to the file. */
  memoryAfter(from: number): Buffer[] {
    const out: Buffer[] = [];
    let skip = from;
    for (const c of this.#buffered) {
      if (skip >= c.length) {
        skip -= c.length;
        continue;
      }
      out.push(skip > 0 ? c.subarray(skip) : c);
      skip = 0;
    }
    return out;
  }

  async write(c: Buffer): Promise<void> {
    if (this.size < GZIP_HEADER_BYTES) c.copy(this.first, this.size, 0, Math.min(c.length, GZIP_HEADER_BYTES - this.size));
    this.size += c.length;
    this.#buffered.push(c);
    this.#bufferedBytes += c.length;
    if (this.#fh ? this.#bufferedBytes >= MIB : this.size > this.#memoryLimit) await this.#flush();
  }

  async finish(): Promise<void> {
    if (this.#fh) await this.#flush();
  }

  async copyTo(out: PositionalWriter, position: number, from: number): Promise<void> {
    const fh = this.#fh!;
    const buf = Buffer.allocUnsafe(COPY_BYTES);
    for (let at = from; at < this.#fileBytes; ) {
      const { bytesRead } = await fh.read(buf, 0, Math.min(COPY_BYTES, this.#fileBytes - at), at);
      if (bytesRead <= 0) throw new Error("spool file shorter than written");
      await writeFully(out, buf.subarray(0, bytesRead), position + (at - from));
      at += bytesRead;
    }
  }

  async dispose(): Promise<void> {
    const fh = this.#fh;
    const path = this.#path;
    this.#fh = null;
    this.#path = null;
    this.#buffered = [];
    await fh?.close().catch(() => {});
    if (path) await unlink(path).catch(() => {});
  }

  async #flush(): Promise<void> {
    if (!this.#fh) {
      const path = join(this.#dir, `lathe-member-${randomUUID()}.tmp`);
      this.#fh = await open(path, "wx+", 0o600);
      // Unlinked at once so a crash cannot leave it behind; kept (and removed on dispose)
      // only where the platform refuses to unlink an open file.
      this.#path = await unlink(path).then(() => null, () => path);
    }
    // One pwritev(2) of the buffered chunks: no 1 MiB copy per flush.
    const parts = this.#buffered;
    const total = this.#bufferedBytes;
    this.#buffered = [];
    this.#bufferedBytes = 0;
    await writevFully(this.#fh, parts, this.#fileBytes);
    this.#fileBytes += total;
  }
}
