/**
 * A cursor over the decompressed data of a WARC file (readSource.ts): what the record parser
 * needs of it — at least n bytes ahead, a view of them, consume, skip (seeking in a plain file) —
 * and the ways to resync after damage: pass a break, drop the rest of a member, scan to the next
 * `WARC/1.`.
 */
import { MAX_HEAD } from "./headerFields.js";
import type { Break, Member, Seg, Source } from "./readSource.js";

/** What lies ahead: enough bytes, the end of the file, or a break (damage) before enough bytes. */
export type Status = "ok" | "eof" | "break";

/** The start of every record, as a resync looks for it. */
export const WARC_1 = Buffer.from("WARC/1.");
const EMPTY = Buffer.alloc(0);

export class Cursor {
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

  /** The next `n` bytes, or as many as there are before the end or a break. */
  async peek(n: number): Promise<Buffer> {
    await this.need(n);
    return this.view(Math.min(n, this.avail));
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
