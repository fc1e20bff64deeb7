/**
 * Damaged copies of an archive, for the replay tests' negative cases: a record cut out of a WARC,
 * a record's bytes overwritten, an index line pointing at the wrong offset, a ZIP (WACZ) rebuilt
 * without an entry or with one replaced. The caller copies into a fresh directory first, so the
 * damaged archive gets a URL, and so a ReplayWeb.page collection, of its own.
 */
import { execFileSync } from "node:child_process";
import { copyFileSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { basename, join } from "node:path";
import { gunzipSync, gzipSync } from "node:zlib";

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

/** CDXJ text with `url`'s line (not a revisit's) pointing at another record's offset and length. */
export function misdirect(cdxj: string, url: string, to: Pick<CdxjLine, "offset" | "length">): string {
  const lines = cdxj.split("\n");
  const k = lines.findIndex((l) => l.includes(`"url": ${JSON.stringify(url)}`) && !l.includes('"mime": "warc/revisit"'));
  if (k < 0) throw new Error(`no index line for ${url}`);
  lines[k] = lines[k]!.replace(/"length": "\d+", "offset": "\d+"/, `"length": "${to.length}", "offset": "${to.offset}"`);
  if (!lines[k]!.includes(`"offset": "${to.offset}"`)) throw new Error(`could not rewrite the offset of ${url}`);
  return lines.join("\n");
}

/** Point `url`'s line in a CDXJ file at another record's offset and length, in place. */
export function misdirectLine(file: string, url: string, to: Pick<CdxjLine, "offset" | "length">): void {
  writeFileSync(file, misdirect(readFileSync(file, "utf8"), url, to));
}

const REZIP = `
import json, sys, zipfile, base64
a = json.load(sys.stdin)
with zipfile.ZipFile(a["src"]) as src, zipfile.ZipFile(a["dst"], "w", allowZip64=True) as dst:
    for info in src.infolist():
        if info.filename in a["drop"]:
            continue
        data = base64.b64decode(a["replace"][info.filename]) if info.filename in a["replace"] else src.read(info.filename)
        dst.writestr(info, data, compress_type=info.compress_type)
`;

/**
 * Rebuild a ZIP (a WACZ) with python3's zipfile, an implementation independent of lathe's:
 * entries in `drop` left out, those in `replace` with new contents; every other entry as it was,
 * stored or deflated as it was.
 */
export function rezip(src: string, dst: string, edit: { drop?: string[]; replace?: Record<string, Buffer> }): void {
  const replace = Object.fromEntries(Object.entries(edit.replace ?? {}).map(([k, v]) => [k, v.toString("base64")]));
  execFileSync("python3", ["-c", REZIP], { input: JSON.stringify({ src, dst, drop: edit.drop ?? [], replace }), stdio: ["pipe", "ignore", "pipe"] });
}

/** One entry's contents, read with python3's zipfile. */
export function unzipEntry(zip: string, name: string): Buffer {
  const script = `import sys, zipfile\nsys.stdout.buffer.write(zipfile.ZipFile(sys.argv[1]).read(sys.argv[2]))`;
  return execFileSync("python3", ["-c", script, zip, name], { maxBuffer: 256 * 1024 * 1024 });
}

/** The names of a ZIP's entries, read with python3's zipfile. */
export function zipEntries(zip: string): string[] {
  const script = `import sys, zipfile\nprint("\\n".join(zipfile.ZipFile(sys.argv[1]).namelist()))`;
  return execFileSync("python3", ["-c", script, zip], { encoding: "utf8" }).split("\n").filter((l) => l !== "");
}

/**
 * A WACZ's compressed index (`index.cdx.gz`: gzip members of CDXJ lines; `index.idx`: a `!meta`
 * line, then per member its first key and timestamp and `{"offset": …, "length": …}`) with `edit`
 * applied to its lines: each member holds as many lines as before, recompressed, and the .idx
 * lines get the new offsets and lengths. `edit` must keep the number of lines and their keys.
 */
export function editCompressedIndex(cdxGz: Buffer, idx: string, edit: (cdxj: string) => string): { cdxGz: Buffer; idx: string } {
  const [meta, ...blocks] = idx.split("\n").filter((l) => l !== "");
  const parsed = blocks.map((l) => {
    const brace = l.indexOf(" {");
    return { prefix: l.slice(0, brace), at: JSON.parse(l.slice(brace + 1)) as { offset: number; length: number } };
  });
  const texts = parsed.map((b) => gunzipSync(cdxGz.subarray(b.at.offset, b.at.offset + b.at.length)).toString("utf8"));
  const counts = texts.map((t) => t.split("\n").length - 1);
  const lines = edit(texts.join("")).split("\n");
  const members: Buffer[] = [];
  const idxLines = [meta!];
  let offset = 0;
  let from = 0;
  parsed.forEach((b, k) => {
    const member = gzipSync(lines.slice(from, from + counts[k]!).join("\n") + "\n");
    from += counts[k]!;
    idxLines.push(`${b.prefix} {"offset": ${offset}, "length": ${member.length}}`);
    members.push(member);
    offset += member.length;
  });
  return { cdxGz: Buffer.concat(members), idx: idxLines.join("\n") + "\n" };
}

const CDX_GZ = "indexes/index.cdx.gz";
const IDX = "indexes/index.idx";
const PLAIN_INDEX = "indexes/index.cdxj";

/** A WACZ's index lines, from its compressed (index.cdx.gz) or plain (index.cdxj) index. */
export function waczIndex(wacz: string): CdxjLine[] {
  const names = zipEntries(wacz);
  const text = names.includes(CDX_GZ) ? gunzipSync(unzipEntry(wacz, CDX_GZ)).toString("utf8") : unzipEntry(wacz, PLAIN_INDEX).toString("utf8");
  return parseCdxj(text);
}

/** Copy a WACZ to `dst` with `edit` applied to its index's CDXJ lines (either form). */
export function rezipWithIndex(src: string, dst: string, edit: (cdxj: string) => string): void {
  if (zipEntries(src).includes(CDX_GZ)) {
    const r = editCompressedIndex(unzipEntry(src, CDX_GZ), unzipEntry(src, IDX).toString("utf8"), edit);
    rezip(src, dst, { replace: { [CDX_GZ]: r.cdxGz, [IDX]: Buffer.from(r.idx, "utf8") } });
  } else {
    rezip(src, dst, { replace: { [PLAIN_INDEX]: Buffer.from(edit(unzipEntry(src, PLAIN_INDEX).toString("utf8")), "utf8") } });
  }
}
