/**
 * The compressed input of the gzip reader: a window over the file that moves forward, the next
 * read already running while the current one is inflated.
 */
import type { FileHandle } from "node:fs/promises";
import { READ, readFully } from "./readSource.js";

const MIB = 1024 * 1024;
/** Before a member is inflated, at least this much compressed input is buffered (or the rest of the file). */
export const MIN_AVAIL = 2 * MIB;
/** Room kept in front of a read-ahead buffer for the unconsumed end of the previous window. */
const TAIL = MIN_AVAIL;
const EMPTY = Buffer.alloc(0);

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
export class FileWindow {
  buf: Buffer = EMPTY;
  start = 0;
  #pf: Prefetch | null = null;
  /** The read-ahead buffer the window moved off, reused by the next read-ahead (no allocation per read). */
  #spare: Buffer | null = null;
  /** The whole buffer `buf` is a view of. */
  #whole: Buffer | null = null;
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
        this.#spare = this.#whole;
        this.#whole = pf.buf;
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
    this.#whole = null;
    this.start = pos;
    this.#prefetch();
    return this.buf;
  }

  #prefetch(): void {
    const at = this.end;
    if (at >= this.size) return;
    const want = TAIL + Math.min(READ, this.size - at);
    const spare = this.#spare;
    this.#spare = null;
    const buf = spare && spare.length >= want ? spare.subarray(0, want) : Buffer.allocUnsafe(want);
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
