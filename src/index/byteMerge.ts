/**
 * The k-way merge of sorted index files done on bytes: `lathe index --merge` and the CDX
 * service's merges of closed files' indexes into runs.
 *
 * Why bytes and not the line strings of `mergeSorted`: that merge made a string per line and
 * joined them into 1 MB batches. Merging a 145 MB run on the proxy's thread grew V8's old space
 * by ~70 MB and the process by ~150 MB for the 2–3 s of the merge, the bursts that failed the
 * soak's RSS bar (issue #7). Here the memory is one buffer per input and two output buffers,
 * whatever the size of the files, and no object is made per line.
 *
 * Same results as `mergeSorted` over `fileLines`:
 * - order is that of the lines' UTF-8 bytes, LF included (`compareLines`; Python compares `str`
 *   by code point, which is the same order), ties by input order;
 * - identical lines are written once;
 * - LF, CRLF and a lone CR each end a line (readline and Python's universal newlines); every
 *   line is written with LF, a last line without an end gets one;
 * - an input that goes backwards raises UnsortedInputError with its line number.
 */
import { open, type FileHandle } from "node:fs/promises";
import { UnsortedInputError } from "./sortMerge.js";

const LF = 0x0a;
const CR = 0x0d;

/** Receives the merged bytes; `chunk` is the sink's until the promise settles, then reused. */
export type ChunkSink = (chunk: Buffer) => Promise<void>;

export interface ByteMergeProgress {
  bytesDone: number;
  bytesTotal: number;
  files: number;
  lines: number;
}

export interface ByteMergeOptions {
  onProgress?(p: ByteMergeProgress): void;
  /** Size of each input buffer and of the two output buffers (default 1 MiB); a longer line grows its input's buffer. */
  bufferBytes?: number;
}

/** Reads one file a line at a time; the current line is `buf[start, end)`, LF included. */
class LineCursor {
  buf: Buffer;
  start = 0;
  end = 0;
  /** Lines read so far (for messages). */
  line = 0;
  #data: Buffer;
  #fill = 0;
  #next = 0;
  /** Where the next CR is (-1: none in the data read), or null: not searched since the last read. */
  #cr: number | null = null;
  #pos = 0;
  #eof = false;

  constructor(
    readonly name: string,
    readonly fh: FileHandle,
    size: number,
    readonly onBytes: (n: number) => void,
  ) {
    this.buf = Buffer.allocUnsafe(size);
    this.#data = this.buf.subarray(0, 0);
  }

