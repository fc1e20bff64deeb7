/**
 * `lathe index --cdxj|--cdx11 WARC...` and `--merge FILE...` without the CLI around them: the
 * sorted index of many WARC files, the merge of sorted index files, and writing lines to a file
 * (atomically: a temporary file renamed at the end) or to a string sink.
 */
import { open, rename, rm, stat, type FileHandle } from "node:fs/promises";
import { basename, dirname, join } from "node:path";
import { errorMessage } from "../core/errors.js";
import { WarcReadError, type WarcReadProblem } from "../warc/readProblems.js";
import type { WarcRecord } from "../warc/reader.js";
import { CDX11_HEADER, formatCdx11, formatCdxj, indexWarc } from "./cdxj.js";
import { mergeIndexFiles, type ByteMergeOptions } from "./byteMerge.js";
import { ExternalSorter, type ExternalSortOptions } from "./sortMerge.js";

export type IndexFormat = "cdxj" | "cdx11";

export interface BuildProgress {
  fileIndex: number;
  filesDone: number;
  files: number;
  bytesDone: number;
  bytesTotal: number;
  lines: number;
  errors: number;
}

export interface BuildOptions extends ExternalSortOptions {
  format: IndexFormat;
  /** Called often; throttle any rendering. */
  onProgress?(p: BuildProgress): void;
  /** Damage (reading goes on with the next record or file). */
  onError?(p: WarcReadProblem): void;
  onWarning?(p: WarcReadProblem): void;
  /** Every record read, in file order (IndexWarcOptions.inspect). */
  inspect?(rec: WarcRecord): void;
}

/** Sorted, de-duplicated index lines (LF included) of all `paths`, as one index. */
export async function* buildIndex(paths: string[], opts: BuildOptions): AsyncGenerator<string> {
  const sizes = await Promise.all(paths.map((p) => stat(p).then((s) => s.size, () => 0)));
  const p: BuildProgress = { fileIndex: 0, filesDone: 0, files: paths.length, bytesDone: 0, bytesTotal: sizes.reduce((a, b) => a + b, 0), lines: 0, errors: 0 };
  const format = opts.format === "cdx11" ? formatCdx11 : formatCdxj;
  const sorter = new ExternalSorter(opts);
  const onError = (e: WarcReadProblem) => {
    p.errors++;
    opts.onError?.(e);
  };
  let before = 0;
  for (const [i, path] of paths.entries()) {
    p.fileIndex = i;
    // cdxj-indexer writes the CDX-11 header once per input file; sorting makes it one line.
    if (opts.format === "cdx11") await sorter.add(CDX11_HEADER + "\n");
    try {
      const records = indexWarc(path, {
        onError,
        ...(opts.onWarning ? { onWarning: opts.onWarning } : {}),
        ...(opts.inspect ? { inspect: opts.inspect } : {}),
        onRecord: (pos) => {
          p.bytesDone = before + pos;
          opts.onProgress?.(p);
        },
      });
      for await (const e of records) {
        await sorter.add(format(e));
        p.lines++;
      }
    } catch (e) {
      onError(e instanceof WarcReadError ? { file: e.file, offset: e.offset, reason: e.reason } : { file: path, offset: 0, reason: errorMessage(e) });
    }
    before += sizes[i]!;
    p.bytesDone = before;
    p.filesDone = i + 1;
    opts.onProgress?.(p);
  }
  yield* sorter.sorted();
}

/**
 * Merge the sorted index files `inputs` into `path` (atomically, as writeLinesToFile); an input
 * may be the output. Memory does not depend on the files' sizes (byteMerge.ts).
 */
export function mergeIndexesToFile(inputs: string[], path: string, opts: ByteMergeOptions = {}): Promise<number> {
  return writeFileAtomically(path, (fh) => mergeIndexFiles(inputs, (chunk) => fh.writeFile(chunk), opts));
}

/** Merge the sorted index files `inputs` through a string sink (stdout), a buffer at a time. */
export function mergeIndexesTo(inputs: string[], out: (s: string) => void, opts: ByteMergeOptions = {}): Promise<number> {
  // Chunks end at line ends, so no UTF-8 sequence is split.
  return mergeIndexFiles(inputs, async (chunk) => out(chunk.toString("utf8")), opts);
}

/** Write `lines` to `path` atomically (writeFileAtomically), in batches of about 1 MB. */
export async function writeLinesToFile(lines: AsyncIterable<string>, path: string): Promise<number> {
  return writeFileAtomically(path, async (fh) => {
    let n = 0;
    for await (const chunk of batches(lines)) {
      n += chunk.lines;
      await fh.writeFile(chunk.text);
    }
    return n;
  });
}

/**
 * Run `write` on a temporary file beside `path`, renamed over `path` only when all of it was
 * written: a failed run leaves no half file, and an input may be the output.
 */
export async function writeFileAtomically<T>(path: string, write: (fh: FileHandle) => Promise<T>): Promise<T> {
  const tmp = join(dirname(path), `.${basename(path)}.tmp-${process.pid}-${Date.now()}`);
  const fh = await open(tmp, "w");
  try {
    const result = await write(fh);
    await fh.close();
    await rename(tmp, path);
    return result;
  } catch (e) {
    await fh.close().catch(() => {});
    await rm(tmp, { force: true });
    throw e;
  }
}

/** Write `lines` through a string sink (stdout) in batches of about 1 MB. */
export async function writeLinesTo(lines: AsyncIterable<string>, out: (s: string) => void): Promise<number> {
  let n = 0;
  for await (const chunk of batches(lines)) {
    n += chunk.lines;
    out(chunk.text);
  }
  return n;
}

async function* batches(lines: AsyncIterable<string>, size = 1024 * 1024): AsyncGenerator<{ text: string; lines: number }> {
  let parts: string[] = [];
  let chars = 0;
  for await (const l of lines) {
    parts.push(l);
    chars += l.length;
    if (chars >= size) {
      yield { text: parts.join(""), lines: parts.length };
      parts = [];
      chars = 0;
    }
  }
  if (parts.length > 0) yield { text: parts.join(""), lines: parts.length };
}
