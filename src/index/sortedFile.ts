/**
 * Range reads on a sorted index file (CDXJ lines in byte order) without scanning it: a binary
 * search over byte positions (each probe reads one block with a positional read and resyncs to
 * the next line start), then lines are streamed forward or backward from there in blocks. Nothing
 * is loaded whole; a probe costs one `pread` of BLOCK bytes (more only for a longer line).
 */
import { open, type FileHandle } from "node:fs/promises";

const BLOCK = 4 * 1024;
/** Probe results kept per file (~300 bytes each). */
const PROBE_CACHE = 16 * 1024;
const SCAN_BLOCK = 64 * 1024;
const NL = 0x0a;

/** A sorted source of lines (without their LF): files on disk, or lines in memory. */
export interface LineSource {
  /** Lines `l` with `from <= l < to`, ascending. */
  forward(from: string, to: string): AsyncIterable<string>;
  /** Lines `l` with `from <= l < to`, descending. */
  backward(from: string, to: string): AsyncIterable<string>;
  close(): Promise<void>;
}

/** Compare the bytes of `line` with a string bound, as the file is sorted (byte order). */
const cmp = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

export class SortedFile implements LineSource {
  readonly #fh: FileHandle;
  readonly size: number;
  /** Reads made (for tests: the search does not scan). */
  reads = 0;
  readonly #probes = new Map<number, Probe | null>();

  private constructor(fh: FileHandle, size: number) {
    this.#fh = fh;
    this.size = size;
  }

  static async open(path: string): Promise<SortedFile> {
    const fh = await open(path, "r");
    try {
      const st = await fh.stat();
      return new SortedFile(fh, st.size);
    } catch (e) {
      await fh.close();
      throw e;
    }
  }

  close(): Promise<void> {
    return this.#fh.close();
  }

