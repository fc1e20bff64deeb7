import { createReadStream, createWriteStream, type WriteStream } from "node:fs";
import { unlink } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import { Readable } from "node:stream";
import { DONE } from "../core/done.js";
import { ProxyError } from "../core/errors.js";
import type { StreamSource } from "../warc/types.js";

const TMP = tmpdir();

/**
 * What the temp file's write stream holds before `write` answers false and the exchange pauses
 * its source (the stream's highWaterMark). A file stream's default, 16 KiB, is less than one
 * socket read (64 KiB): a large body stopped after every read, and every chunk cost a write(2)
 * of its own. 1 MiB lets the queued chunks go out together (writev) and still bounds what one
 * capture holds in memory while its disk is behind.
 */
const FILE_QUEUE_BYTES = 1024 * 1024;

export interface SpoolOptions {
  /** Bytes kept in memory before the spool moves to a temp file. */
  memoryBytes: number;
  /** Directory for temp files; default the OS temp dir. */
  dir?: string | null;
  /**
   * When the temp file cannot take the bytes (its disk full, issue #26): keep what was kept and
   * drop the rest (`cut` says so) instead of failing finish(). For captures, whose client has
   * the response already: a truncated record beats none. Others (a pushed record whose digest
   * was computed over every byte) fail as before.
   */
  keepOnFailure?: boolean;
}

/**
 * Bytes kept for writing later: in memory up to a bound, then in a temp file, so memory stays
 * flat whatever the body size. `write` returns false when the file is behind (back-pressure:
 * the caller pauses its source until 'drain'); `finish()` resolves when everything is on disk.
 */
export class Spool implements StreamSource {
  #chunks: Buffer[] = [];
  #size = 0;
  #file: WriteStream | null = null;
  #path: string | null = null;
  #error: Error | null = null;
  #finished: Promise<void> | null = null;
  #drainWaiters: Array<() => void> = [];
  /** The chunks that were in memory when the spool moved to its file, until the file holds them. */
  #beforeFile: { chunks: Buffer[]; size: number } | null = null;
  /** Why bytes were dropped (keepOnFailure), with what was kept. */
  #cut: string | null = null;
  readonly #opts: SpoolOptions;

  constructor(opts: SpoolOptions) {
    this.#opts = opts;
  }

  get size(): number {
    return this.#size;
  }

  get onDisk(): boolean {
    return this.#path !== null;
  }

  /** The temp file, once the spool moved to one. */
  get filePath(): string | null {
    return this.#path;
  }

  /** Bytes the temp file holds so far (a prefix of what was written to the spool). */
  get bytesOnDisk(): number {
    return this.#file?.bytesWritten ?? 0;
  }

