import { Transform, type TransformCallback } from "node:stream";

/**
 * Incremental decoder of the `chunked` transfer coding (RFC 9112 §7.1): yields chunk-data only,
 * collects trailer fields, and reports framing errors with the byte offset where they occur.
 * Pure: no I/O. Used both while capturing (digests) and when writing (the stored body).
 */
type State = "size" | "ext" | "sizeLf" | "data" | "dataCr" | "dataLf" | "trailer" | "done" | "error";

const MAX_SIZE_DIGITS = 16;

export class Dechunker {
  #state: State = "size";
  #size = 0;
  #digits = 0;
  #remaining = 0;
  #line: number[] = [];
  #offset = 0;
  readonly trailers: Array<[string, string]> = [];
  error: { offset: number; reason: string } | null = null;

  get done(): boolean {
    return this.#state === "done";
  }

  get failed(): boolean {
    return this.#state === "error";
  }

  /** Feed wire bytes; `emit` receives entity slices. Returns how many input bytes belonged to the message. */
  feed(buf: Uint8Array, emit: (data: Uint8Array) => void): number {
    let i = 0;
    while (i < buf.length) {
      const s = this.#state;
      if (s === "done" || s === "error") break;
      if (s === "data") {
        const n = Math.min(this.#remaining, buf.length - i);
        emit(buf.subarray(i, i + n));
        i += n;
        this.#offset += n;
        this.#remaining -= n;
        if (this.#remaining === 0) this.#state = "dataCr";
        continue;
      }
      const b = buf[i]!;
      i++;
      this.#offset++;
      switch (s) {
        case "size": {
          const v = hexValue(b);
          if (v >= 0) {
            if (++this.#digits > MAX_SIZE_DIGITS) return this.#fail(i, "chunk size too long");
            this.#size = this.#size * 16 + v;
          } else if (this.#digits === 0) {
            return this.#fail(i, "chunk size line does not start with a hex digit");
          } else if (b === 0x3b || b === 0x20 || b === 0x09) {
            this.#state = "ext";
          } else if (b === 0x0d) {
            this.#state = "sizeLf";
          } else if (b === 0x0a) {
            this.#endSizeLine();
          } else {
            return this.#fail(i, "invalid character in chunk size line");
          }
          break;
        }
        case "ext":
          if (b === 0x0d) this.#state = "sizeLf";
          else if (b === 0x0a) this.#endSizeLine();
          break;
        case "sizeLf":
          if (b !== 0x0a) return this.#fail(i, "chunk size line not ended by CRLF");
          this.#endSizeLine();
          break;
        case "dataCr":
          if (b === 0x0d) this.#state = "dataLf";
          else if (b === 0x0a) this.#state = "size";
          else return this.#fail(i, "chunk data not followed by CRLF");
          break;
        case "dataLf":
          if (b !== 0x0a) return this.#fail(i, "chunk data not followed by CRLF");
          this.#state = "size";
          break;
        case "trailer":
          if (b === 0x0a) {
            const line = Buffer.from(this.#line).toString("latin1").replace(/\r$/, "");
            this.#line = [];
            if (line === "") {
              this.#state = "done";
              return i;
            }
            const colon = line.indexOf(":");
            if (colon <= 0) return this.#fail(i, "malformed trailer field");
            this.trailers.push([line.slice(0, colon), line.slice(colon + 1).trim()]);
          } else {
            if (this.#line.length > 65536) return this.#fail(i, "trailer section too large");
            this.#line.push(b);
          }
          break;
      }
    }
    return i;
  }

  #endSizeLine(): void {
    if (this.#size === 0) {
      this.#state = "trailer";
    } else {
      this.#remaining = this.#size;
      this.#state = "data";
    }
    this.#size = 0;
    this.#digits = 0;
  }

  #fail(consumed: number, reason: string): number {
    this.#state = "error";
    this.error = { offset: this.#offset - 1, reason };
    return consumed;
  }
}

function hexValue(b: number): number {
  if (b >= 0x30 && b <= 0x39) return b - 0x30;
  if (b >= 0x61 && b <= 0x66) return b - 0x57;
  if (b >= 0x41 && b <= 0x46) return b - 0x37;
  return -1;
}

/** A stream form of Dechunker: wire bytes in, entity bytes out; stops at the last chunk. */
export class DechunkStream extends Transform {
  readonly #d = new Dechunker();
  override _transform(chunk: Buffer, _enc: BufferEncoding, cb: TransformCallback): void {
    this.#d.feed(chunk, (data) => this.push(Buffer.from(data)));
    cb();
  }
}
