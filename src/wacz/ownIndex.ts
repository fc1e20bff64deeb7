/**
 * lathe's own index of a closed WARC file: `NAME.cdxj` beside `NAME` (the live index writes it
 * before the WARC gets its final name, index/live.ts; start-up writes it again for a file that
 * lacks one). What the WACZ packager needs of it to walk the file without inflating it: where
 * each indexed record lies, and which records it must still look into for the page list.
 */
import { createReadStream } from "node:fs";
import { stat } from "node:fs/promises";
import { createInterface } from "node:readline";
import { declaredPage, type PageSource } from "./pages.js";

/** An index is used only if it is at least as new as its WARC (a WARC changed since would not match). */
export async function ownIndexPath(warc: string): Promise<string | null> {
  const path = `${warc}.cdxj`;
  const [w, i] = await Promise.all([stat(warc), stat(path).catch(() => null)]);
  return i?.isFile() && i.mtimeMs >= w.mtimeMs ? path : null;
}

/** The indexed records of one file, in file order. */
export interface IndexedRecords {
  offsets: number[];
  lengths: number[];
  /** The page list needs this record's header (and HTTP head). */
  look: boolean[];
}

/**
 * Which indexed records the page rules (pages.ts) read: text/html and revisit records (their
 * HTTP status and type), page declarations, and for given pages every capture of their URLs
 * (found by record id). Requests and unindexed records are read from between these anyway.
 */
export function pageLookRule(pages: PageSource): (e: { url: string; mime?: string }) => boolean {
  const given = pages.kind === "given" ? new Set(pages.pages.map((p) => p.url)) : null;
  return (e) => (given ? given.has(e.url) : e.mime === "text/html" || e.mime === "warc/revisit" || declaredPage(e.url) !== null);
}

/** Null when a line is not lathe's CDXJ for `filename` (the index is then not used). */
export async function readIndexedRecords(indexPath: string, filename: string, look: (e: { url: string; mime?: string }) => boolean): Promise<IndexedRecords | null> {
  const rows: Array<[number, number, boolean]> = [];
  const rl = createInterface({ input: createReadStream(indexPath, { highWaterMark: 1024 * 1024 }), crlfDelay: Infinity });
  try {
    for await (const line of rl) {
      if (line === "") continue;
      const row = parseLine(line, filename, look);
      if (!row) return null;
      rows.push(row);
    }
  } finally {
    rl.close();
  }
  rows.sort((a, b) => a[0] - b[0]);
  const out: IndexedRecords = { offsets: [], lengths: [], look: [] };
  for (const [offset, length, lk] of rows) {
    const last = out.offsets.length - 1;
    // One record under two lines (none today): walked once.
    if (last >= 0 && out.offsets[last] === offset && out.lengths[last] === length) {
      out.look[last] ||= lk;
      continue;
    }
    out.offsets.push(offset);
    out.lengths.push(length);
    out.look.push(lk);
  }
  return out;
}

function parseLine(line: string, filename: string, look: (e: { url: string; mime?: string }) => boolean): [number, number, boolean] | null {
  const brace = line.indexOf("{");
  if (brace < 0) return null;
  let e: { url?: unknown; mime?: unknown; offset?: unknown; length?: unknown; filename?: unknown };
  try {
    e = JSON.parse(line.slice(brace));
  } catch {
    return null;
  }
  const offset = Number(e.offset);
  const length = Number(e.length);
  if (e.filename !== filename || typeof e.url !== "string" || !Number.isSafeInteger(offset) || !Number.isSafeInteger(length) || offset < 0 || length <= 0) return null;
  return [offset, length, look({ url: e.url, ...(typeof e.mime === "string" ? { mime: e.mime } : {}) })];
}
