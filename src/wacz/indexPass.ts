/**
 * The one pass over a WACZ's WARC files (issue #23) — unless they are lathe's own with their
 * index beside them, and that index fits (guidedPass.ts): lathe's own CDXJ indexer — the one
 * `lathe index --cdxj` runs — gives the sorted index, written in compressed blocks to the work
 * directory, and, from the same records, the page list. Damage anywhere (not a WARC, a truncated
 * or corrupt member, a file without a record) fails the pass with every problem named.
 * Runs in a worker thread (indexWorker.ts) or, where there is none, in the caller's.
 */
import { join } from "node:path";
import { buildIndex } from "../index/build.js";
import { runGuidedPass } from "./guidedPass.js";
import type { WarcReadProblem, WarcRecord } from "../warc/reader.js";
import { CDX_GZ_NAME, writeCompressedIndex, type CompressedIndex } from "./compressedIndex.js";
import { PageCollector, type Page, type PageRule, type PageSource } from "./pages.js";
import { WaczError } from "./waczError.js";

export interface IndexPassRequest {
  /** The WARC files (absolute paths; the CDXJ `filename` is each one's base name). */
  paths: string[];
  pages: PageSource;
  /** Where index.cdx.gz and the sort's runs go. */
  work: string;
  /** lathe's own files with their indexes beside them: tried first (guidedPass.ts). */
  ownIndexes?: boolean;
}

export interface IndexPassResult {
  index: CompressedIndex;
  /** Path of index.cdx.gz. */
  cdxPath: string;
  pages: Page[];
  pageRule: PageRule;
  indexedFrom: IndexSource;
}

/** lathe's own indexes beside the files (guidedPass.ts), or every record read (here). */
export type IndexSource = "own-indexes" | "records";

export type OnIndexProgress = (bytesDone: number, bytesTotal: number) => void;

/** Sorted-run memory: about 4 M characters of lines before a run goes to disk. */
const SORT_MEMORY_CHARS = 4 * 1024 * 1024;
/** Damage reports named in the error (the rest are counted). */
const LISTED_PROBLEMS = 5;

export async function runIndexPass(req: IndexPassRequest, onProgress?: OnIndexProgress): Promise<IndexPassResult> {
  const guided = req.ownIndexes ? await runGuidedPass(req, onProgress) : null;
  return guided ?? readEveryRecord(req, onProgress);
}

async function readEveryRecord(req: IndexPassRequest, onProgress?: OnIndexProgress): Promise<IndexPassResult> {
  const collector = new PageCollector(req.pages);
  const problems: WarcReadProblem[] = [];
  const records = new Map<string, number>();
  const inspect = (rec: WarcRecord) => {
    records.set(rec.file, (records.get(rec.file) ?? 0) + 1);
    collector.inspect(rec);
  };
  const lines = buildIndex(req.paths, {
    format: "cdxj",
    memoryChars: SORT_MEMORY_CHARS,
    tmpDir: req.work,
    onError: (p) => problems.push(p),
    inspect,
    ...(onProgress ? { onProgress: (p: { bytesDone: number; bytesTotal: number }) => onProgress(p.bytesDone, p.bytesTotal) } : {}),
  });
  const cdxPath = join(req.work, CDX_GZ_NAME);
  const index = await writeCompressedIndex(lines, cdxPath);
  if (problems.length > 0) throw new WaczError("damaged", damageMessage(problems));
  for (const p of req.paths) if (!records.get(p)) throw new WaczError("damaged", `${p} holds no WARC record`);
  const { pages, rule } = collector.result();
  return { index, cdxPath, pages, pageRule: rule, indexedFrom: "records" };
}

function damageMessage(problems: WarcReadProblem[]): string {
  const listed = problems.slice(0, LISTED_PROBLEMS).map((p) => `${p.file} at offset ${p.offset}: ${p.reason}`);
  const more = problems.length > LISTED_PROBLEMS ? `; and ${problems.length - LISTED_PROBLEMS} more` : "";
  return `not packaged: a WARC file is damaged or is not a WARC (${listed.join("; ")}${more})`;
}