  write(chunk: Uint8Array): boolean {
    if (this.#finished) throw new ProxyError("ERR_SPOOL", "spool written after finish()");
    if (chunk.length === 0 || this.#cut) return true;
    const buf = Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
    this.#size += buf.length;
    if (!this.#file) {
      // Kept by reference: socket reads and the bytes Node writes are fresh buffers nobody
      // mutates afterwards, and a copy per chunk doubles the garbage under load.
      this.#chunks.push(buf);
      if (this.#size <= this.#opts.memoryBytes) return true;
      this.#openFile();
      const pending = this.#chunks;
      this.#chunks = [];
      if (this.#opts.keepOnFailure) this.#beforeFile = { chunks: pending, size: this.#size };
      let ok = true;
      pending.forEach((c, i) => {
        const last = i === pending.length - 1;
        ok = this.#file!.write(c, last ? (err) => !err && (this.#beforeFile = null) : undefined) && ok;
      });
      return ok;
    }
    return this.#file.write(buf);
  }

  /** True while the temp file is behind: the caller should pause its source. */
  get needsDrain(): boolean {
    return this.#file !== null && this.#file.writableNeedDrain;
  }

  /** Resolves once the spool can take more without growing memory. */
  drained(): Promise<void> {
    if (!this.#file || !this.#file.writableNeedDrain) return Promise.resolve();
    return new Promise((resolve) => this.#drainWaiters.push(resolve));
  }

  finish(): Promise<void> {
    if (this.#finished) return this.#finished;
    if (!this.#file || this.#cut) return (this.#finished = DONE);
    this.#finished = new Promise<void>((resolve, reject) => {
      const file = this.#file!;
      if (this.#opts.keepOnFailure) {
        // 'close' comes after 'error' (handled above: what was kept is kept) or after every byte is in the file.
        if (file.closed) return resolve();
        file.once("close", () => resolve());
        if (!file.destroyed) file.end();
        return;
      }
      if (this.#error) return reject(this.#error);
      file.end((err?: Error | null) => (err ? reject(wrap(err, this.#path!)) : resolve()));
    });
    return this.#finished;
  }

  /** Why the spool holds fewer bytes than it was given (keepOnFailure), or null. */
  get cut(): string | null {
    return this.#cut;
  }

  createReadStream(): Readable {
    if (this.#error && !this.#cut) throw wrap(this.#error, this.#path ?? "(memory)");
    // 256 KiB reads: large enough for few syscalls, small enough that glibc keeps serving them
    // from mmap (1 MiB reads raise its mmap threshold and then stay in the heap as RSS).
    if (this.#path && this.#size > 0) return createReadStream(this.#path, { highWaterMark: 256 * 1024, ...(this.#cut && { end: this.#size - 1 }) });
    if (this.#path) return Readable.from([], { objectMode: false });
    return Readable.from(this.#chunks, { objectMode: false });
  }

  /** The chunks, once finished and only while they are all in memory. */
  memory(): readonly Uint8Array[] | null {
    return this.#path || !this.#finished ? null : this.#chunks;
  }

  /** In-memory content (only when not on disk); for small bodies such as request heads. */
  bytes(): Buffer | null {
    return this.#path ? null : Buffer.concat(this.#chunks);
  }

  dispose(): Promise<void> {
    this.#chunks = [];
    // A spool that stayed in memory has nothing to wait for (most captures): no promise made.
    return this.#path ? this.#disposeFile() : DONE;
  }

  async #disposeFile(): Promise<void> {
    const p = this.#path!;
    this.#path = null;
    if (this.#file && !this.#file.closed) {
      await new Promise<void>((r) => {
        this.#file!.once("close", () => r());
        this.#file!.destroy();
      });
    }
    await unlink(p).catch(() => undefined);
  }

  #openFile(): void {
    const dir = this.#opts.dir ?? TMP;
    this.#path = join(dir, `lathe-spool-${process.pid}-${randomBytes(8).toString("hex")}`);
    this.#file = createWriteStream(this.#path, { flags: "wx", mode: 0o600, highWaterMark: FILE_QUEUE_BYTES });
    this.#file.on("error", (e) => {
      this.#error = e;
      if (this.#opts.keepOnFailure) this.#keepWhatWasKept(e);
      this.#wakeDrain();
    });
    this.#file.on("drain", () => this.#wakeDrain());
  }

  /**
   * The temp file failed: the spool holds what reached it (the write stream counts the bytes it
   * wrote, a prefix), or the chunks it had in memory before, when fewer bytes reached the file.
   * Later chunks are dropped.
   */
  #keepWhatWasKept(e: Error): void {
    if (this.#cut) return;
    const onDisk = this.#file!.bytesWritten;
    const before = this.#beforeFile;
    this.#beforeFile = null;
    const path = this.#path!;
    if (before && before.size > onDisk) {
      this.#chunks = before.chunks;
      this.#size = before.size;
      this.#path = null;
      void unlink(path).catch(() => undefined);
    } else {
      this.#size = onDisk;
    }
    this.#cut = `cannot spool to ${path}: ${e.message}; kept the first ${this.#size} bytes ${this.#path ? "on disk" : "in memory"}`;
  }

  #wakeDrain(): void {
    const w = this.#drainWaiters;
    this.#drainWaiters = [];
    for (const f of w) f();
  }

  get error(): Error | null {
    return this.#error;
  }
}

function wrap(e: Error, path: string): ProxyError {
  return new ProxyError("ERR_SPOOL", `cannot spool capture to ${path}: ${e.message}`, e);
}
