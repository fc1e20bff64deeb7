/**
 * Sorting and merging index lines with memory independent of the index size (issue "CDXJ
 * index": `lathe index --merge`, and `--cdxj` over many large WARCs).
 *
 * Lines always carry their final LF, and are compared with it, as cdxj-indexer's SortingWriter
 * and `heapq.merge` compare them; identical consecutive lines are written once (§6).
 */
import { createReadStream, type ReadStream } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { compareLines, sortLines } from "./cdxj.js";

/** Raised when a file given to the merge is not sorted: the merge would silently be wrong. */
export class UnsortedInputError extends Error {
  constructor(
    readonly file: string,
    readonly line: number,
  ) {
    super(`${file} is not sorted: line ${line} sorts before the line above it`);
    this.name = "UnsortedInputError";
  }
}

export interface LineSource {
  /** For messages. */
  name: string;
  lines: AsyncIterator<string>;
}

/** The lines of a text file, each with its LF (added to a last line without one). */
export function fileLines(path: string, onBytes?: (n: number) => void): { source: LineSource; stream: ReadStream } {
  const stream = createReadStream(path, { highWaterMark: 1024 * 1024 });
  if (onBytes) stream.on("data", (c) => onBytes(c.length));
  const rl = createInterface({ input: stream, crlfDelay: Infinity });
  const it = rl[Symbol.asyncIterator]();
  const lines: AsyncIterator<string> = {
    async next() {
      const r = await it.next();
      return r.done ? r : { done: false, value: r.value + "\n" };
    },
    async return() {
      rl.close();
      stream.destroy();
      return { done: true, value: undefined };
    },
  };
  return { source: { name: path, lines }, stream };
}

interface HeapItem {
  line: string;
  src: number;
}

/** A binary min-heap on (line, source index). */
class LineHeap {
  readonly #a: HeapItem[] = [];
  get size(): number {
    return this.#a.length;
  }
  #less(x: HeapItem, y: HeapItem): boolean {
    const c = compareLines(x.line, y.line);
    return c < 0 || (c === 0 && x.src < y.src);
  }
  push(item: HeapItem): void {
    const a = this.#a;
    a.push(item);
    let i = a.length - 1;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (!this.#less(a[i]!, a[p]!)) break;
      [a[i], a[p]] = [a[p]!, a[i]!];
      i = p;
    }
  }
  pop(): HeapItem | undefined {
    const a = this.#a;
    const top = a[0];
    const last = a.pop();
    if (a.length > 0 && last) {
      a[0] = last;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        if (l < a.length && this.#less(a[l]!, a[m]!)) m = l;
        if (r < a.length && this.#less(a[r]!, a[m]!)) m = r;
        if (m === i) break;
        [a[i], a[m]] = [a[m]!, a[i]!];
        i = m;
      }
    }
    return top;
  }
}

/**
 * k-way merge of sorted sources into one sorted sequence, identical lines once. Holds one line
 * per source. A source that goes backwards raises UnsortedInputError.
 */
export async function* mergeSorted(sources: LineSource[]): AsyncGenerator<string> {
  const heap = new LineHeap();
  const lineNo = sources.map(() => 0);
  const prevOf: Array<string | null> = sources.map(() => null);
  const pull = async (i: number) => {
    const r = await sources[i]!.lines.next();
    if (r.done) return;
    lineNo[i]!++;
    const prev = prevOf[i];
    if (prev !== null && compareLines(r.value, prev) < 0) throw new UnsortedInputError(sources[i]!.name, lineNo[i]!);
    prevOf[i] = r.value;
    heap.push({ line: r.value, src: i });
  };
  try {
    for (let i = 0; i < sources.length; i++) await pull(i);
    let last: string | null = null;
    while (heap.size > 0) {
      const { line, src } = heap.pop()!;
      if (line !== last) yield line;
      last = line;
      await pull(src);
    }
  } finally {
    for (const s of sources) await s.lines.return?.();
  }
}

export interface ExternalSortOptions {
  /** Characters of lines held in memory before a sorted run goes to a temporary file (default 64 Mi). */
  memoryChars?: number;
  /** Where the temporary runs go (default the OS temp directory). */
  tmpDir?: string;
}

/**
 * Collects lines and gives them back sorted: in memory while they fit, else as sorted runs on
 * disk merged at the end (as cdxj-indexer's SortingWriter does with its 32 MB buffer).
 */
export class ExternalSorter {
  #buf: string[] = [];
  #chars = 0;
  #runs: string[] = [];
  #dir: string | null = null;
  readonly #limit: number;
  readonly #tmp: string;

  constructor(opts: ExternalSortOptions = {}) {
    this.#limit = opts.memoryChars ?? 64 * 1024 * 1024;
    this.#tmp = opts.tmpDir ?? tmpdir();
  }

  /** `line` must end in LF. */
  async add(line: string): Promise<void> {
    this.#buf.push(line);
    this.#chars += line.length;
    if (this.#chars >= this.#limit) await this.#spill();
  }

  get runs(): number {
    return this.#runs.length;
  }

  async #spill(): Promise<void> {
    this.#dir ??= await mkdtemp(join(this.#tmp, "lathe-sort-"));
    const path = join(this.#dir, `run-${this.#runs.length}.cdxj`);
    await writeFile(path, sortLines(this.#buf).join(""));
    this.#runs.push(path);
    this.#buf = [];
    this.#chars = 0;
  }

  /** The sorted, de-duplicated lines; temporary files are removed when the iteration ends. */
  async *sorted(): AsyncGenerator<string> {
    try {
      if (this.#runs.length === 0) {
        yield* sortLines(this.#buf);
        return;
      }
      if (this.#buf.length > 0) await this.#spill();
      yield* mergeSorted(this.#runs.map((p) => fileLines(p).source));
    } finally {
      this.#buf = [];
      if (this.#dir) await rm(this.#dir, { recursive: true, force: true });
      this.#dir = null;
    }
  }
}