  async #read(pos: number, len: number): Promise<Buffer> {
    const n = Math.max(0, Math.min(len, this.size - pos));
    const buf = Buffer.allocUnsafe(n);
    let got = 0;
    while (got < n) {
      const { bytesRead } = await this.#fh.read(buf, got, n - got, pos + got);
      this.reads++;
      if (bytesRead === 0) break;
      got += bytesRead;
    }
    return got === n ? buf : buf.subarray(0, got);
  }

  /** The first line starting at or after `pos`: its start and text; null at the end. */
  async #lineFrom(pos: number): Promise<Probe | null> {
    const cached = this.#probes.get(pos);
    if (cached !== undefined) return cached;
    const r = await this.#lineFromUncached(pos);
    // The upper levels of every binary search probe the same positions: keep them (the file
    // never changes), a sparse index built as queries come.
    if (this.#probes.size < PROBE_CACHE) this.#probes.set(pos, r);
    return r;
  }

  async #lineFromUncached(pos: number): Promise<Probe | null> {
    // One read from pos - 1 usually holds the LF ending the previous line and the whole line after it.
    let at = pos > 0 ? pos - 1 : 0;
    let buf = await this.#read(at, BLOCK);
    let start = pos;
    if (pos > 0) {
      let i = buf.indexOf(NL);
      while (i < 0) {
        at += buf.length;
        if (at >= this.size) return null;
        buf = await this.#read(at, BLOCK);
        i = buf.indexOf(NL);
      }
      start = at + i + 1;
      buf = buf.subarray(i + 1);
    }
    if (start >= this.size) return null;
    let i = buf.indexOf(NL);
    while (i < 0 && start + buf.length < this.size) {
      const more = await this.#read(start + buf.length, BLOCK);
      if (more.length === 0) break;
      const j = more.indexOf(NL);
      buf = Buffer.concat([buf, more]);
      if (j >= 0) i = buf.length - more.length + j;
    }
    const end = i < 0 ? buf.length : i;
    return { start, line: buf.toString("utf8", 0, end), next: start + end + 1 };
  }

  /** Byte position of the first line `>= target` (the file size when there is none). */
  async seek(target: string): Promise<number> {
    let lo = 0;
    let hi = this.size;
    // Lines starting before lo are < target; lines starting at or after hi are >= target.
    while (hi - lo > BLOCK) {
      const mid = lo + Math.floor((hi - lo) / 2);
      const l = await this.#lineFrom(mid);
      if (!l || l.start >= hi) {
        hi = mid;
        continue;
      }
      if (cmp(l.line, target) < 0) lo = l.next;
      else hi = l.start;
    }
    // The last stretch in one read; a line running past it is read on its own.
    const buf = await this.#read(lo, hi - lo + BLOCK);
    let pos = lo;
    while (pos < hi) {
      const i = buf.indexOf(NL, pos - lo);
      if (i >= 0) {
        if (cmp(buf.toString("utf8", pos - lo, i), target) >= 0) return pos;
        pos = lo + i + 1;
        continue;
      }
      const l = await this.#lineFromUncached(pos);
      if (!l || l.start >= hi) return hi;
      if (cmp(l.line, target) >= 0) return l.start;
      pos = l.next;
    }
    return hi;
  }

  /** Lines from byte `pos` (a line start) to `end`, in reads that grow from BLOCK to SCAN_BLOCK. */
  async *#linesFrom(pos: number, end: number): AsyncGenerator<string> {
    let size = BLOCK;
    let rest: Buffer | null = null;
    while (pos < end) {
      const b = await this.#read(pos, Math.min(size, end - pos));
      if (b.length === 0) break;
      pos += b.length;
      size = Math.min(size * 2, SCAN_BLOCK);
      const buf: Buffer = rest ? Buffer.concat([rest, b]) : b;
      let from = 0;
      for (let i = buf.indexOf(NL); i >= 0; i = buf.indexOf(NL, from)) {
        yield buf.toString("utf8", from, i);
        from = i + 1;
      }
      rest = from < buf.length ? buf.subarray(from) : null;
    }
    if (rest) yield rest.toString("utf8");
  }

  async *forward(from: string, to: string): AsyncGenerator<string> {
    for await (const line of this.#linesFrom(await this.seek(from), this.size)) {
      if (cmp(line, to) >= 0) return;
      yield line;
    }
  }

  async *backward(from: string, to: string): AsyncGenerator<string> {
    const lo = await this.seek(from);
    let end = await this.seek(to);
    // Lines in [lo, end), read back to front in growing blocks; `head` is the part of a line
    // cut by a block start (its beginning is in the bytes before).
    let size = BLOCK;
    let head: Buffer | null = null;
    while (end > lo) {
      const start = Math.max(lo, end - size);
      size = Math.min(size * 2, SCAN_BLOCK);
      const b = await this.#read(start, end - start);
      end = start;
      const buf: Buffer = head ? Buffer.concat([b, head]) : b;
      // Lines end at each LF; the bytes after the last LF of buf belong to a line only when
      // `head` was given (the range itself ends just after an LF, or at the end of the file).
      let stop = buf.length;
      if (buf[stop - 1] === NL) stop--;
      // stop > 0 first: Buffer's lastIndexOf takes a negative offset from the end, so at a block
      // that starts with an LF it went round to the end again (lines twice, or without end).
      for (let i = stop > 0 ? buf.lastIndexOf(NL, stop - 1) : -1; i >= 0; i = stop > 0 ? buf.lastIndexOf(NL, stop - 1) : -1) {
        yield buf.toString("utf8", i + 1, stop);
        stop = i;
      }
      if (start > lo) head = buf.subarray(0, stop);
      else {
        head = null;
        if (stop > 0) yield buf.toString("utf8", 0, stop);
      }
    }
  }
}

interface Probe {
  start: number;
  line: string;
  next: number;
}

/** Sorted lines in memory (an open WARC file's index). */
export class MemoryLines implements LineSource {
  readonly #lines: readonly string[];
  constructor(sortedLines: readonly string[]) {
    this.#lines = sortedLines;
  }

  #lowerBound(target: string): number {
    let lo = 0;
    let hi = this.#lines.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (cmp(this.#lines[mid]!, target) < 0) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  async *forward(from: string, to: string): AsyncGenerator<string> {
    const end = this.#lowerBound(to);
    for (let i = this.#lowerBound(from); i < end; i++) yield this.#lines[i]!;
  }

  async *backward(from: string, to: string): AsyncGenerator<string> {
    const start = this.#lowerBound(from);
    for (let i = this.#lowerBound(to) - 1; i >= start; i--) yield this.#lines[i]!;
  }

  async close(): Promise<void> {}
}
