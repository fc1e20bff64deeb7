/**
 * The decompressed data of a `.warc.gz`, member by member (warc-files.md §3). Each member is
 * inflated with one synchronous raw inflate over the buffered input (no per-byte work, no
 * per-member stream set-up), so member boundaries are exact: from where its gzip header starts
 * through its 8-byte trailer. CRC32 and ISIZE are checked. Members too large for memory
 * (compressed beyond the read window or inflating beyond `MAX_SYNC_OUT`) stream through a zlib
 * stream instead. The 'sl' extra field (§3.1) is honoured when it is consistent. Damage is
 * reported and becomes a break in the data; reading resumes at the next gzip magic.
 */
import type { FileHandle } from "node:fs/promises";
import { createInflateRaw, crc32, inflateRawSync, type InflateRaw } from "node:zlib";
import { errorMessage } from "../core/errors.js";
import { FileWindow, MIN_AVAIL } from "./fileWindow.js";
import { GZ_MAGIC, parseGzipHeader, type GzipHeader } from "./gzipHeader.js";
import type { Report } from "./readProblems.js";
import { READ, type Break, type Member, type Now, type Seg, type Source } from "./readSource.js";

const MIB = 1024 * 1024;
/** Largest member output inflated in one synchronous call; bigger members stream. */
const MAX_SYNC_OUT = 64 * MIB;
/** Compressed bytes per write in the streaming path. */
const STREAM_IN = 256 * 1024;
/** Output chunk of the synchronous inflate (Node allocates in chunks of this size and joins them). */
const SYNC_CHUNK = 32 * 1024;

type SkipLength = NonNullable<GzipHeader["sl"]>;

/** A member too large to inflate in one call, streaming through zlib. */
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

/** Resolve the streaming member's current wait, if there is one. */
function wake(st: Stream): void {
  const w = st.wake;
  st.wake = null;
  w?.();
}

export class GzipSource implements Source {
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

