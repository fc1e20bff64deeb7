/**
 * Damaged copies of an archive, for the replay tests' negative cases: a record cut out of a WARC,
 * a record's bytes overwritten, an index line pointing at the wrong offset. Each writes a new
 * file next to nothing else (the caller picks a fresh directory, so the damaged archive gets a
 * URL, and so a ReplayWeb.page collection, of its own).
 */
import { copyFileSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { basename, join } from "node:path";

/** One CDXJ line: its key and timestamp, and its JSON members. */
export interface CdxjLine {
  key: string;
  timestamp: string;
  url: string;
  mime?: string;
  status?: string;
  offset: string;
  length: string;
  filename: string;
  [member: string]: string | undefined;
}

export function parseCdxj(text: string): CdxjLine[] {
  return text
    .split("\n")
    .filter((l) => l.trim() !== "")
    .map((l) => {
      const [key, timestamp] = l.split(" ", 2) as [string, string];
      return { key, timestamp, ...JSON.parse(l.slice(key.length + timestamp.length + 2)) } as CdxjLine;
    });
}

/** The index line of `url`'s capture of the given kind (a 200 response, or a revisit). */
export function lineOf(lines: CdxjLine[], url: string, kind: "response" | "revisit" = "response"): CdxjLine {
  const found = lines.filter((l) => l.url === url && (kind === "revisit" ? l.mime === "warc/revisit" : l.mime !== "warc/revisit" && l.status === "200"));
  if (found.length === 0) throw new Error(`no ${kind} line for ${url} in the index`);
  return found[0]!;
}

/** Copy `files` into a new directory `dir`; returns the copies' paths by base name. */
export function copyInto(dir: string, files: string[]): Record<string, string> {
  mkdirSync(dir, { recursive: true });
  const out: Record<string, string> = {};
  for (const f of files) {
    out[basename(f)] = join(dir, basename(f));
    copyFileSync(f, out[basename(f)]!);
  }
  return out;
}

/** Cut the bytes of one record (its gzip member: offset, length) out of a WARC, in place. */
export function removeRecord(warc: string, at: Pick<CdxjLine, "offset" | "length">): void {
  const b = readFileSync(warc);
  const start = Number(at.offset);
  const end = start + Number(at.length);
  writeFileSync(warc, Buffer.concat([b.subarray(0, start), b.subarray(end)]));
}

/**
 * Overwrite 32 bytes in the middle of one record's gzip member, in place: its compressed data
 * no longer inflates (or no longer matches its CRC).
 */
export function corruptRecord(warc: string, at: Pick<CdxjLine, "offset" | "length">): void {
  const b = readFileSync(warc);
  const middle = Number(at.offset) + Math.floor(Number(at.length) / 2) - 16;
  for (let i = middle; i < middle + 32; i++) b[i] = b[i]! ^ 0x5a;
  writeFileSync(warc, b);
}

/** Point `url`'s index line at another record's offset and length, in place. */
export function misdirectLine(cdxj: string, url: string, to: Pick<CdxjLine, "offset" | "length">): void {
  const lines = readFileSync(cdxj, "utf8").split("\n");
  const k = lines.findIndex((l) => l.includes(`"url": ${JSON.stringify(url)}`) && !l.includes('"mime": "warc/revisit"'));
  if (k < 0) throw new Error(`no line for ${url} in ${cdxj}`);
  lines[k] = lines[k]!.replace(/"length": "\d+", "offset": "\d+"/, `"length": "${to.length}", "offset": "${to.offset}"`);
  if (!lines[k]!.includes(`"offset": "${to.offset}"`)) throw new Error(`could not rewrite the offset of ${url} in ${cdxj}`);
  writeFileSync(cdxj, lines.join("\n"));
}
