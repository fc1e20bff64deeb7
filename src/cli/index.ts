/**
 * `lathe index`, three modes:
 * - `--dedup-db FILE|URL [--bucket NAME] WARC...` (issue "Deduplication", "Building the dedup index
 *   outside a crawl"): load existing WARC files — lathe's and other tools' — into the dedup
 *   store, with a summary on stdout. A postgresql:// URL loads the shared PostgreSQL store
 *   (issue #22, "Import"; src/postgres/copyImport.ts) with the same choice of entries.
 * - `--cdxj|--cdx11 [--output FILE] WARC...` (issue "CDXJ index"): the sorted CDXJ (or classic
 *   11-field CDX) index of the files, as `cdxj-indexer --sort --post-append` writes it, to
 *   stdout or FILE.
 * - `--merge [--output FILE] INDEX...`: merge sorted index files into one, streaming.
 * A progress bar on a terminal (stderr) in every mode. Exit 0 when everything was read cleanly,
 * 1 when some file had errors (the rest is still loaded / indexed), 2 on usage errors.
 */
import { errorMessage } from "../core/errors.js";
import { commandArgs } from "./commandArgs.js";
import { createLogger, type Logger } from "../core/log.js";
import { importWarcsInto, SKIP_REASONS, storeSink, type ImportProgress, type ImportSink, type ImportSummary, type SkipReason } from "../dedup/importer.js";
import { openSqliteDedupStore } from "../dedup/sqliteStore.js";
import type { DedupStore } from "../dedup/types.js";
import { buildIndex, mergeIndexesTo, mergeIndexesToFile, writeLinesTo, writeLinesToFile, type BuildProgress } from "../index/build.js";
import type { ByteMergeProgress } from "../index/byteMerge.js";
import { openCopyImport } from "../postgres/copyImport.js";
import { parsePostgresUrl } from "../postgres/url.js";
import type { WarcReadProblem } from "../warc/readProblems.js";

export const INDEX_HELP = `lathe index --dedup-db FILE|URL [--bucket NAME] WARC...
                        load existing WARC files (lathe's and other tools') into the dedup index
  --dedup-db FILE  dedup database (SQLite; created when missing)
  --dedup-db URL   or the shared PostgreSQL (postgresql://user:password@host:port/db): loaded with
                   COPY, one transaction per WARC file; lathe's tables are created when missing
  --bucket NAME    bucket the entries go to (default "default")
lathe index --cdxj|--cdx11 [--output FILE] WARC...
                        write the sorted CDXJ (or classic 11-field CDX) index of WARC files
  --cdxj           CDXJ lines, as cdxj-indexer --sort --post-append writes them
  --cdx11          classic CDX, 11 fields (CDX N b a m s k r M S V g)
  -o, --output FILE  write to FILE (replaced when complete) instead of stdout
lathe index --merge [--output FILE] INDEX...
                        merge sorted CDXJ/CDX files into one sorted index (streaming)
  exit status: 0 all read cleanly, 1 some file had errors (the rest was used), 2 usage error
`;

export interface IndexIo {
  /** stdout (summary). */
  out(s: string): void;
  /** stderr (progress bar, usage errors). */
  err(s: string): void;
  /** Draw the progress bar (default: stderr is a terminal). */
  isTTY: boolean;
  columns: number;
  openStore(path: string, log: Logger): DedupStore;
  log: Logger;
}