  /** The file ends inside the member at `offset` (reported): nothing is read after this break. */
  #truncated(offset: number, m: Member | null): Break {
    this.#pos = this.size;
    return { kind: "break", offset, m };
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
      let r = this.#member(pos, await this.#win.ensure(pos, MIN_AVAIL));
      if (r instanceof Promise) r = await r;
      if (r) return r;
    }
  }

  /** The member at `pos` (`buf`: the window from there); null when it has nothing to deliver yet (it is empty, or it streams). */
  #member(pos: number, buf: Buffer): Now<Seg | Break | null> {
    const h = parseGzipHeader(buf);
    if (h === "bad") {
      this.#damage(pos, `not a gzip member (bytes ${buf.subarray(0, 4).toString("hex")})`);
      return this.#resyncAfter(pos);
    }
    if (h === "short") {
      this.#damage(pos, "truncated: the file ends inside a gzip member header");
      return this.#truncated(pos, null);
    }
    let sl = h.sl;
    if (sl && (sl.clen < h.length + 8 || pos + sl.clen > this.size)) sl = null;
    if (sl && sl.ulen > MAX_SYNC_OUT) {
      this.#startStream(pos, h.length);
      return null;
    }
    const bounded = (b: Buffer) => (sl && sl.clen <= b.length ? b.subarray(h.length, sl.clen - 8) : b.subarray(h.length));
    if (sl && sl.clen > buf.length && sl.clen <= 4 * READ) return this.#win.ensure(pos, sl.clen).then((b) => this.#inflate(pos, h.length, sl, b, bounded(b), false));
    return this.#inflate(pos, h.length, sl, buf, bounded(buf), false);
  }

  /** One synchronous raw inflate of the member at `pos` from `input` (within `buf`, the window from `pos`). */
  #inflate(pos: number, headerLength: number, sl: SkipLength | null, buf: Buffer, input: Buffer, retried: boolean): Now<Seg | Break | null> {
    let r: { buffer: Buffer; engine: { bytesWritten: number } };
    try {
      r = inflateRawSync(input, { info: true, maxOutputLength: MAX_SYNC_OUT, chunkSize: sl ? Math.max(64, sl.ulen + 64) : SYNC_CHUNK }) as unknown as typeof r;
    } catch (e) {
      // The input was all the deflate data the 'sl' field announces: it did not run out early.
      const wholeBySl = sl !== null && input.length === sl.clen - headerLength - 8;
      const code = (e as { code?: string }).code;
      if (code === "Z_BUF_ERROR" && !wholeBySl && this.#win.end < this.size && !retried && this.#win.end - pos < READ) {
        // The member goes on past the window: once more with a full window from its start.
        return this.#win.ensure(pos, READ).then((b) => this.#inflate(pos, headerLength, sl, b, b.subarray(headerLength), true));
      }
      return this.#inflateFailed(pos, headerLength, e, wholeBySl);
    }
    const tpos = pos + headerLength + r.engine.bytesWritten;
    const t = buf.subarray(tpos - pos, tpos - pos + 8);
    if (t.length < 8) return this.#win.ensure(tpos, 8).then((b) => this.#checkTrailer(pos, tpos, r.buffer, b.subarray(0, 8)));
    return this.#checkTrailer(pos, tpos, r.buffer, t);
  }

  /** A member the synchronous inflate could not take: truncated, too large for one call (it streams), or damaged. */
  #inflateFailed(pos: number, headerLength: number, failure: unknown, wholeBySl: boolean): Now<Break | null> {
    const code = (failure as { code?: string }).code;
    if (code === "Z_BUF_ERROR") {
      // The input ended inside the deflate data.
      if (this.#win.end >= this.size && !wholeBySl) {
        this.#damage(pos, "truncated: the file ends inside a gzip member");
        return this.#truncated(pos, null);
      }
      // Larger than the window (or a wrong 'sl' length): stream it.
      this.#startStream(pos, headerLength);
      return null;
    }
    if (code === "ERR_BUFFER_TOO_LARGE") {
      this.#startStream(pos, headerLength);
      return null;
    }
    this.#damage(pos, `gzip data error: ${errorMessage(failure)}`);
    return this.#resyncAfter(pos);
  }

  /** CRC32 and ISIZE of member `pos`, inflated to `out`, against its trailer `t` at `tpos`; its data when they match (null when empty). */
  #checkTrailer(pos: number, tpos: number, out: Buffer, t: Buffer): Seg | Break | null {
    if (t.length < 8) {
      this.#damage(pos, "truncated: the file ends inside a gzip member trailer");
      return this.#truncated(pos, null);
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
    if (out.length === 0) return null;
    return { kind: "data", data: out, m };
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
    inf.on("readable", () => wake(st));
    inf.once("end", () => {
      st.ended = true;
      wake(st);
    });
    inf.once("error", (e) => {
      st.err = e;
      wake(st);
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
      if (st.ended || st.err) return this.#streamEnded(st);
      if (!st.writing && !(st.fed > 0 && st.inf.bytesWritten < st.fed)) {
        // Inflate has consumed all it was given and wants more.
        const cut = await this.#feed(st);
        if (cut) return cut;
        continue;
      }
      await new Promise<void>((resolve) => (st.wake = resolve));
    }
  }

  /** The next compressed input of the streaming member; a break when the file ends first. */
  async #feed(st: Stream): Promise<Break | null> {
    const at = st.dstart + st.fed;
    const chunk = (await this.#win.ensure(at, STREAM_IN)).subarray(0, STREAM_IN);
    if (chunk.length === 0) {
      this.#stream = null;
      st.inf.destroy();
      this.#damage(st.m.cstart, "truncated: the file ends inside a gzip member");
      return this.#truncated(st.m.cstart, st.m);
    }
    st.writing = true;
    st.fed += chunk.length;
    st.inf.write(chunk, () => {
      st.writing = false;
      wake(st);
    });
    return null;
  }

  /** The streaming member ended or failed: its trailer, and where it ends; null when it ended cleanly. */
  async #streamEnded(st: Stream): Promise<Break | null> {
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
      return this.#truncated(st.m.cstart, st.m);
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
