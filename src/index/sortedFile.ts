/**
 * Range reads on a sorted index file (CDXJ lines in byte order) without scanning it: a binary
 * search over byte positions (each probe reads one block with a positional read and resyncs to
 * the next line start), then lines are streamed forward or backward from there in blocks. Nothing
 * is loaded whole; a probe costs one `pread` of BLOCK bytes (more only for a longer line).
 */
import { open, type FileHandle } from "node:fs/promises";

const BLOCK = 16 * 1024;
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
  /** Probes made (for tests: the search does not scan). */
  reads = 0;

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
  async #lineFrom(pos: number): Promise<{ start: number; line: string; next: number } | null> {
    let start = pos;
    if (pos > 0) {
      // Resync: the line start is just after the first LF at or after pos - 1.
      let at = pos - 1;
      for (;;) {
        if (at >= this.size) return null;
        const b = await this.#read(at, BLOCK);
        const i = b.indexOf(NL);
        if (i >= 0) {
          start = at + i + 1;
          break;
        }
        at += b.length;
      }
    }
    if (start >= this.size) return null;
    let buf = await this.#read(start, BLOCK);
    let i = buf.indexOf(NL);
    while (i < 0 && start + buf.length < this.size) {
      const more = await this.#read(start + buf.length, BLOCK);
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
      const l = await this.#lineFrom(pos);
      if (!l || l.start >= hi) return hi;
      if (cmp(l.line, target) >= 0) return l.start;
      pos = l.next;
    }
    return hi;
  }

  async *forward(from: string, to: string): AsyncGenerator<string> {
    let pos = await this.seek(from);
    let carry = "";
    while (pos < this.size) {
      const b = await this.#read(pos, SCAN_BLOCK);
      if (b.length === 0) break;
      pos += b.length;
      const text = carry + b.toString("latin1");
      const parts = text.split("\n");
      carry = parts.pop()!;
      for (const p of parts) {
        const line = Buffer.from(p, "latin1").toString("utf8");
        if (cmp(line, to) >= 0) return;
        yield line;
      }
    }
    if (carry !== "") {
      const line = Buffer.from(carry, "latin1").toString("utf8");
      if (cmp(line, to) < 0) yield line;
    }
  }

  async *backward(from: string, to: string): AsyncGenerator<string> {
    const lo = await this.seek(from);
    let end = await this.seek(to);
    // Lines in [lo, end), read back to front; `carry` is the head of a line cut by a block start.
    let carry = "";
    while (end > lo) {
      const start = Math.max(lo, end - SCAN_BLOCK);
      const b = await this.#read(start, end - start);
      end = start;
      const text = b.toString("latin1") + carry;
      const parts = text.split("\n");
      carry = start > lo ? parts.shift()! : "";
      for (let i = parts.length - 1; i >= 0; i--) {
        if (parts[i] === "" && i === parts.length - 1) continue; // the LF ending the range
        yield Buffer.from(parts[i]!, "latin1").toString("utf8");
      }
    }
    if (carry !== "") yield Buffer.from(carry, "latin1").toString("utf8");
  }
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
