/**
 * Sequential WARC reader (issue "Deduplication": `lathe index --dedup-db`; issue "CDXJ": the
 * indexer). Reads `.warc.gz` and `.warc` in large buffers and yields, for every record, its
 * offset and length on disk, its WARC header fields and the first bytes of its block (enough for
 * the HTTP head), so a caller can index a record without touching its payload.
 *
 * - `.warc.gz`: each gzip member is inflated with one synchronous raw inflate over the buffered
 *   input (no per-byte work, no per-member stream set-up), so member boundaries are exact: offset
 *   = where the member's gzip header starts, length = through its 8-byte trailer (warc-files.md
 *   §3). CRC32 and ISIZE are checked. Members too large for memory (compressed beyond the read
 *   window or inflating beyond `MAX_SYNC_OUT`) stream through a zlib stream instead, keeping only
 *   the first bytes of the block. The 'sl' extra field (§3.1) is honoured when it is consistent.
 * - Files whose members hold several records, or whose records span members, are read too; such
 *   records have `aligned: false` and offset = the member holding the record's first byte,
 *   length = through the member holding its last byte (a warning is reported once per file;
 *   inside a streamed member that has not ended yet, the length is the input consumed so far).
 *   No conformance file is like that; warcio refuses such files, `gzip whole.warc` makes one.
 * - `.warc`: offset = the record's `WARC/` line, length = header + Content-Length block, without
 *   the CRLF CRLF trailer. Large blocks are skipped by seeking.
 * - Damage (bad gzip data, CRC mismatch, truncation, a header or Content-Length that does not
 *   parse or runs past its member) is reported as `{file, offset, reason}` and reading continues
 *   with the next member (gzip) or the next `WARC/1.` (plain, and inside multi-record members).
 *   Recoverable oddities (a missing trailer, a few bytes after a record whose Content-Length was
 *   too small, records not one per member) are warnings.
 * - Records stay usable after the iteration moves on: a kept block is a view of the inflated
 *   member (or of the read buffer), `readBlock()` of a block that was not kept reads the file again.
 */
import { createReadStream } from "node:fs";
import { open, type FileHandle } from "node:fs/promises";
import { createGunzip, createInflateRaw, crc32, inflateRawSync, type InflateRaw } from "node:zlib";
import { errorMessage } from "../core/errors.js";

/** A damaged or odd spot in a WARC file. `offset` is a file offset (of a gzip member, or a record). */
export interface WarcReadProblem {
  file: string;
  offset: number;
  reason: string;
}

/** Thrown by the iterator only when the file cannot be opened or read at all. */
export class WarcReadError extends Error {
  readonly file: string;
  readonly offset: number;
  readonly reason: string;
  constructor(file: string, offset: number, reason: string, cause?: unknown) {
    super(`${file} at offset ${offset}: ${reason}`);
    this.name = "WarcReadError";
    this.file = file;
    this.offset = offset;
    this.reason = reason;
    if (cause !== undefined) (this as { cause?: unknown }).cause = cause;
  }
}

export interface ReadWarcOptions {
  /** Damage: reading continues after it. Also collected in `reader.errors`. */
  onError?(p: WarcReadProblem): void;
  /** Oddities that lose nothing. Also collected in `reader.warnings`. */
  onWarning?(p: WarcReadProblem): void;
  /** Force the format; default: gzip when the file starts with `1f 8b`. */
  gzip?: boolean;
  /** Blocks up to this size are kept in memory (whole); larger ones only their first `prefixBytes`. Default 8 MiB. */
  keepBlockBytes?: number;
  /** Bytes of a large block kept for `httpHead()` / `blockPrefix`; default 256 KiB. */
  prefixBytes?: number;
}

/** The status line / request line and header fields of an HTTP message stored in a block. */
export interface HttpHead {
  /** First line, e.g. `HTTP/1.1 200 OK` or `GET /x HTTP/1.1`. */
  startLine: string;
  /** Response status code; null for a request or an unparsable status line. */
  status: number | null;
  /** Request method; null for a response. */
  method: string | null;
  /** Request target; null for a response. */
  requestTarget: string | null;
  headers: Array<[string, string]>;
  /** First value of a field (case-insensitive), or null. */
  get(name: string): string | null;
  getAll(name: string): string[];
  /** Bytes of the head in the block, blank line included: the payload starts here. */
  length: number;
}

export interface WarcRecord {
  /** Path as given to readWarcRecords. */
  readonly file: string;
  /** File offset of the record: its gzip member (gzip), or its `WARC/` line (plain). */
  readonly offset: number;
  /** Bytes on disk: the gzip member(s) holding it, or header + block without the trailer (plain). */
  readonly length: number;
  /** True when the record is exactly one gzip member (always true for plain files). */
  readonly aligned: boolean;
  /** e.g. `WARC/1.1`. */
  readonly version: string;
  /** Header fields in file order, names and values as written (values trimmed). */
  readonly headers: ReadonlyArray<readonly [string, string]>;
  /** WARC-Type value ("" when absent). */
  readonly warcType: string;
  readonly contentLength: number;
  /** WARC-Target-URI with `<...>` stripped (wget 1.19 writes them); null when absent. */
  readonly targetUri: string | null;
  /** WARC-Date, WARC-Record-ID verbatim; null when absent. */
  readonly date: string | null;
  readonly recordId: string | null;
  /** Bytes of the WARC header section, its blank line included. */
  readonly headerLength: number;
  /** False when the block is not followed by CRLF CRLF. */
  readonly trailerOk: boolean;
  /** The whole block when it was kept in memory, else its first bytes. */
  readonly blockPrefix: Buffer;
  /** True when `blockPrefix` is the whole block. */
  readonly blockKept: boolean;
  /** First value of a WARC header field (case-insensitive), or null. */
  get(name: string): string | null;
  getAll(name: string): string[];
  /**
   * The HTTP head of an `application/http` block (response, request, revisit with a block),
   * parsed from the block's first bytes; null when the block does not hold one.
   */
  httpHead(): HttpHead | null;
  /** The whole block. Kept blocks come from memory; large ones are read again from the file. */
  readBlock(): Promise<Buffer>;
  /** The block as chunks (streams large blocks from the file). */
  blockStream(): AsyncGenerator<Buffer>;
}

