/**
 * WARC records from bytes already in memory, parsed by the file reader's own record scanner
 * (recordScanner.ts) — for a caller that reads a stretch of a file itself (the WACZ packager
 * reads only the records between those an index already lists) — and one record's header from
 * its first bytes (its block not read: `blockKept` false, `readBlock()` reads the file).
 */
import { Cursor } from "./cursor.js";
import { findHeadEnd, fieldGetter, MAX_HEAD, parseFields } from "./headerFields.js";
import { ProblemLog, type WarcReadProblem } from "./readProblems.js";
import type { Member, Seg, Source } from "./readSource.js";
import { RecordScanner } from "./recordScanner.js";
import { warcRecord, type WarcRecord } from "./warcRecord.js";

const MIB = 1024 * 1024;
const WARC_LINE = /^WARC\/\d+\.\d+$/;

/** Decompressed bytes as one plain "file". */
class BufferSource implements Source {
  #done = false;
  readonly #seg: Seg;
  constructor(data: Buffer) {
    const m: Member = { cstart: 0, cend: data.length, ustart: 0, uend: data.length };
    this.#seg = { kind: "data", data, m };
  }
  async next(): Promise<Seg | null> {
    if (this.#done) return null;
    this.#done = true;
    return this.#seg;
  }
  seek(): void {
    // Only large blocks are skipped by seeking; every byte here is in the one segment already.
  }
  position(): number {
    return this.#done ? this.#seg.data.length : 0;
  }
  async close(): Promise<void> {}
}

export interface BufferRecords {
  records: WarcRecord[];
  /** Damage: bytes that are not whole WARC records. Offsets are positions in `data`. */
  errors: WarcReadProblem[];
}

/**
 * Every record in `data` (uncompressed WARC bytes, records one after another). The records'
 * offsets are positions in `data`: they describe the bytes, not a file, so a record is only
 * looked at (its block is kept whole: `data` is in memory already).
 */
export async function recordsInBuffer(file: string, data: Buffer): Promise<BufferRecords> {
  const log = new ProblemLog(file, {});
  const scanner = new RecordScanner(new Cursor(new BufferSource(data)), { file, size: data.length, gzip: false, keepBlockBytes: Math.max(data.length, 1), prefixBytes: MIB }, log);
  const records: WarcRecord[] = [];
  for (;;) {
    const r = await scanner.next();
    if (r === null) break;
    records.push(warcRecord(r));
  }
  return { records, errors: log.errors };
}

/** Where a record lies in its file, as an index says. */
export interface RecordPlace {
  file: string;
  gzip: boolean;
  offset: number;
  length: number;
}

/**
 * The record at `place` from its first decompressed bytes `prefix`: its WARC header, and as much
 * of its block as `prefix` holds (enough for `httpHead()` when the HTTP head fits). Null when
 * `prefix` does not start with a whole WARC header.
 */
export function recordFromPrefix(place: RecordPlace, prefix: Buffer): WarcRecord | null {
  const he = findHeadEnd(prefix.subarray(0, MAX_HEAD));
  if (!he) return null;
  // As the scanner parses a header (recordScanner.ts).
  const fields = parseFields(prefix.toString("utf8", 0, he.end));
  if (!WARC_LINE.test(fields.firstLine)) return null;
  const clRaw = fieldGetter(fields.lower, fields.values).get("content-length");
  if (clRaw === null || !/^\d+$/.test(clRaw)) return null;
  const cl = Number(clRaw);
  const headerLength = he.end + he.sep;
  const block = prefix.subarray(headerLength, headerLength + cl);
  // Spelled out: eight properties after `...place` cost ~10 µs per record in Node 20's V8, which
  // builds such a literal through its runtime (README, Benchmark).
  return warcRecord({
    file: place.file,
    gzip: place.gzip,
    offset: place.offset,
    length: place.length,
    aligned: true,
    fields,
    contentLength: cl,
    headerLength,
    trailerOk: true,
    block,
    blockKept: block.length === cl,
    reread: place.gzip ? { cstart: place.offset, skip: headerLength } : { cstart: 0, skip: place.offset + headerLength },
  });
}