export async function indexCommand(argv: string[], out: (s: string) => void, io: Partial<IndexIo> = {}): Promise<number> {
  const err = io.err ?? ((s: string) => void process.stderr.write(s));
  const args = commandArgs("index", INDEX_HELP, argv, {
    "dedup-db": { type: "string" },
    bucket: { type: "string" },
    cdxj: { type: "boolean" },
    cdx11: { type: "boolean" },
    merge: { type: "boolean" },
    output: { type: "string", short: "o" },
  }, out, err);
  if (typeof args === "number") return args;
  const { values, positionals, usage } = args;
  const modes = (["dedup-db", "cdxj", "cdx11", "merge"] as const).filter((m) => values[m] !== undefined);
  if (modes.length > 1) return usage(`--${modes[0]} and --${modes[1]} do not go together`);
  if (values.cdxj || values.cdx11 || values.merge) {
    if (values.bucket !== undefined) return usage("--bucket goes with --dedup-db");
    const output = values.output === undefined ? null : String(values.output);
    if (output === "") return usage("--output needs a file name");
    if (positionals.length === 0) return usage(values.merge ? "name at least one index file to merge" : "name at least one WARC file");
    const run = values.merge ? { kind: "merge" as const } : { kind: "index" as const, format: values.cdx11 ? ("cdx11" as const) : ("cdxj" as const) };
    return cdxCommand(run, positionals, output, out, err, io);
  }
  if (values.output !== undefined) return usage("--output goes with --cdxj, --cdx11 or --merge");
  const db = values["dedup-db"];
  if (typeof db !== "string" || db === "") return usage("--dedup-db FILE is required (or --cdxj / --cdx11 for a CDX index, --merge to merge indexes)");
  const bucket = values.bucket === undefined ? "default" : String(values.bucket);
  if (bucket === "" || /[\s\x00-\x1f]/.test(bucket)) return usage(`--bucket must be a non-empty name without spaces, got ${JSON.stringify(bucket)}`);
  if (positionals.length === 0) return usage("name at least one WARC file");

  const postgres = /^postgres(ql)?:\/\//i.test(db);
  if (postgres) {
    try {
      parsePostgresUrl(db, "--dedup-db");
    } catch (e) {
      return usage(errorMessage(e));
    }
  }

  const log = io.log ?? createLogger({ level: "error" });
  let target: ImportTarget;
  try {
    target = postgres ? await openCopyImport(db, "--dedup-db", log) : storeTarget((io.openStore ?? ((p, l) => openSqliteDedupStore(p, { log: l, cacheMiB: 512 })))(db, log));
  } catch (e) {
    // Never `db` itself for PostgreSQL: it holds the password (the messages name the server masked).
    err(`lathe index: cannot open the dedup database${postgres ? "" : ` ${db}`}: ${oneLine(errorMessage(e))}\n`);
    return 1;
  }
  const tty = io.isTTY ?? process.stderr.isTTY === true;
  const bar = tty ? new ProgressBar(err, io.columns || process.stderr.columns || 80) : null;
  let summary: ImportSummary;
  try {
    summary = await importWarcsInto(positionals, target.sink, { bucket, log, ...(bar ? { onProgress: (p: ImportProgress) => bar.update(p) } : {}) });
  } catch (e) {
    bar?.clear();
    err(`lathe index: ${oneLine(errorMessage(e))}\n`);
    return 1;
  } finally {
    bar?.clear();
    try {
      await target.close();
    } catch (e) {
      err(`lathe index: closing the dedup database failed: ${errorMessage(e)}\n`);
    }
  }
  out(formatSummary(summary));
  return summary.errors.length > 0 ? 1 : 0;
}

/** Where `--dedup-db` entries go, and how to let go of it. */
interface ImportTarget {
  sink: ImportSink;
  close(): Promise<void>;
}

function storeTarget(store: DedupStore): ImportTarget {
  return { sink: storeSink(store, {}), close: async () => store.close() };
}

/** Server messages may span lines; the CLI's errors are one line each. */
function oneLine(s: string): string {
  return s.replace(/\s*\n\s*/g, " ");
}

type CdxRun = { kind: "index"; format: "cdxj" | "cdx11" } | { kind: "merge" };

/** `--cdxj` / `--cdx11` / `--merge`: the lines to stdout or, atomically, to `output`. */
async function cdxCommand(run: CdxRun, inputs: string[], output: string | null, out: (s: string) => void, err: (s: string) => void, io: Partial<IndexIo>): Promise<number> {
  const tty = io.isTTY ?? process.stderr.isTTY === true;
  const bar = tty ? new ProgressBar(err, io.columns || process.stderr.columns || 80) : null;
  const problems: WarcReadProblem[] = [];
  const report = (p: WarcReadProblem) => {
    problems.push(p);
    bar?.clear();
    err(`lathe index: ${p.file} at offset ${p.offset}: ${p.reason}\n`);
  };
  try {
    if (run.kind === "merge") {
      const opts = bar ? { onProgress: (p: ByteMergeProgress) => bar.draw(p.bytesDone, p.bytesTotal, p.bytesDone >= p.bytesTotal, [`files ${p.files}`, `lines ${p.lines}`]) } : {};
      if (output === null) await mergeIndexesTo(inputs, out, opts);
      else await mergeIndexesToFile(inputs, output, opts);
    } else {
      const lines = buildIndex(inputs, {
        format: run.format,
        onError: report,
        ...(bar ? { onProgress: (p: BuildProgress) => bar.draw(p.bytesDone, p.bytesTotal, p.filesDone >= p.files, [`files ${p.filesDone}/${p.files}`, `lines ${p.lines}`, ...(p.errors ? [`errors ${p.errors}`] : [])]) } : {}),
      });
      if (output === null) await writeLinesTo(lines, out);
      else await writeLinesToFile(lines, output);
    }
  } catch (e) {
    bar?.clear();
    err(`lathe index: ${errorMessage(e)}\n`);
    return 1;
  } finally {
    bar?.clear();
  }
  return problems.length > 0 ? 1 : 0;
}