const MIB = 1024 * 1024;
/** Size of each file read. */
const READ = 8 * MIB;
/** Before a member is inflated, at least this much compressed input is buffered (or the rest of the file). */
const MIN_AVAIL = 2 * MIB;
/** Room kept in front of a read-ahead buffer for the unconsumed end of the previous window. */
const TAIL = MIN_AVAIL;
/** Largest member output inflated in one synchronous call; bigger members stream. */
const MAX_SYNC_OUT = 64 * MIB;
/** Compressed bytes per write in the streaming path. */
const STREAM_IN = 256 * 1024;
/** Output chunk of the synchronous inflate (Node allocates in chunks of this size and joins them). */
const SYNC_CHUNK = 32 * 1024;
/** A WARC header section must end within this many bytes. */
const MAX_HEAD = 1 * MIB;
/** Bytes after a record searched for the next `WARC/1.`; up to JUNK_WARN_MAX of them are only a warning. */
const JUNK_LIMIT = 64 * 1024;
const JUNK_WARN_MAX = 64;

const CRLF2 = Buffer.from("\r\n\r\n");
const LF2 = Buffer.from("\n\n");
const WARC_SLASH = Buffer.from("WARC/");
const WARC_1 = Buffer.from("WARC/1.");
const GZ_MAGIC = Buffer.from([0x1f, 0x8b, 0x08]);
const EMPTY = Buffer.alloc(0);

// ---------------------------------------------------------------------------------------------
// Decompressed data as segments tagged with the member they came from.

/** A gzip member (or, for a plain file, the whole file). -1 = not known yet (streaming). */
interface Member {
  cstart: number;
  cend: number;
  /** Position of its first byte in the decompressed stream of the whole file. */
  ustart: number;
  uend: number;
}

interface Seg {
  kind: "data";
  data: Buffer;
  m: Member;
}

/** A discontinuity: the member at `offset` is damaged (reported already); data after it is not contiguous. */
interface Break {
  kind: "break";
  offset: number;
  /** The member whose data was (partly) delivered before its damage was found, if any. */
  m: Member | null;
}

interface Source {
  next(): Promise<Seg | Break | null>;
  /** Plain files only: continue reading at this file (= decompressed) position. */
  seek?(pos: number): void;
  /** Compressed bytes consumed so far (progress). */
  position(): number;
  close(): Promise<void>;
}

/** Read `len` bytes at `pos` into `buf` at `off` (fewer only at the end of the file). */
async function readFully(fh: FileHandle, buf: Buffer, off: number, len: number, pos: number): Promise<number> {
  let have = 0;
  while (have < len) {
    const { bytesRead } = await fh.read(buf, off + have, len - have, pos + have);
    if (bytesRead === 0) break;
    have += bytesRead;
  }
  return have;
}

interface Prefetch {
  at: number;
  buf: Buffer;
  /** Bytes read into buf at TAIL, or -1 when the read failed (the slow path reads again and throws). */
  got: Promise<number>;
}

/**
 * A read window over the file that moves forward. The next READ bytes are read ahead while the
 * current ones are inflated, into a buffer with TAIL bytes of room in front, so moving on copies
 * only the unconsumed tail (at most TAIL) of the old window.
 */
class FileWindow {
  buf: Buffer = EMPTY;
  start = 0;
  #pf: Prefetch | null = null;
  constructor(
    readonly fh: FileHandle,
    readonly size: number,
  ) {}

  get end(): number {
    return this.start + this.buf.length;
  }

  /** Make [pos, pos+n) resident (clipped to the end of the file); returns the window from `pos`. */
  async ensure(pos: number, n: number): Promise<Buffer> {
    const want = Math.min(pos + n, this.size);
    if (pos >= this.start && want <= this.end) return this.buf.subarray(pos - this.start);
    const pf = this.#pf;
    if (pf && pf.at === this.end && pos >= this.start && this.end - pos <= TAIL && pos <= this.end && want <= this.end + READ) {
      this.#pf = null;
      const got = await pf.got;
      if (got >= 0) {
        const tail = this.end - pos;
        this.buf.copy(pf.buf, TAIL - tail, pos - this.start);
        this.buf = pf.buf.subarray(TAIL - tail, TAIL + got);
        this.start = pos;
        this.#prefetch();
        if (want <= this.end) return this.buf;
      }
    }
    await this.#settle();
    const len = Math.max(want - pos, Math.min(READ, this.size - pos), 0);
    const nb = Buffer.allocUnsafe(len);
    let have = 0;
    if (pos >= this.start && pos < this.end) {
      have = this.end - pos;
      this.buf.copy(nb, 0, pos - this.start);
    }
    have += await readFully(this.fh, nb, have, len - have, pos + have);
    this.buf = nb.subarray(0, have);
    this.start = pos;
    this.#prefetch();
    return this.buf;
  }

  #prefetch(): void {
    const at = this.end;
    if (at >= this.size) return;
    const buf = Buffer.allocUnsafe(TAIL + Math.min(READ, this.size - at));
    const got = readFully(this.fh, buf, TAIL, buf.length - TAIL, at).catch(() => -1);
    this.#pf = { at, buf, got };
  }

  /** Wait for a read ahead still running (before the file is closed, or before another read). */
  async #settle(): Promise<void> {
    const pf = this.#pf;
    this.#pf = null;
    if (pf) await pf.got;
  }

  async close(): Promise<void> {
    await this.#settle();
  }
}

type Report = (offset: number, reason: string) => void;

