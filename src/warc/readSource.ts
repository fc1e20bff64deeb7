/**
 * Where the WARC reader's bytes come from: decompressed data as segments tagged with the member
 * they came from, and breaks where a damaged member cut the data. `PlainSource` reads a `.warc`
 * (one "member": the file itself) in large reads, the next one read ahead; `GzipSource`
 * (gzipSource.ts) inflates the members of a `.warc.gz`.
 */
import type { FileHandle } from "node:fs/promises";

const MIB = 1024 * 1024;
/** Size of each file read. */
export const READ = 8 * MIB;

/** A gzip member (or, for a plain file, the whole file). -1 = not known yet (streaming). */
export interface Member {
  cstart: number;
  cend: number;
  /** Position of its first byte in the decompressed stream of the whole file. */
  ustart: number;
  uend: number;
}

/** Decompressed bytes of member `m`. */
export interface Seg {
  kind: "data";
  data: Buffer;
  m: Member;
}

/** A discontinuity: the member at `offset` is damaged (reported already); data after it is not contiguous. */
export interface Break {
  kind: "break";
  offset: number;
  /** The member whose data was (partly) delivered before its damage was found, if any. */
  m: Member | null;
}

/** The decompressed data of one file, in order; `next()` is null at the end. */
export interface Source {
  next(): Promise<Seg | Break | null>;
  /** Plain files only: continue reading at this file (= decompressed) position. */
  seek?(pos: number): void;
  /** Compressed bytes consumed so far (progress). */
  position(): number;
  close(): Promise<void>;
}

/**
 * A result given at once when the bytes it needs are at hand (the common case), else a promise
 * of it. Every `await` is a trip through the microtask queue; a record takes several steps and
 * the reader's speed (scripts/bench-reader.mjs) depends on not paying that trip per step.
 */
export type Now<T> = T | Promise<T>;

/** Read `len` bytes at `pos` into `buf` at `off` (fewer only at the end of the file). */
export async function readFully(fh: FileHandle, buf: Buffer, off: number, len: number, pos: number): Promise<number> {
  let have = 0;
  while (have < len) {
    const { bytesRead } = await fh.read(buf, off + have, len - have, pos + have);
    if (bytesRead === 0) break;
    have += bytesRead;
  }
  return have;
}

/** A `.warc`: the file is one member, read in READ-sized reads with the next one already running. */
export class PlainSource implements Source {
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
