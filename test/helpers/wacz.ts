/**
 * Check a WACZ with readers that are not lathe's: Python's zipfile (the container, CRCs, sizes),
 * node:crypto (every datapackage.json hash recomputed), node:zlib (the index's gzip blocks) and
 * the npm package warcio (the record at every index line's offset, read from the ZIP's own bytes
 * where ReplayWeb.page would read it). `checkWacz` returns what it found and a list of problems.
 */
import { execFileSync, spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { openSync, readSync, closeSync } from "node:fs";
import { gunzipSync } from "node:zlib";
import { WARCParser } from "warcio";

export interface ZipListing {
  name: string;
  compress: number;
  size: number;
  crc: number;
  headerOffset: number;
}

/** Python's view of the archive: its entries, and testzip()'s verdict (null = every CRC good). */
export function pythonZip(path: string): { entries: ZipListing[]; bad: string | null } {
  const py = `
import json, sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
bad = z.testzip()
print(json.dumps({"bad": bad, "entries": [{"name": i.filename, "compress": i.compress_type, "size": i.file_size, "crc": i.CRC, "headerOffset": i.header_offset} for i in z.infolist()]}))
`;
  return JSON.parse(execFileSync("python3", ["-c", py, path], { maxBuffer: 64 * 1024 * 1024 }).toString()) as { entries: ZipListing[]; bad: string | null };
}

/** The bytes of an entry, through Info-ZIP's unzip (also when its CRC is wrong: the checks say so). */
export function unzipEntry(path: string, name: string): Buffer {
  const r = spawnSync("unzip", ["-p", path, name], { maxBuffer: 1024 * 1024 * 1024 });
  if (r.status !== 0 && r.stdout.length === 0) throw new Error(`unzip -p ${name}: ${r.stderr.toString()}`);
  return r.stdout;
}

/** Where an entry's data starts in the archive (after its local header). */
export function dataOffset(path: string, headerOffset: number): number {
  const fd = openSync(path, "r");
  try {
    const h = Buffer.alloc(30);
    readSync(fd, h, 0, 30, headerOffset);
    if (h.readUInt32LE(0) !== 0x04034b50) throw new Error(`no local header at ${headerOffset}`);
    return headerOffset + 30 + h.readUInt16LE(26) + h.readUInt16LE(28);
  } finally {
    closeSync(fd);
  }
}

function readAt(path: string, offset: number, length: number): Buffer {
  const fd = openSync(path, "r");
  try {
    const b = Buffer.alloc(length);
    const n = readSync(fd, b, 0, length, offset);
    return b.subarray(0, n);
  } finally {
    closeSync(fd);
  }
}

export const sha256 = (b: Buffer) => "sha256:" + createHash("sha256").update(b).digest("hex");

export interface CdxjLine {
  key: string;
  timestamp: string;
  json: Record<string, string>;
  text: string;
}

export interface WaczContents {
  entries: ZipListing[];
  datapackage: { profile: string; wacz_version: string; title: string; software: string; created: string; resources: Array<{ name: string; path: string; hash: string; bytes: number }> };
  /** pages.jsonl after its header line. */
  pages: Array<{ id?: string; url: string; ts: string; title?: string }>;
  lines: CdxjLine[];
  /** Index lines whose record was read at its offset. */
  resolved: number;
}

const PAGES_HEADER = '{"format": "json-pages-1.0", "id": "pages", "title": "All Pages"}';

/** Check everything that can be checked without a browser. */
export async function checkWacz(path: string): Promise<{ wacz: WaczContents; problems: string[] }> {
  const problems: string[] = [];
  const { entries, bad } = pythonZip(path);
  if (bad !== null) problems.push(`zipfile.testzip: bad CRC in ${bad}`);
  const byName = new Map(entries.map((e) => [e.name, e]));
  for (const e of entries) if (e.compress !== 0) problems.push(`${e.name} is compressed (method ${e.compress}), not stored`);
  for (const want of ["datapackage.json", "datapackage-digest.json", "pages/pages.jsonl", "indexes/index.cdx.gz", "indexes/index.idx"]) if (!byName.has(want)) problems.push(`${want} missing`);
  const dpBytes = unzipEntry(path, "datapackage.json");
  const datapackage = JSON.parse(dpBytes.toString("utf8")) as WaczContents["datapackage"];
  problems.push(...checkManifest(path, datapackage, dpBytes, byName));
  const pages = checkPages(unzipEntry(path, "pages/pages.jsonl"), problems);
  const lines = indexLines(unzipEntry(path, "indexes/index.cdx.gz"), unzipEntry(path, "indexes/index.idx"), problems);
  let resolved = 0;
  for (const l of lines) {
    const p = await lineProblem(path, l, byName);
    if (p) problems.push(p);
    else resolved++;
  }
  return { wacz: { entries, datapackage, pages, lines, resolved }, problems };
}

function checkManifest(path: string, dp: WaczContents["datapackage"], dpBytes: Buffer, byName: Map<string, ZipListing>): string[] {
  const problems: string[] = [];
  if (dp.profile !== "data-package") problems.push(`profile ${dp.profile}`);
  if (dp.wacz_version !== "1.1.1") problems.push(`wacz_version ${dp.wacz_version}`);
  if (!/^lathe \d/.test(dp.software)) problems.push(`software ${dp.software}`);
  if (Number.isNaN(Date.parse(dp.created))) problems.push(`created ${dp.created}`);
  if (typeof dp.title !== "string" || dp.title === "") problems.push("no title");
  const listed = new Set(dp.resources.map((r) => r.path));
  for (const name of byName.keys()) if (!listed.has(name) && !name.startsWith("datapackage")) problems.push(`${name} is not in datapackage.json`);
  for (const r of dp.resources) {
    const e = byName.get(r.path);
    if (!e) {
      problems.push(`datapackage.json lists ${r.path}, not in the ZIP`);
      continue;
    }
    const data = unzipEntry(path, r.path);
    if (r.bytes !== data.length || r.bytes !== e.size) problems.push(`${r.path}: bytes ${r.bytes}, has ${data.length}`);
    if (r.hash !== sha256(data)) problems.push(`${r.path}: hash ${r.hash}, is ${sha256(data)}`);
    if (r.name !== r.path.split("/").pop()) problems.push(`${r.path}: name ${r.name}`);
  }
  const digest = JSON.parse(unzipEntry(path, "datapackage-digest.json").toString("utf8")) as { path: string; hash: string };
  if (digest.path !== "datapackage.json" || digest.hash !== sha256(dpBytes)) problems.push(`datapackage-digest.json ${JSON.stringify(digest)} does not match ${sha256(dpBytes)}`);
  return problems;
}

function checkPages(bytes: Buffer, problems: string[]): WaczContents["pages"] {
  const text = bytes.toString("utf8");
  if (!text.endsWith("\n")) problems.push("pages.jsonl does not end with a line end");
  const [header, ...rest] = text.split("\n").filter((l) => l !== "");
  if (header !== PAGES_HEADER) problems.push(`pages.jsonl header ${header}`);
  const pages = rest.map((l) => JSON.parse(l) as WaczContents["pages"][number]);
  for (const p of pages) {
    if (!/^https?:\/\//.test(p.url)) problems.push(`page url ${p.url}`);
    if (!/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/.test(p.ts)) problems.push(`page ts ${p.ts} is not RFC 3339 UTC`);
  }
  return pages;
}

/** The CDXJ lines of index.cdx.gz, checking index.idx's blocks against them. */
function indexLines(cdxGz: Buffer, idx: Buffer, problems: string[]): CdxjLine[] {
  const idxLines = idx.toString("utf8").split("\n").filter((l) => l !== "");
  if (idxLines[0] !== '!meta 0 {"format": "cdxj-gzip-1.0", "filename": "index.cdx.gz"}') problems.push(`index.idx first line ${idxLines[0]}`);
  const lines: CdxjLine[] = [];
  let expect = 0;
  for (const bl of idxLines.slice(1)) {
    const brace = bl.indexOf(" {");
    const prefix = bl.slice(0, brace);
    const { offset, length } = JSON.parse(bl.slice(brace + 1)) as { offset: number; length: number };
    if (offset !== expect) problems.push(`index.idx block at ${offset}, expected ${expect}`);
    expect = offset + length;
    const text = gunzipSync(cdxGz.subarray(offset, offset + length)).toString("utf8");
    if (!text.startsWith(prefix + " ")) problems.push(`block at ${offset} starts with ${text.slice(0, 60)}, index.idx says ${prefix}`);
    for (const t of text.split("\n").filter((x) => x !== "")) {
      const [key, timestamp] = t.split(" ", 2) as [string, string];
      lines.push({ key, timestamp, json: JSON.parse(t.slice(key.length + timestamp.length + 2)) as Record<string, string>, text: t });
    }
  }
  if (expect !== cdxGz.length) problems.push(`index.idx covers ${expect} of index.cdx.gz's ${cdxGz.length} bytes`);
  for (let i = 1; i < lines.length; i++) if (Buffer.compare(Buffer.from(lines[i - 1]!.text + "\n"), Buffer.from(lines[i]!.text + "\n")) > 0) problems.push(`index not sorted at line ${i}`);
  return lines;
}

/** The record at the line's offset, read from the archive/ entry's bytes inside the ZIP. */
async function lineProblem(path: string, l: CdxjLine, byName: Map<string, ZipListing>): Promise<string | null> {
  const e = byName.get(`archive/${l.json.filename}`);
  if (!e) return `${l.text}: archive/${l.json.filename} is not in the ZIP`;
  const start = dataOffset(path, e.headerOffset) + Number(l.json.offset);
  const bytes = readAt(path, start, Number(l.json.length));
  let rec;
  try {
    rec = await WARCParser.parse([bytes], { keepHeadersCase: false });
  } catch (err) {
    return `${l.text}: no record at its offset (${(err as Error).message})`;
  }
  if (!rec) return `${l.text}: no record at its offset`;
  const uri = rec.warcHeaders.headers.get("warc-target-uri");
  const date = (rec.warcHeaders.headers.get("warc-date") ?? "").replace(/\D/g, "").slice(0, 14);
  if (uri !== l.json.url) return `${l.text}: the record there is for ${uri}`;
  if (date !== l.timestamp) return `${l.text}: the record there is dated ${date}`;
  return null;
}