  /** Moves to the next line; false at the end of the file. Checks it does not sort before the line it follows. */
  async advance(): Promise<boolean> {
    for (;;) {
      const at = this.#next;
      const lf = this.#data.indexOf(LF, at);
      // The next CR is searched for once per read, not once per line (-1: none in the data read).
      if (this.#cr === null || (this.#cr >= 0 && this.#cr < at)) this.#cr = this.#data.indexOf(CR, at);
      const cr = this.#cr;
      let end: number;
      if (cr >= 0 && (lf === -1 || cr < lf)) {
        if (cr + 1 === this.#fill && !this.#eof) {
          await this.#read(); // LF next would make it CRLF
          continue;
        }
        // CRLF or a lone CR: the line gets an LF where the CR was.
        this.buf[cr] = LF;
        end = cr + 1;
        this.#next = cr + 1 < this.#fill && this.buf[cr + 1] === LF ? cr + 2 : cr + 1;
      } else if (lf >= 0) {
        end = lf + 1;
        this.#next = end;
      } else if (!this.#eof) {
        await this.#read();
        continue;
      } else if (at < this.#fill) {
        // A last line without an end.
        if (this.#fill === this.buf.length) this.#grow();
        this.buf[this.#fill++] = LF;
        this.#data = this.buf.subarray(0, this.#fill);
        continue;
      } else {
        return false;
      }
      this.line++;
      if (this.line > 1 && this.buf.compare(this.buf, this.start, this.end, at, end) < 0) throw new UnsortedInputError(this.name, this.line);
      this.start = at;
      this.end = end;
      return true;
    }
  }

  /** More of the file after what is held; keeps the current line (the next one is compared with it). */
  async #read(): Promise<void> {
    const keep = this.start;
    if (keep > 0) {
      this.buf.copyWithin(0, keep, this.#fill);
      this.#fill -= keep;
      this.start -= keep;
      this.end -= keep;
      this.#next -= keep;
    }
    if (this.#fill === this.buf.length) this.#grow();
    const { bytesRead } = await this.fh.read(this.buf, this.#fill, this.buf.length - this.#fill, this.#pos);
    if (bytesRead === 0) this.#eof = true;
    this.#pos += bytesRead;
    this.#fill += bytesRead;
    this.#data = this.buf.subarray(0, this.#fill);
    this.#cr = null;
    this.onBytes(bytesRead);
  }

  #grow(): void {
    const bigger = Buffer.allocUnsafe(this.buf.length * 2);
    this.buf.copy(bigger, 0, 0, this.#fill);
    this.buf = bigger;
    this.#data = bigger.subarray(0, this.#fill);
  }
}

/** Collects lines into one buffer while the other is being written. */
class ChunkWriter {
  #bufs: [Buffer, Buffer];
  #cur = 0;
  #len = 0;
  #pending: Promise<void> | null = null;
  #last: Buffer;
  #lastLen = -1;
  lines = 0;

  constructor(
    readonly sink: ChunkSink,
    size: number,
  ) {
    this.#bufs = [Buffer.allocUnsafe(size), Buffer.allocUnsafe(size)];
    this.#last = Buffer.allocUnsafe(1024);
  }

  /** Writes `src[start, end)` unless it is the line written last. */
  async put(src: Buffer, start: number, end: number): Promise<void> {
    const n = end - start;
    if (n === this.#lastLen && src.compare(this.#last, 0, n, start, end) === 0) return;
    if (n > this.#last.length) this.#last = Buffer.allocUnsafe(Math.max(n, this.#last.length * 2));
    src.copy(this.#last, 0, start, end);
    this.#lastLen = n;
    this.lines++;
    const out = this.#bufs[this.#cur]!;
    if (this.#len + n > out.length) await this.flush();
    if (n > out.length) {
      // Longer than a buffer: given as it is, and waited for (src is reused after).
      await this.#settle();
      await this.sink(src.subarray(start, end));
      return;
    }
    src.copy(this.#bufs[this.#cur]!, this.#len, start, end);
    this.#len += n;
  }

  /** Hands the current buffer to the sink, after the previous one has been written. */
  async flush(): Promise<void> {
    await this.#settle();
    if (this.#len === 0) return;
    const write = this.sink(this.#bufs[this.#cur]!.subarray(0, this.#len));
    write.catch(() => {}); // seen when settled
    this.#pending = write;
    this.#cur ^= 1;
    this.#len = 0;
  }

  async #settle(): Promise<void> {
    const p = this.#pending;
    this.#pending = null;
    if (p) await p;
  }

  /** Everything handed over and written. */
  async finish(): Promise<void> {
    await this.flush();
    await this.#settle();
  }

  /** Waits for a write in flight without throwing (clean-up after a failure). */
  async drain(): Promise<void> {
    await this.#settle().catch(() => {});
  }
}

/**
 * Merges the sorted files at `paths` into `sink`; returns the number of lines written.
 * Rejects with UnsortedInputError if an input is not sorted, or with the file's error.
 */
export async function mergeIndexFiles(paths: string[], sink: ChunkSink, opts: ByteMergeOptions = {}): Promise<number> {
  const size = opts.bufferBytes ?? 1024 * 1024;
  const p: ByteMergeProgress = { bytesDone: 0, bytesTotal: 0, files: paths.length, lines: 0 };
  const cursors: LineCursor[] = [];
  const out = new ChunkWriter(sink, size);
  try {
    for (const path of paths) {
      const fh = await open(path, "r");
      cursors.push(new LineCursor(path, fh, size, (n) => (p.bytesDone += n)));
      p.bytesTotal += (await fh.stat()).size;
    }
    const heap = new CursorHeap(cursors);
    let taken = 0;
    for (let i = 0; i < cursors.length; i++) if (await cursors[i]!.advance()) heap.push(i);
    while (heap.size > 0) {
      const i = heap.top;
      const c = cursors[i]!;
      await out.put(c.buf, c.start, c.end);
      if ((++taken & 1023) === 0) {
        p.lines = out.lines;
        opts.onProgress?.(p);
      }
      if (await c.advance()) heap.replaceTop(i);
      else heap.pop();
    }
    await out.finish();
  } finally {
    await out.drain();
    await Promise.all(cursors.map((c) => c.fh.close().catch(() => {})));
  }
  p.lines = out.lines;
  p.bytesDone = p.bytesTotal;
  opts.onProgress?.(p);
  return out.lines;
}

/** A binary min-heap of cursor indexes on (current line, index). */
class CursorHeap {
  readonly #a: Int32Array;
  size = 0;

  constructor(readonly cursors: LineCursor[]) {
    this.#a = new Int32Array(Math.max(1, cursors.length));
  }

  get top(): number {
    return this.#a[0]!;
  }

  #less(i: number, j: number): boolean {
    const a = this.cursors[i]!;
    const b = this.cursors[j]!;
    const c = a.buf.compare(b.buf, b.start, b.end, a.start, a.end);
    return c < 0 || (c === 0 && i < j);
  }

  push(i: number): void {
    const a = this.#a;
    let k = this.size++;
    while (k > 0) {
      const parent = (k - 1) >> 1;
      if (!this.#less(i, a[parent]!)) break;
      a[k] = a[parent]!;
      k = parent;
    }
    a[k] = i;
  }

  pop(): void {
    const last = this.#a[--this.size]!;
    if (this.size > 0) this.#siftDown(last);
  }

  /** The top's line changed: put it back in its place. */
  replaceTop(i: number): void {
    this.#siftDown(i);
  }

  #siftDown(i: number): void {
    const a = this.#a;
    let k = 0;
    for (;;) {
      const l = 2 * k + 1;
      if (l >= this.size) break;
      const r = l + 1;
      const m = r < this.size && this.#less(a[r]!, a[l]!) ? r : l;
      if (!this.#less(a[m]!, i)) break;
      a[k] = a[m]!;
      k = m;
    }
    a[k] = i;
  }
}
