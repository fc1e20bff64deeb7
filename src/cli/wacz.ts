/**
 * `lathe wacz` (issue #23): closed WARC files packaged as one WACZ — named files, a collection
 * of lathe's WARC directory, or a closed recording session. The file appears only when complete.
 * A progress line on a terminal (stderr). Exit 0 written, 1 not written (why on stderr), 2 usage.
 */
import { basename } from "node:path";
import { commandArgs } from "./commandArgs.js";
import { mallocTrimHelper, startMallocTrimming } from "../core/mallocTrim.js";
import { writeWaczFile, type WaczSummary } from "../wacz/output.js";
import type { WaczProgress } from "../wacz/packager.js";
import type { PageRule } from "../wacz/pages.js";
import { collectionSourceIn, sessionSourceIn, type PackageSource } from "../wacz/sources.js";
import { WaczError } from "../wacz/waczError.js";
import { bytes, ProgressLine } from "./progressLine.js";

export const WACZ_HELP = `lathe wacz --output FILE.wacz (--collection NAME | --session ID) [--dir DIR] [--title TEXT]
lathe wacz --output FILE.wacz [--title TEXT] WARC...
                        package closed WARC files as one WACZ (for ReplayWeb.page)
  -o, --output FILE  the WACZ to write (replaced only once complete)
  --collection NAME  the closed WARC files of a collection in lathe's WARC directory
  --session ID     the WARC files of a closed recording session
  --dir DIR        lathe's WARC directory (default ./warcs)
  --title TEXT     the package's title (default: the collection, session or first file)
  exit status: 0 written, 1 not written (the reason on stderr), 2 usage error
`;

export interface WaczIo {
  err(s: string): void;
  /** Draw the progress line (default: stderr is a terminal). */
  isTTY: boolean;
  columns: number;
}

/** How often freed heap goes back to the kernel while packaging (core/mallocTrim). */
const TRIM_MS = 20;

const PAGE_RULES: Record<PageRule, string> = {
  given: "the pages the recording visited",
  declared: "declared by the crawler's page records",
  navigation: "top-level navigations to text/html 200 answers",
  html: "every text/html 200 answer",
};

export async function waczCommand(argv: string[], out: (s: string) => void, io: Partial<WaczIo> = {}): Promise<number> {
  const err = io.err ?? ((s: string) => void process.stderr.write(s));
  const args = commandArgs("wacz", WACZ_HELP, argv, {
    output: { type: "string", short: "o" },
    collection: { type: "string" },
    session: { type: "string" },
    dir: { type: "string" },
    title: { type: "string" },
  }, out, err);
  if (typeof args === "number") return args;
  const { values, positionals, usage } = args;
  const output = values.output;
  if (typeof output !== "string" || output === "") return usage("--output FILE.wacz is required");
  if (!output.endsWith(".wacz")) return usage(`--output must name a .wacz file, got ${JSON.stringify(output)}`);
  const chosen = [values.collection !== undefined, values.session !== undefined, positionals.length > 0].filter(Boolean).length;
  if (chosen !== 1) return usage("give one of --collection NAME, --session ID, or WARC files");
  if (values.dir !== undefined && positionals.length > 0) return usage("--dir goes with --collection or --session");

  const tty = io.isTTY ?? process.stderr.isTTY === true;
  const bar = tty ? new ProgressLine(err, io.columns || process.stderr.columns || 80) : null;
  const onProgress = bar ? progressOf(bar) : undefined;
  // The index pass inflates every member into a fresh buffer, and glibc keeps what is freed in
  // its arenas: on the benchmark's 500 MB collection the process peaked at 161–167 MB without
  // trimming, 140–148 MB trimming every 20 ms (the trims cost ~0.2 s of system time per 100 MB,
  // on the main thread, which waits for the index pass anyway).
  const stopTrimming = startMallocTrimming(TRIM_MS, mallocTrimHelper().trimmer);
  try {
    const src = sourceOf(values, positionals);
    for (const f of src.leftOut) err(`lathe wacz: left out ${f}: still being written\n`);
    const title = typeof values.title === "string" ? values.title : src.title;
    const summary = await writeWaczFile({ files: src.files, pages: src.pages, title, ownIndexes: src.ownIndexes }, output, onProgress);
    bar?.clear();
    out(formatWaczSummary(summary));
    return 0;
  } catch (e) {
    bar?.clear();
    if (!(e instanceof WaczError)) throw e;
    err(`lathe wacz: ${e.message}\n`);
    return 1;
  } finally {
    stopTrimming();
  }
}

/**
 * One line for the two things going on at once: the WARCs indexed (a worker thread) and copied
 * into the package; each pass is the WARCs' size, so the bar is their sum over twice that.
 */
function progressOf(bar: ProgressLine): (p: WaczProgress) => void {
  const seen = { index: { done: 0, total: 0 }, write: { done: 0, total: 0 } };
  return (p) => {
    seen[p.phase] = { done: p.bytesDone, total: p.bytesTotal };
    const total = 2 * Math.max(seen.index.total, seen.write.total);
    const done = Math.min(seen.index.done, seen.index.total) + Math.min(seen.write.done, seen.write.total);
    bar.show("packaging", done, total, done >= total);
  };
}

function sourceOf(values: Record<string, string | boolean | undefined>, positionals: string[]): PackageSource {
  const dir = typeof values.dir === "string" ? values.dir : "./warcs";
  if (typeof values.collection === "string") return collectionSourceIn(dir, values.collection);
  if (typeof values.session === "string") return sessionSourceIn(dir, values.session);
  return { files: positionals, title: basename(positionals[0]!), pages: { kind: "detect" }, leftOut: [], ownIndexes: false };
}

export function formatWaczSummary(s: WaczSummary): string {
  return [
    `wrote ${s.path} (${bytes(s.size)})`,
    `  WARC files:  ${s.files}`,
    `  index lines: ${s.lines}`,
    `  pages:       ${s.pages} (${PAGE_RULES[s.pageRule]})`,
    `  index from:  ${s.indexedFrom === "own-indexes" ? "lathe's own index of each file (its payloads were not inflated)" : "every record, read again"}`,
  ].join("\n") + "\n";
}