class PlainSource implements Source {
  #pos = 0;
  readonly #member: Member;
  #ahead: { at: number; buf: Buffer; got: Promise<number> } | null = null;
  constructor(
    readonly fh: FileHandle,
    readonly size: number,
  ) {
    this.#member = { cstart: 0, cend: size, ustart: 0, uend: size };
  }
  #read(at: number) {
    const buf = Buffer.allocUnsafe(Math.min(READ, this.size - at));
    return { at, buf, got: readFully(this.fh, buf, 0, buf.length, at) };
  }
  async next(): Promise<Seg | null> {
    if (this.#pos >= this.size) return null;
    let r = this.#ahead;
    this.#ahead = null;
    if (!r || r.at !== this.#pos) {
      if (r) await r.got.catch(() => 0);
      r = this.#read(this.#pos);
    }
    const have = await r.got;
    if (have === 0) return null;
    this.#pos += have;
    if (this.#pos < this.size) this.#ahead = this.#read(this.#pos);
    return { kind: "data", data: have === r.buf.length ? r.buf : r.buf.subarray(0, have), m: this.#member };
  }
  seek(pos: number): void {
    this.#pos = pos;
  }
  position(): number {
    return this.#pos;
  }
  async close(): Promise<void> {
    const r = this.#ahead;
    this.#ahead = null;
    if (r) await r.got.catch(() => 0);
  }
}

interface GzipHeader {
  /** Bytes of the header: deflate data starts here (relative to the member start). */
  length: number;
  /** From the 'sl' extra field: whole member on disk, and inflated size. */
  sl: { clen: number; ulen: number } | null;
}

/** RFC 1952 §2.3 member header at b[0..]; "short" when `b` ends inside it; "bad" when it is not one. */
function parseGzipHeader(b: Buffer): GzipHeader | "short" | "bad" {
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

interface Stream {
  inf: InflateRaw;
  m: Member;
  dstart: number;
  fed: number;
  writing: boolean;
  ended: boolean;
  err: Error | null;
  /** Resolves the current wait (on readable, end, error, or a finished write). */
  wake: (() => void) | null;
  crc: number;
  isize: number;
}

class GzipSource implements Source {
  readonly #win: FileWindow;
  #pos = 0;
  /** Decompressed bytes delivered so far (the next member's `ustart`). */
  #u = 0;
  #stream: Stream | null = null;
  /** After damage: silently try candidate members until one inflates cleanly. */
  #resyncing = false;
  readonly #report: Report;

  constructor(
    fh: FileHandle,
    readonly size: number,
    report: Report,
  ) {
    this.#win = new FileWindow(fh, size);
    this.#report = report;
  }

  position(): number {
    return this.#stream ? this.#stream.dstart + this.#stream.fed : this.#pos;
  }

  async close(): Promise<void> {
    this.#stream?.inf.destroy();
    this.#stream = null;
    await this.#win.close();
  }

  #damage(offset: number, reason: string): void {
    if (!this.#resyncing) this.#report(offset, reason);
  }

  /** Damage at member `at` whose end is unknown: continue at the next gzip magic after it. */
  async #resyncAfter(at: number): Promise<Break> {
    this.#resyncing = true;
    let p = at + 1;
    for (;;) {
      const b = await this.#win.ensure(p, READ);
      const i = b.indexOf(GZ_MAGIC);
      if (i >= 0) {
        this.#pos = p + i;
        break;
      }
      if (p + b.length >= this.size) {
        this.#pos = this.size;
        break;
      }
      p += Math.max(1, b.length - 2);
    }
    return { kind: "break", offset: at, m: null };
  }

  async next(): Promise<Seg | Break | null> {
    for (;;) {
      if (this.#stream) {
        const r = await this.#pull(this.#stream);
        if (r) return r;
        continue;
      }
      const pos = this.#pos;
      if (pos >= this.size) return null;
      let buf = await this.#win.ensure(pos, MIN_AVAIL);
      const h = parseGzipHeader(buf);
      if (h === "bad") {
        this.#damage(pos, `not a gzip member (bytes ${buf.subarray(0, 4).toString("hex")})`);
        return this.#resyncAfter(pos);
      }
      if (h === "short") {
        this.#damage(pos, "truncated: the file ends inside a gzip member header");
        this.#pos = this.size;
        return { kind: "break", offset: pos, m: null };
      }
      let sl = h.sl;
      if (sl && (sl.clen < h.length + 8 || pos + sl.clen > this.size)) sl = null;
      if (sl && sl.ulen > MAX_SYNC_OUT) {
        this.#startStream(pos, h.length);
        continue;
      }
      if (sl && sl.clen > buf.length && sl.clen <= 4 * READ) buf = await this.#win.ensure(pos, sl.clen);
      let input = sl && sl.clen <= buf.length ? buf.subarray(h.length, sl.clen - 8) : buf.subarray(h.length);
      let out: Buffer | null = null;
      let used = 0;
      let retried = false;
      let failure: unknown = null;
      while (out === null && failure === null) {
        try {
          const r = inflateRawSync(input, { info: true, maxOutputLength: MAX_SYNC_OUT, chunkSize: sl ? Math.max(64, sl.ulen + 64) : SYNC_CHUNK }) as unknown as {
            buffer: Buffer;
            engine: { bytesWritten: number };
          };
          out = r.buffer;
          used = r.engine.bytesWritten;
        } catch (e) {
          const code = (e as { code?: string }).code;
          if (code === "Z_BUF_ERROR" && !(sl && input.length === sl.clen - h.length - 8) && this.#win.end < this.size && !retried && this.#win.end - pos < READ) {
            // The member goes on past the window: once more with a full window from its start.
            retried = true;
            buf = await this.#win.ensure(pos, READ);
            input = buf.subarray(h.length);
            continue;
          }
          failure = e;
        }
      }
      if (out === null) {
        const code = (failure as { code?: string }).code;
        if (code === "Z_BUF_ERROR") {
          // The input ended inside the deflate data.
          if (this.#win.end >= this.size && !(sl && input.length === sl.clen - h.length - 8)) {
            this.#damage(pos, "truncated: the file ends inside a gzip member");
            this.#pos = this.size;
            return { kind: "break", offset: pos, m: null };
          }
          // Larger than the window (or a wrong 'sl' length): stream it.
          this.#startStream(pos, h.length);
          continue;
        }
        if (code === "ERR_BUFFER_TOO_LARGE") {
          this.#startStream(pos, h.length);
          continue;
        }
        this.#damage(pos, `gzip data error: ${errorMessage(failure)}`);
        return this.#resyncAfter(pos);
      }
      const tpos = pos + h.length + used;
      let t = buf.subarray(h.length + used, h.length + used + 8);
      if (t.length < 8) t = (await this.#win.ensure(tpos, 8)).subarray(0, 8);
      if (t.length < 8) {
        this.#damage(pos, "truncated: the file ends inside a gzip member trailer");
        this.#pos = this.size;
        return { kind: "break", offset: pos, m: null };
      }
      if (t.readUInt32LE(0) !== crc32(out) || t.readUInt32LE(4) !== out.length % 0x1_0000_0000) {
        this.#damage(pos, "gzip member CRC32/ISIZE mismatch: its data is damaged");
        this.#pos = tpos + 8;
        return { kind: "break", offset: pos, m: null };
      }
      this.#resyncing = false;
      const m: Member = { cstart: pos, cend: tpos + 8, ustart: this.#u, uend: this.#u + out.length };
      this.#u += out.length;
      this.#pos = tpos + 8;
      if (out.length === 0) continue;
      return { kind: "data", data: out, m };
    }
  }

  #startStream(pos: number, headerLength: number): void {
    // Paused mode: zlib stops inflating while its output is not read, so memory stays bounded
    // however well the member compresses.
    const inf = createInflateRaw({ chunkSize: MIB });
    const st: Stream = {
      inf,
      m: { cstart: pos, cend: -1, ustart: this.#u, uend: -1 },
      dstart: pos + headerLength,
      fed: 0,
      writing: false,
      ended: false,
      err: null,
      wake: null,
      crc: 0,
      isize: 0,
    };
    const wake = () => {
      const w = st.wake;
      st.wake = null;
      w?.();
    };
    inf.on("readable", wake);
    inf.once("end", () => {
      st.ended = true;
      wake();
    });
    inf.once("error", (e) => {
      st.err = e;
      wake();
    });
    this.#stream = st;
  }

  /** Next output of the streaming member; null once it has ended cleanly (the caller moves on). */
  async #pull(st: Stream): Promise<Seg | Break | null> {
    for (;;) {
      const c = st.err ? null : (st.inf.read() as Buffer | null);
      if (c !== null) {
        st.crc = crc32(c, st.crc);
        st.isize = (st.isize + c.length) % 0x1_0000_0000;
        this.#u += c.length;
        return { kind: "data", data: c, m: st.m };
      }
      if (st.ended || st.err) break;
      if (!st.writing && !(st.fed > 0 && st.inf.bytesWritten < st.fed)) {
        // Inflate has consumed all it was given and wants more.
        const at = st.dstart + st.fed;
        const chunk = (await this.#win.ensure(at, STREAM_IN)).subarray(0, STREAM_IN);
        if (chunk.length === 0) {
          this.#stream = null;
          st.inf.destroy();
          this.#damage(st.m.cstart, "truncated: the file ends inside a gzip member");
          this.#pos = this.size;
          return { kind: "break", offset: st.m.cstart, m: st.m };
        }
        st.writing = true;
        st.fed += chunk.length;
        st.inf.write(chunk, () => {
          st.writing = false;
          const w = st.wake;
          st.wake = null;
          w?.();
        });
        continue;
      }
      await new Promise<void>((resolve) => (st.wake = resolve));
    }
    this.#stream = null;
    st.inf.destroy();
    if (st.err) {
      this.#damage(st.m.cstart, `gzip data error: ${errorMessage(st.err)}`);
      const b = await this.#resyncAfter(st.m.cstart);
      return { ...b, m: st.m };
    }
    const tpos = st.dstart + st.inf.bytesWritten;
    const t = (await this.#win.ensure(tpos, 8)).subarray(0, 8);
    if (t.length < 8) {
      this.#damage(st.m.cstart, "truncated: the file ends inside a gzip member trailer");
      this.#pos = this.size;
      return { kind: "break", offset: st.m.cstart, m: st.m };
    }
    st.m.cend = tpos + 8;
    st.m.uend = this.#u;
    this.#pos = tpos + 8;
    if (t.readUInt32LE(0) !== st.crc || t.readUInt32LE(4) !== st.isize) {
      this.#damage(st.m.cstart, "gzip member CRC32/ISIZE mismatch: its data is damaged");
      return { kind: "break", offset: st.m.cstart, m: st.m };
    }
    this.#resyncing = false;
    return null;
  }
}

// ---------------------------------------------------------------------------------------------
// A cursor over the decompressed stream.

type Status = "ok" | "eof" | "break";

class Cursor {
  #q: Array<Seg | Break> = [];
  /** Offset into #q[0] (a Seg). */
  #off = 0;
  /** Bytes queued before the first Break. */
  avail = 0;
  /** Position in the decompressed stream. */
  u = 0;
  /** Member of the last byte consumed. */
  last: Member | null = null;
  #eof = false;
  #broken = false;

  constructor(readonly src: Source) {}

  /** At least `n` bytes queued before any break; else says why not. */
  async need(n: number): Promise<Status> {
    while (this.avail < n) {
      if (this.#broken) return "break";
      if (this.#eof) return "eof";
      const x = await this.src.next();
      if (x === null) {
        this.#eof = true;
        continue;
      }
      this.#q.push(x);
      if (x.kind === "break") this.#broken = true;
      else this.avail += x.data.length;
    }
    return "ok";
  }

  /** The queued break's member (damaged after some of its data was delivered), if one is queued. */
  breakMember(): Member | null {
    if (!this.#broken) return null;
    const b = this.#q.find((x) => x.kind === "break") as Break | undefined;
    return b?.m ?? null;
  }

  /** Drop everything up to and including the queued break. */
  passBreak(): void {
    for (;;) {
      const x = this.#q.shift();
      this.#off = 0;
      if (!x) break;
      if (x.kind === "break") break;
      this.u += x.data.length;
      this.last = x.m;
    }
    this.avail = 0;
    for (const x of this.#q) if (x.kind === "data") this.avail += x.data.length;
    this.#broken = this.#q.some((x) => x.kind === "break");
  }

  /** The rest of the current segment (empty when nothing is queued). */
  first(): Buffer {
    const s = this.#q[0];
    return s && s.kind === "data" ? s.data.subarray(this.#off) : EMPTY;
  }

  /** Member of the next byte (requires avail ≥ 1). */
  member(): Member {
    return (this.#q[0] as Seg).m;
  }

  /** The next `n` bytes (n ≤ avail) as one buffer: a view when they lie in one segment, else a copy. */
  view(n: number): Buffer {
    const f = this.first();
    if (f.length >= n) return f.subarray(0, n);
    const out = Buffer.allocUnsafe(n);
    let got = 0;
    let off = this.#off;
    for (const x of this.#q) {
      if (x.kind !== "data" || got >= n) break;
      const take = Math.min(n - got, x.data.length - off);
      x.data.copy(out, got, off, off + take);
      got += take;
      off = 0;
    }
    return out;
  }

  /** Consume `n` bytes (n ≤ avail). */
  advance(n: number): void {
    this.avail -= n;
    this.u += n;
    while (n > 0) {
      const s = this.#q[0] as Seg;
      const rest = s.data.length - this.#off;
      if (n < rest) {
        this.#off += n;
        this.last = s.m;
        return;
      }
      n -= rest;
      this.last = s.m;
      this.#q.shift();
      this.#off = 0;
    }
  }

  /** Consume `n` bytes, fetching as needed (plain files seek past what is not buffered). */
  async skip(n: number): Promise<Status> {
    if (n > this.avail && this.src.seek && !this.#broken && this.last) {
      const rest = n - this.avail;
      this.advance(this.avail);
      // A plain file is one "member": the file itself.
      const size = this.last.uend;
      const want = this.u + rest;
      const target = Math.min(want, size);
      this.src.seek(target);
      this.u = target;
      return want > size ? "eof" : "ok";
    }
    while (n > 0) {
      if (this.avail === 0) {
        const st = await this.need(1);
        if (st !== "ok") return st;
      }
      const take = Math.min(n, this.first().length);
      this.advance(take);
      n -= take;
    }
    return "ok";
  }

  /** Whether the data after member `m` (queued from here on) starts with `prefix` (a record: `WARC/`). */
  async nextMemberStartsWith(m: Member, prefix: Buffer): Promise<boolean> {
    let inM = 0;
    let off = this.#off;
    for (const x of this.#q) {
      if (x.kind !== "data" || x.m !== m) break;
      inM += x.data.length - off;
      off = 0;
    }
    await this.need(inM + prefix.length);
    for (const x of this.#q) {
      if (x.kind !== "data") return false;
      if (x.m === m) continue;
      return x.data.length >= prefix.length && x.data.subarray(0, prefix.length).equals(prefix);
    }
    return false;
  }

  /** Drop the rest of member `m` (gzip resync after a header that does not parse). */
  async dropMember(m: Member): Promise<void> {
    for (;;) {
      const st = await this.need(1);
      if (st !== "ok") {
        if (st === "break") this.passBreak();
        return;
      }
      if (this.member() !== m) return;
      this.advance(this.first().length);
    }
  }

  /** Plain resync: advance to the next `WARC/1.` after the current position (or to the end). */
  async scanToWarcLine(): Promise<void> {
    for (;;) {
      const st = await this.need(WARC_1.length + 1);
      if (this.avail === 0 && st !== "ok") {
        if (st === "break") {
          this.passBreak();
          continue;
        }
        return;
      }
      const b = this.view(Math.min(this.avail, MAX_HEAD));
      // Not at 0: the record that failed to parse may start with it.
      const i = b.indexOf(WARC_1, 1);
      if (i >= 0) {
        this.advance(i);
        return;
      }
      if (st !== "ok") {
        this.advance(this.avail);
        if (st === "break") {
          this.passBreak();
          continue;
        }
        return;
      }
      this.advance(b.length - (WARC_1.length - 1));
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Records.

function fieldGetter(names: string[], values: string[]) {
  return {
    get(name: string): string | null {
      const n = name.toLowerCase();
      for (let i = 0; i < names.length; i++) if (names[i] === n) return values[i]!;
      return null;
    },
    getAll(name: string): string[] {
      const n = name.toLowerCase();
      const out: string[] = [];
      for (let i = 0; i < names.length; i++) if (names[i] === n) out.push(values[i]!);
      return out;
    },
  };
}

interface ParsedFields {
  firstLine: string;
  headers: Array<[string, string]>;
  lower: string[];
  values: string[];
}

/** Header lines (first line, then `Name: value` with obsolete line folding). */
function parseFields(text: string): ParsedFields {
  const lines = text.includes("\r\n") ? text.split("\r\n") : text.split("\n");
  const headers: Array<[string, string]> = [];
  const lower: string[] = [];
  const values: string[] = [];
  for (let i = 1; i < lines.length; i++) {
    const line = lines[i]!;
    if (line === "") continue;
    const c0 = line.charCodeAt(0);
    if ((c0 === 32 || c0 === 9) && headers.length > 0) {
      const last = headers.length - 1;
      const v = `${values[last]} ${line.trim()}`.trim();
      headers[last] = [headers[last]![0], v];
      values[last] = v;
      continue;
    }
    const colon = line.indexOf(":");
    if (colon <= 0) continue;
    const name = line.slice(0, colon).trim();
    const value = line.slice(colon + 1).trim();
    headers.push([name, value]);
    lower.push(name.toLowerCase());
    values.push(value);
  }
  return { firstLine: lines[0]!.trim(), headers, lower, values };
}

/** End of a header section: CRLF CRLF, or LF LF when that comes first (bare-LF writers). */
function findHeadEnd(b: Buffer): { end: number; sep: number } | null {
  const i = b.indexOf(CRLF2);
  const j = (i >= 0 ? b.subarray(0, i) : b).indexOf(LF2);
  if (j >= 0) return { end: j, sep: 2 };
  return i >= 0 ? { end: i, sep: 4 } : null;
}

/** Parse the HTTP head at the start of a block; null when it is not one or does not end in `b`. */
export function parseHttpHead(b: Buffer): HttpHead | null {
  if (b.length < 8) return null;
  const isResponse = b[0] === 0x48 && b.subarray(0, 5).toString("latin1") === "HTTP/";
  if (!isResponse && !/^[A-Z][A-Z_-]* \S/.test(b.subarray(0, 32).toString("latin1"))) return null;
  const e = findHeadEnd(b.length > MAX_HEAD ? b.subarray(0, MAX_HEAD) : b);
  if (!e) return null;
  const f = parseFields(b.subarray(0, e.end).toString("latin1"));
  const g = fieldGetter(f.lower, f.values);
  let status: number | null = null;
  let method: string | null = null;
  let requestTarget: string | null = null;
  if (isResponse) {
    const m = /^HTTP\/\S+\s+(\d{3})(?:\s|$)/.exec(f.firstLine);
    status = m ? Number(m[1]) : null;
  } else {
    const parts = f.firstLine.split(/\s+/);
    method = parts[0] ?? null;
    requestTarget = parts[1] ?? null;
  }
  return { startLine: f.firstLine, status, method, requestTarget, headers: f.headers, get: g.get, getAll: g.getAll, length: e.end + e.sep };
}

interface RecordInit {
  file: string;
  gzip: boolean;
  offset: number;
  length: number;
  aligned: boolean;
  fields: ParsedFields;
  contentLength: number;
  headerLength: number;
  trailerOk: boolean;
  block: Buffer;
  blockKept: boolean;
  /** Where to find the block again: plain = file position; gzip = member start + decompressed skip. */
  reread: { cstart: number; skip: number };
}

class WarcRecordImpl implements WarcRecord {
  readonly file: string;
  readonly offset: number;
  readonly length: number;
  readonly aligned: boolean;
  readonly version: string;
  readonly headers: ReadonlyArray<readonly [string, string]>;
  readonly warcType: string;
  readonly contentLength: number;
  readonly targetUri: string | null;
  readonly date: string | null;
  readonly recordId: string | null;
  readonly headerLength: number;
  readonly trailerOk: boolean;
  readonly blockPrefix: Buffer;
  readonly blockKept: boolean;
  readonly get: (name: string) => string | null;
  readonly getAll: (name: string) => string[];
  readonly #gzip: boolean;
  readonly #reread: { cstart: number; skip: number };
  #http: HttpHead | null | undefined;

  constructor(r: RecordInit) {
    this.file = r.file;
    this.offset = r.offset;
    this.length = r.length;
    this.aligned = r.aligned;
    this.version = r.fields.firstLine;
    this.headers = r.fields.headers;
    const g = fieldGetter(r.fields.lower, r.fields.values);
    this.get = g.get;
    this.getAll = g.getAll;
    this.warcType = g.get("warc-type") ?? "";
    this.contentLength = r.contentLength;
    const t = g.get("warc-target-uri");
    this.targetUri = t !== null && t.startsWith("<") && t.endsWith(">") ? t.slice(1, -1) : t;
    this.date = g.get("warc-date");
    this.recordId = g.get("warc-record-id");
    this.headerLength = r.headerLength;
    this.trailerOk = r.trailerOk;
    this.blockPrefix = r.block;
    this.blockKept = r.blockKept;
    this.#gzip = r.gzip;
    this.#reread = r.reread;
  }

  httpHead(): HttpHead | null {
    if (this.#http === undefined) {
      const t = this.warcType;
      const ct = this.get("content-type");
      const httpish = (ct !== null && /^application\/http/i.test(ct)) || t === "response" || t === "request" || t === "revisit";
      this.#http = httpish && this.contentLength > 0 ? parseHttpHead(this.blockPrefix) : null;
    }
    return this.#http;
  }

  async readBlock(): Promise<Buffer> {
    if (this.blockKept) return this.blockPrefix;
    const parts: Buffer[] = [];
    for await (const c of this.blockStream()) parts.push(c);
    return Buffer.concat(parts);
  }

  async *blockStream(): AsyncGenerator<Buffer> {
    if (this.blockKept) {
      if (this.blockPrefix.length > 0) yield this.blockPrefix;
      return;
    }
    const want = this.contentLength;
    if (!this.#gzip) {
      const s = createReadStream(this.file, { start: this.#reread.skip, end: this.#reread.skip + want - 1, highWaterMark: MIB });
      for await (const c of s) yield c as Buffer;
      return;
    }
    const s = createReadStream(this.file, { start: this.#reread.cstart, highWaterMark: MIB });
    const z = createGunzip({ chunkSize: MIB });
    s.pipe(z);
    let skip = this.#reread.skip;
    let left = want;
    try {
      for await (const chunk of z) {
        let c = chunk as Buffer;
        if (skip > 0) {
          if (c.length <= skip) {
            skip -= c.length;
            continue;
          }
          c = c.subarray(skip);
          skip = 0;
        }
        if (c.length >= left) {
          yield c.subarray(0, left);
          left = 0;
          break;
        }
        left -= c.length;
        yield c;
      }
    } finally {
      s.destroy();
      z.destroy();
    }
    if (left > 0) throw new WarcReadError(this.file, this.offset, "the block could not be read again: the file ends early");
  }
}

/** `readWarcRecords(path)`: iterate with `for await`; `errors`/`warnings` fill up as it goes. */
export class WarcReader implements AsyncIterable<WarcRecord> {
  readonly path: string;
  readonly errors: WarcReadProblem[] = [];
  readonly warnings: WarcReadProblem[] = [];
  /** File size and format, known once iteration has started. */
  size = 0;
  gzip = false;
  readonly #opts: ReadWarcOptions;
  #src: Source | null = null;
  #started = false;

  constructor(path: string, opts: ReadWarcOptions = {}) {
    this.path = path;
    this.#opts = opts;
  }

  /** Bytes of the file processed so far. */
  get position(): number {
    return this.#src ? Math.min(this.#src.position(), this.size) : 0;
  }

  #error(offset: number, reason: string): void {
    const p = { file: this.path, offset, reason };
    this.errors.push(p);
    this.#opts.onError?.(p);
  }

  #warn(offset: number, reason: string): void {
    const p = { file: this.path, offset, reason };
    this.warnings.push(p);
    this.#opts.onWarning?.(p);
  }

  [Symbol.asyncIterator](): AsyncGenerator<WarcRecord> {
    if (this.#started) throw new Error("a WarcReader can be iterated once");
    this.#started = true;
    return this.#run();
  }

  async *#run(): AsyncGenerator<WarcRecord> {
    let fh: FileHandle;
    try {
      fh = await open(this.path, "r");
    } catch (e) {
      throw new WarcReadError(this.path, 0, `cannot open: ${errorMessage(e)}`, e);
    }
    try {
      this.size = (await fh.stat()).size;
      if (this.#opts.gzip !== undefined) this.gzip = this.#opts.gzip;
      else if (this.size >= 2) {
        const b = Buffer.alloc(2);
        await fh.read(b, 0, 2, 0);
        this.gzip = b[0] === 0x1f && b[1] === 0x8b;
      }
      const src = this.gzip ? new GzipSource(fh, this.size, (o, r) => this.#error(o, r)) : new PlainSource(fh, this.size);
      this.#src = src;
      try {
        yield* this.#records(new Cursor(src));
      } finally {
        await src.close();
      }
    } catch (e) {
      if (e instanceof WarcReadError) throw e;
      throw new WarcReadError(this.path, this.position, `read failed: ${errorMessage(e)}`, e);
    } finally {
      await fh.close().catch(() => {});
    }
  }

  async *#records(cur: Cursor): AsyncGenerator<WarcRecord> {
    const gzip = this.gzip;
    const keep = this.#opts.keepBlockBytes ?? 8 * MIB;
    const prefixBytes = this.#opts.prefixBytes ?? 256 * 1024;
    let unalignedWarned = false;
    /** The previous record ended right here, with nothing damaged since. */
    let afterRecord: { offset: number } | null = null;
    /** Data was lost since the last good record (reported already): a member that continues it is dropped silently. */
    let afterBreak = false;

    for (;;) {
      // 1. Blank lines between records (trailers of records with too-short Content-Length, padding).
      let st = await cur.need(1);
      if (st === "eof") return;
      if (st === "break") {
        cur.passBreak();
        afterRecord = null;
        afterBreak = true;
        continue;
      }
      let f = cur.first();
      let ws = 0;
      while (ws < f.length && (f[ws] === 13 || f[ws] === 10)) ws++;
      if (ws > 0) {
        cur.advance(ws);
        if (ws === f.length) continue;
        f = cur.first();
      }
      const startM = cur.member();
      const startU = cur.u;
      const probOffset = gzip ? startM.cstart : startU;

      // 2. The WARC header section.
      let lead = f;
      if (lead.length < 5) {
        st = await cur.need(5);
        lead = cur.view(Math.min(5, cur.avail));
      }
      if (!(lead.length >= 5 && lead[0] === 0x57 && lead.subarray(0, 5).equals(WARC_SLASH))) {
        const junk = afterRecord ? await this.#skipJunk(cur) : null;
        if (afterRecord && junk !== null) {
          // A few bytes (warcio reads one line): the Content-Length was too small. More is damage.
          if (junk <= JUNK_WARN_MAX && !(gzip && startU === startM.ustart)) this.#warn(probOffset, `${junk} bytes after the record at ${afterRecord.offset} before the next record (its Content-Length may be too small)`);
          else this.#error(probOffset, `${junk} bytes that are not a WARC record after the record at ${afterRecord.offset}`);
          afterRecord = null;
          continue;
        }
        // The rest of a record whose start was lost to damage already reported: drop quietly.
        const quiet = afterBreak && gzip && startU === startM.ustart;
        if (!quiet) this.#error(probOffset, `not a WARC record (starts with ${JSON.stringify(lead.subarray(0, 16).toString("latin1"))})`);
        await this.#resync(cur, gzip, startM);
        afterRecord = null;
        continue;
      }
      afterRecord = null;
      let head = cur.first();
      let he = findHeadEnd(head.length > MAX_HEAD ? head.subarray(0, MAX_HEAD) : head);
      if (!he && head.length < MAX_HEAD) {
        for (let n = Math.max(16 * 1024, head.length * 2); ; n = Math.min(n * 4, MAX_HEAD)) {
          st = await cur.need(n);
          head = cur.view(Math.min(n, cur.avail));
          he = findHeadEnd(head);
          if (he || st !== "ok" || n >= MAX_HEAD) break;
        }
      }
      if (!he) {
        this.#error(probOffset, st === "eof" ? "truncated: the file ends inside a WARC header" : st === "break" ? "record incomplete: the data after it is damaged" : "WARC header section longer than 1 MiB");
        if (st === "eof") return;
        if (st === "break") {
          cur.passBreak();
          afterBreak = true;
        } else await this.#resync(cur, gzip, startM);
        continue;
      }
      const fields = parseFields(head.subarray(0, he.end).toString("utf8"));
      if (!/^WARC\/\d+\.\d+$/.test(fields.firstLine)) {
        this.#error(probOffset, `not a WARC record (first line ${JSON.stringify(fields.firstLine.slice(0, 40))})`);
        await this.#resync(cur, gzip, startM);
        continue;
      }
      const clRaw = fieldGetter(fields.lower, fields.values).get("content-length");
      if (clRaw === null || !/^\d+$/.test(clRaw) || !Number.isSafeInteger(Number(clRaw))) {
        this.#error(probOffset, clRaw === null ? "WARC record without Content-Length" : `invalid Content-Length ${JSON.stringify(clRaw)}`);
        await this.#resync(cur, gzip, startM);
        continue;
      }
      const cl = Number(clRaw);
      const headerLength = he.end + he.sep;
      cur.advance(headerLength);
      if (gzip && startM.uend >= 0 && cur.u + cl > startM.uend && (await cur.nextMemberStartsWith(startM, WARC_SLASH))) {
        // A record may continue in the next member, but not when that one starts a record.
        this.#error(probOffset, `Content-Length ${cl} runs past the end of its gzip member`);
        await cur.dropMember(startM);
        continue;
      }
      if (!gzip && cur.u + cl > this.size) {
        this.#error(probOffset, `truncated: the file ends inside the record (Content-Length ${cl})`);
        await cur.scanToWarcLine();
        continue;
      }

      // 3. The block: a view when it lies in one segment, a copy when it is small, else only its start.
      let block: Buffer;
      let kept = true;
      f = cur.first();
      if (f.length >= cl && cl <= keep) {
        block = f.subarray(0, cl);
        cur.advance(cl);
      } else if (cl <= keep) {
        st = await cur.need(cl);
        if (st !== "ok") {
          this.#incomplete(probOffset, st);
          if (st === "eof") return;
          cur.passBreak();
          afterBreak = true;
          continue;
        }
        block = cur.view(cl);
        cur.advance(cl);
      } else {
        st = await cur.need(Math.min(prefixBytes, cl));
        if (st !== "ok") {
          this.#incomplete(probOffset, st);
          if (st === "eof") return;
          cur.passBreak();
          afterBreak = true;
          continue;
        }
        block = Buffer.from(cur.view(Math.min(prefixBytes, cl)));
        kept = false;
        st = await cur.skip(cl);
        if (st !== "ok") {
          this.#incomplete(probOffset, st);
          if (st === "eof") return;
          cur.passBreak();
          afterBreak = true;
          continue;
        }
      }

      // 4. The trailer: CRLF CRLF, or as much of it as there is.
      f = cur.first();
      if (f.length < 4) {
        st = await cur.need(4);
        f = cur.view(Math.min(4, cur.avail));
      }
      let k = 0;
      while (k < 4 && k < f.length && f[k] === CRLF2[k]) k++;
      if (k > 0) cur.advance(k);
      const endM = cur.last!;

      // 5. Where the last member ends (a streaming member learns it when the next data arrives).
      if (gzip && endM.uend < 0) await cur.need(1);
      const bm = cur.breakMember();
      if (bm && (bm === startM || bm === endM)) {
        // Its member turned out damaged (reported): drop the record.
        cur.passBreak();
        afterBreak = true;
        continue;
      }

      let offset: number;
      let length: number;
      let aligned = true;
      if (gzip) {
        offset = startM.cstart;
        length = (endM.cend >= 0 ? endM.cend : cur.src.position()) - offset;
        aligned = startM === endM && startU === startM.ustart && cur.u === endM.uend;
        if (!aligned && !unalignedWarned) {
          unalignedWarned = true;
          this.#warn(offset, "gzip members do not hold exactly one record each (first seen here): offsets point at the member holding a record's start");
        }
      } else {
        offset = startU;
        length = headerLength + cl;
      }
      if (k < 4) this.#warn(offset, "record not followed by CRLF CRLF");
      afterRecord = { offset };
      afterBreak = false;
      yield new WarcRecordImpl({
        file: this.path,
        gzip,
        offset,
        length,
        aligned,
        fields,
        contentLength: cl,
        headerLength,
        trailerOk: k === 4,
        block,
        blockKept: kept,
        reread: gzip ? { cstart: startM.cstart, skip: startU - startM.ustart + headerLength } : { cstart: 0, skip: startU + headerLength },
      });
    }
  }

  #incomplete(offset: number, st: Status): void {
    this.#error(offset, st === "eof" ? "truncated: the file ends inside the record" : "record incomplete: the data after it is damaged");
  }

  /**
   * Bytes right after a record that are not a record: when `WARC/1.` follows within JUNK_LIMIT
   * bytes, skip to it and say how many bytes were skipped; else null, nothing consumed.
   */
  async #skipJunk(cur: Cursor): Promise<number | null> {
    await cur.need(JUNK_LIMIT);
    const b = cur.view(Math.min(cur.avail, JUNK_LIMIT));
    const i = b.indexOf(WARC_1, 1);
    if (i < 0) return null;
    cur.advance(i);
    return i;
  }

  /** After a record start that does not parse: the next member (one record per member), else the next `WARC/1.`. */
  async #resync(cur: Cursor, gzip: boolean, m: Member): Promise<void> {
    if (gzip && cur.u === m.ustart) await cur.dropMember(m);
    else await cur.scanToWarcLine();
  }
}

/** Records of one WARC file, in file order. */
export function readWarcRecords(path: string, opts: ReadWarcOptions = {}): WarcReader {
  return new WarcReader(path, opts);
}

