/**
 * Sequential WARC reader (issue "Deduplication": `lathe index --dedup-db`; issue "CDXJ": the
 * indexer). Reads `.warc.gz` and `.warc` in large buffers and yields, for every record, its
 * offset and length on disk, its WARC header fields and the first bytes of its block (enough for
 * the HTTP head), so a caller can index a record without touching its payload.
 *
 * - `.warc.gz`: each gzip member is inflated with one synchronous raw inflate over the buffered
 *   input (no per-byte work, no per-member stream set-up), so member boundaries are exact: offset
 *   = where the member's gzip header starts, length = through its 8-byte trailer (warc-files.md
 *   §3). CRC32 and ISIZE are checked. Members too large for memory (compressed beyond the read
 *   window or inflating beyond `MAX_SYNC_OUT`) stream through a zlib stream instead, keeping only
 *   the first bytes of the block. The 'sl' extra field (§3.1) is honoured when it is consistent.
 * - Files whose members hold several records, or whose records span members, are read too; such
 *   records have `aligned: false` and offset = the member holding the record's first byte,
 *   length = through the member holding its last byte (a warning is reported once per file;
 *   inside a streamed member that has not ended yet, the length is the input consumed so far).
 *   No conformance file is like that; warcio refuses such files, `gzip whole.warc` makes one.
 * - `.warc`: offset = the record's `WARC/` line, length = header + Content-Length block, without
 *   the CRLF CRLF trailer. Large blocks are skipped by seeking.
 * - Damage (bad gzip data, CRC mismatch, truncation, a header or Content-Length that does not
 *   parse or runs past its member) is reported as `{file, offset, reason}` and reading continues
 *   with the next member (gzip) or the next `WARC/1.` (plain, and inside multi-record members).
 *   Recoverable oddities (a missing trailer, a few bytes after a record whose Content-Length was
 *   too small, records not one per member) are warnings.
 * - Records stay usable after the iteration moves on: a kept block is a view of the inflated
 *   member (or of the read buffer), `readBlock()` of a block that was not kept reads the file again.
 *
 * The pieces: readSource.ts (plain input, the segment and break shapes), fileWindow.ts and
 * gzipSource.ts (buffered input, gzip members), gzipHeader.ts, cursor.ts, recordScanner.ts (the
 * records), headerFields.ts and httpHead.ts (header parsing), warcRecord.ts (what is yielded),
 * readProblems.ts (damage reports).
 */
import { open, type FileHandle } from "node:fs/promises";
import { errorMessage } from "../core/errors.js";
import { Cursor } from "./cursor.js";
import { GzipSource } from "./gzipSource.js";
import { ProblemLog, WarcReadError, type WarcReadProblem } from "./readProblems.js";
import { PlainSource, type Source } from "./readSource.js";
import { RecordScanner } from "./recordScanner.js";
import { warcRecord, type WarcRecord } from "./warcRecord.js";

// What a reader yields, reports and throws, importable from the reader itself.
export { WarcReadError, type WarcReadProblem } from "./readProblems.js";
export { parseHttpHead, type HttpHead } from "./httpHead.js";
export type { WarcRecord } from "./warcRecord.js";

const MIB = 1024 * 1024;

export interface ReadWarcOptions {
  /** Damage: reading continues after it. Also collected in `reader.errors`. */
  onError?(p: WarcReadProblem): void;
  /** Oddities that lose nothing. Also collected in `reader.warnings`. */
  onWarning?(p: WarcReadProblem): void;
  /** Force the format; default: gzip when the file starts with `1f 8b`. */
  gzip?: boolean;
  /** Blocks up to this size are kept in memory (whole); larger ones only their first `prefixBytes`. Default 8 MiB. */
  keepBlockBytes?: number;
  /** Bytes of a large block kept for `httpHead()` / `blockPrefix`; default 256 KiB. */
  prefixBytes?: number;
}

/** `readWarcRecords(path)`: iterate with `for await`; `errors`/`warnings` fill up as it goes. */
export class WarcReader implements AsyncIterable<WarcRecord> {
  readonly path: string;
  readonly errors: WarcReadProblem[];
  readonly warnings: WarcReadProblem[];
  /** File size and format, known once iteration has started. */
  size = 0;
  gzip = false;
  readonly #opts: ReadWarcOptions;
  readonly #log: ProblemLog;
  #src: Source | null = null;
  #started = false;

  constructor(path: string, opts: ReadWarcOptions = {}) {
    this.path = path;
    this.#opts = opts;
    this.#log = new ProblemLog(path, opts);
    this.errors = this.#log.errors;
    this.warnings = this.#log.warnings;
  }

  /** Bytes of the file processed so far. */
  get position(): number {
    return this.#src ? Math.min(this.#src.position(), this.size) : 0;
  }

  [Symbol.asyncIterator](): AsyncGenerator<WarcRecord> {
    if (this.#started) throw new Error("a WarcReader can be iterated once");
    this.#started = true;
    return this.#run();
  }

  async *#run(): AsyncGenerator<WarcRecord> {
    let fh: FileHandle;
    try {
      fh = await open(this.path, "r");
    } catch (e) {
      throw new WarcReadError(this.path, 0, `cannot open: ${errorMessage(e)}`, e);
    }
    try {
      this.size = (await fh.stat()).size;
      this.gzip = this.#opts.gzip !== undefined ? this.#opts.gzip : await startsWithGzipMagic(fh, this.size);
      const src = this.gzip ? new GzipSource(fh, this.size, (o, r) => this.#log.error(o, r)) : new PlainSource(fh, this.size);
      this.#src = src;
      try {
        yield* this.#records(new Cursor(src));
      } finally {
        await src.close();
      }
    } catch (e) {
      if (e instanceof WarcReadError) throw e;
      throw new WarcReadError(this.path, this.position, `read failed: ${errorMessage(e)}`, e);
    } finally {
      await fh.close().catch(() => {});
    }
  }

  async *#records(cur: Cursor): AsyncGenerator<WarcRecord> {
    const scanner = new RecordScanner(
      cur,
      { file: this.path, size: this.size, gzip: this.gzip, keepBlockBytes: this.#opts.keepBlockBytes ?? 8 * MIB, prefixBytes: this.#opts.prefixBytes ?? 256 * 1024 },
      this.#log,
    );
    for (;;) {
      const r = await scanner.next();
      if (r === null) return;
      yield warcRecord(r);
    }
  }
}

/** Default format detection: a gzip file starts with `1f 8b`. */
async function startsWithGzipMagic(fh: FileHandle, size: number): Promise<boolean> {
  if (size < 2) return false;
  const b = Buffer.alloc(2);
  await fh.read(b, 0, 2, 0);
  return b[0] === 0x1f && b[1] === 0x8b;
}

/** Records of one WARC file, in file order. */
export function readWarcRecords(path: string, opts: ReadWarcOptions = {}): WarcReader {
  return new WarcReader(path, opts);
}