const MAX_LISTED = 100;

export function formatSummary(s: ImportSummary): string {
  const lines: string[] = [];
  lines.push(`bucket:         ${s.bucket}`);
  lines.push(`files:          ${s.files}${s.filesWithErrors ? ` (${s.filesWithErrors} with errors)` : ""}, ${formatBytes(s.bytes)}`);
  lines.push(`records:        ${s.records} (${s.responses} responses, ${s.revisits} revisits)`);
  lines.push(`entries added:  ${s.entriesAdded}${s.entriesFromRevisits ? ` (${s.entriesFromRevisits} from revisits' originals, without file/offset)` : ""}`);
  lines.push(`skipped:        ${s.skippedTotal}`);
  for (const [k, n] of Object.entries(s.skipped)) lines.push(`  ${String(n).padStart(8)}  ${SKIP_REASONS[k as SkipReason] ?? k}`);
  lines.push(`warnings:       ${s.warnings.length}`);
  for (const w of s.warnings.slice(0, 10)) lines.push(`  ${w.file} at offset ${w.offset}: ${w.reason}`);
  if (s.warnings.length > 10) lines.push(`  ... and ${s.warnings.length - 10} more`);
  lines.push(`errors:         ${s.errors.length}`);
  for (const e of s.errors.slice(0, MAX_LISTED)) lines.push(`  ${e.file} at offset ${e.offset}: ${e.reason}`);
  if (s.errors.length > MAX_LISTED) lines.push(`  ... and ${s.errors.length - MAX_LISTED} more`);
  return lines.join("\n") + "\n";
}

function formatBytes(n: number): string {
  if (n < 1e3) return `${n} B`;
  if (n < 1e6) return `${(n / 1e3).toFixed(1)} kB`;
  if (n < 1e9) return `${(n / 1e6).toFixed(1)} MB`;
  return `${(n / 1e9).toFixed(2)} GB`;
}

/** One line on stderr, redrawn at most every 100 ms: bar, bytes, files, records. */
class ProgressBar {
  #last = 0;
  #drawn = false;
  constructor(
    readonly write: (s: string) => void,
    readonly columns: number,
  ) {}

  update(p: ImportProgress): void {
    const frac = p.bytesTotal > 0 ? Math.min(1, p.bytesDone / p.bytesTotal) : p.filesDone / Math.max(1, p.files);
    this.#render(frac, p.filesDone >= p.files, [
      `${formatBytes(p.bytesDone)} of ${formatBytes(p.bytesTotal)}`,
      `files ${p.filesDone}/${p.files}`,
      `entries ${p.entriesAdded}`,
      ...(p.errors ? [`errors ${p.errors}`] : []),
      `records ${p.records}`,
    ]);
  }

  /** Bytes done of a total, then `parts` (most useful first). `final` draws past the throttle. */
  draw(done: number, total: number, final: boolean, parts: string[]): void {
    const frac = total > 0 ? Math.min(1, done / total) : final ? 1 : 0;
    this.#render(frac, final, [`${formatBytes(done)} of ${formatBytes(total)}`, ...parts]);
  }

  #render(frac: number, final: boolean, parts: string[]): void {
    const now = Date.now();
    if (now - this.#last < 100 && !final) return;
    this.#last = now;
    const width = this.columns >= 100 ? 30 : this.columns >= 70 ? 20 : 10;
    const full = Math.round(frac * width);
    let line = `[${"#".repeat(full)}${"-".repeat(width - full)}] ${String(Math.floor(frac * 100)).padStart(3)}%`;
    // Most useful first; what does not fit the terminal is left off.
    for (const part of parts) {
      if (line.length + 2 + part.length > this.columns - 1) break;
      line += `  ${part}`;
    }
    this.write(`\r${line}\x1b[K`);
    this.#drawn = true;
  }

  clear(): void {
    if (this.#drawn) this.write("\r\x1b[K");
    this.#drawn = false;
  }
}
