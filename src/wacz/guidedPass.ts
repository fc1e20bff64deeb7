/**
 * The index pass without re-reading the WARCs (issue #23's benchmark): a collection's or a
 * session's files are lathe's own, each closed with its sorted CDXJ beside it (ownIndex.ts).
 * Their index is the merge of those, and the page list needs only the records the index does
 * not describe well enough: the bytes between indexed records (requests, warcinfo, metadata:
 * small) are inflated and parsed, and of the indexed records only the first bytes of those the
 * page rules look at (text/html, revisits, page declarations). A media payload is never inflated.
 *
 * The walk also checks that the index fits the file: indexed records start where a record starts
 * (a gzip member or `WARC/`), do not overlap, and what lies between them parses whole up to the
 * file's last byte. If anything does not fit — a file without its index, an index older than
 * its file, a truncated or damaged file — the answer is null and the caller reads every byte
 * (indexPass.ts), which then names the damage.
 *
 * It runs in the index pass's worker (indexThread.ts), so its many small reads are plain
 * synchronous ones: a read from the page cache costs ~10 µs that way, ~100 µs as a promise.
 */
import { closeSync, fstatSync, openSync, readSync } from "node:fs";
import { stat } from "node:fs/promises";
import { basename, join } from "node:path";
import { constants, gunzipSync } from "node:zlib";
import { fileLines, mergeSorted } from "../index/sortMerge.js";
import { recordFromPrefix, recordsInBuffer } from "../warc/bufferRecords.js";
import type { WarcRecord } from "../warc/reader.js";
import { holdsHttpHead } from "../warc/warcRecord.js";
import { CDX_GZ_NAME, writeCompressedIndex } from "./compressedIndex.js";
import type { IndexPassRequest, IndexPassResult, OnIndexProgress } from "./indexPass.js";
import { ownIndexPath, pageLookRule, readIndexedRecords, type IndexedRecords } from "./ownIndex.js";
import { PageCollector } from "./pages.js";

const KIB = 1024;
/** Compressed bytes first read for a record's header and HTTP head; more (×8 each time) when they do not fit. */
const HEAD_READ = 4 * KIB;
const HEAD_READ_MAX = 1024 * KIB;
/** Unindexed stretches larger than this (a huge request body) are left to the full pass. */
const GAP_MAX = 64 * KIB * KIB;

/** Why the walk gave up on a file (the full pass runs instead). */
class Misfit extends Error {}

export async function runGuidedPass(req: IndexPassRequest, onProgress?: OnIndexProgress): Promise<IndexPassResult | null> {
  const indexes: string[] = [];
  for (const p of req.paths) {
    const idx = await ownIndexPath(p);
    if (!idx) return null;
    indexes.push(idx);
  }
  const collector = new PageCollector(req.pages);
  const look = pageLookRule(req.pages);
  const sizes = await Promise.all(req.paths.map(async (p) => (await stat(p)).size));
  const total = sizes.reduce((a, b) => a + b, 0);
  let done = 0;
  for (const [i, path] of req.paths.entries()) {
    const records = await readIndexedRecords(indexes[i]!, basename(path), look);
    if (!records || !(await walkFile(path, records, collector))) return null;
    done += sizes[i]!;
    onProgress?.(done, total);
  }
  const cdxPath = join(req.work, CDX_GZ_NAME);
  const index = await writeCompressedIndex(mergeSorted(indexes.map((p) => fileLines(p).source)), cdxPath);
  const { pages, rule } = collector.result();
  return { index, cdxPath, pages, pageRule: rule, indexedFrom: "own-indexes" };
}

/** True when the index fits the file; the records the page rules need went to `collector`. */
async function walkFile(path: string, recs: IndexedRecords, collector: PageCollector): Promise<boolean> {
  const fd = openSync(path, "r");
  try {
    const size = fstatSync(fd).size;
    const file = { path, fd, gzip: path.endsWith(".gz") };
    let pos = 0;
    let found = recs.offsets.length;
    for (let i = 0; i < recs.offsets.length; i++) {
      const offset = recs.offsets[i]!;
      const length = recs.lengths[i]!;
      if (offset < pos || offset + length > size) return false;
      // Whole records up to `offset` (they parsed to their last byte) show a record may start there.
      const checked = offset > pos;
      if (checked) found += await gap(file, pos, offset, collector);
      const rec = recordAt(file, offset, length, recs.look[i]!, checked);
      if (rec) collector.inspect(rec);
      pos = offset + length;
    }
    if (pos < size) found += await gap(file, pos, size, collector);
    return found > 0;
  } catch (e) {
    if (e instanceof Misfit) return false;
    throw e;
  } finally {
    closeSync(fd);
  }
}

interface OpenWarc {
  path: string;
  fd: number;
  gzip: boolean;
}

function readAt(f: OpenWarc, at: number, n: number): Buffer {
  const b = Buffer.allocUnsafe(n);
  let got = 0;
  while (got < n) {
    const r = readSync(f.fd, b, got, n - got, at + got);
    if (r === 0) throw new Misfit(`short read at ${at}`);
    got += r;
  }
  return b;
}

/** The records in [from, to): whole ones only. Their count. */
async function gap(f: OpenWarc, from: number, to: number, collector: PageCollector): Promise<number> {
  if (to - from > GAP_MAX) throw new Misfit("a large stretch is not indexed");
  let data = readAt(f, from, to - from);
  if (f.gzip) {
    try {
      data = gunzipSync(data);
    } catch {
      throw new Misfit(`not whole gzip members at ${from}`);
    }
  } else if (data.every((c) => c === 13 || c === 10)) {
    return 0; // a plain record's CRLF CRLF trailer
  }
  const { records, errors } = await recordsInBuffer(f.path, data);
  if (errors.length > 0) throw new Misfit(errors[0]!.reason);
  for (const r of records) collector.inspect(r);
  return records.length;
}

/**
 * The indexed record at `offset`, read when the page rules look at it; else, unless the stretch
 * before it parsed whole to this very byte (`checked`), its first bytes are checked to start a record.
 */
function recordAt(f: OpenWarc, offset: number, length: number, look: boolean, checked: boolean): WarcRecord | null {
  if (!look) {
    if (checked) return null;
    const b = readAt(f, offset, f.gzip ? 3 : 5);
    const ok = f.gzip ? b[0] === 0x1f && b[1] === 0x8b && b[2] === 8 : b.toString("latin1") === "WARC/";
    if (!ok) throw new Misfit(`no record at ${offset}`);
    return null;
  }
  for (let n = HEAD_READ; ; n *= 8) {
    const whole = n >= length;
    const rec = recordFromPrefix({ file: f.path, gzip: f.gzip, offset, length }, prefixAt(f, offset, Math.min(n, length), whole));
    // Read further while the header, or the HTTP head a page rule reads, runs past the prefix.
    if (rec && (whole || rec.blockKept || rec.contentLength === 0 || rec.httpHead() !== null || !holdsHttpHead(rec.warcType, rec.get("content-type")))) return rec;
    if (whole || n >= HEAD_READ_MAX) throw new Misfit(`no WARC record at ${offset}`);
  }
}

/** The record's first bytes, inflated from the first `n` bytes on disk (`whole`: all of them, a member checked whole). */
function prefixAt(f: OpenWarc, offset: number, n: number, whole: boolean): Buffer {
  const raw = readAt(f, offset, n);
  if (!f.gzip) return raw;
  try {
    return gunzipSync(raw, whole ? {} : { finishFlush: constants.Z_SYNC_FLUSH });
  } catch {
    throw new Misfit(`no gzip member at ${offset}`);
  }
}
