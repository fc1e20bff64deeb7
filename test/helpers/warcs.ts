/**
 * Read WARCs back with the npm package `warcio` (an independent parser), and check every
 * record's digests ourselves with node:crypto.
 */
import { createReadStream, readdirSync } from "node:fs";
import { createHash } from "node:crypto";
import { join } from "node:path";
import { WARCParser } from "warcio";
import { base32 } from "../../src/warc/digest.js";

export interface ReadRecord {
  type: string;
  file: string;
  headers: Array<[string, string]>;
  get(name: string): string | undefined;
  getAll(name: string): string[];
  /** The whole block as stored. */
  block: Buffer;
  /** For application/http blocks: the head (through CRLF CRLF) and the body after it. */
  httpHead?: string;
  body?: Buffer;
}

function parseWarcHeaderText(text: string): Array<[string, string]> {
  const out: Array<[string, string]> = [];
  for (const line of text.split("\r\n").slice(1)) {
    if (!line) continue;
    const i = line.indexOf(":");
    out.push([line.slice(0, i), line.slice(i + 1).trim()]);
  }
  return out;
}

export async function readWarc(path: string): Promise<ReadRecord[]> {
  const parser = new WARCParser(createReadStream(path), { parseHttp: false, keepHeadersCase: true });
  const records: ReadRecord[] = [];
  for await (const rec of parser) {
    const block = Buffer.from(await rec.readFully(false));
    const headers = parseWarcHeaderText(rec.warcHeaders.toString());
    const r: ReadRecord = {
      type: rec.warcType,
      file: path,
      headers,
      get: (n) => headers.find(([k]) => k.toLowerCase() === n.toLowerCase())?.[1],
      getAll: (n) => headers.filter(([k]) => k.toLowerCase() === n.toLowerCase()).map(([, v]) => v),
      block,
    };
    if (String(r.get("Content-Type")).startsWith("application/http")) {
      const end = block.indexOf("\r\n\r\n");
      r.httpHead = block.subarray(0, end + 4).toString("latin1");
      r.body = block.subarray(end + 4);
    }
    records.push(r);
  }
  return records;
}

export function warcFiles(dir: string): string[] {
  return readdirSync(dir)
    .filter((f) => /\.warc(\.gz)?$/.test(f))
    .sort()
    .map((f) => join(dir, f));
}

export async function readAllWarcs(dir: string): Promise<ReadRecord[]> {
  const out: ReadRecord[] = [];
  for (const f of warcFiles(dir)) out.push(...(await readWarc(f)));
  return out;
}

export function digestString(alg: "sha1" | "sha256", data: Uint8Array): string {
  const d = createHash(alg).update(data).digest();
  return alg === "sha1" ? `sha1:${base32(d)}` : `sha256:${d.toString("hex")}`;
}

/** Recompute block and payload digests; returns a list of problems (empty = all good). */
export function checkDigests(r: ReadRecord): string[] {
  const problems: string[] = [];
  const bd = r.get("WARC-Block-Digest");
  if (!bd) problems.push(`${r.type} has no WARC-Block-Digest`);
  else {
    const alg = bd.split(":")[0] as "sha1" | "sha256";
    if (digestString(alg, r.block) !== bd) problems.push(`${r.type} ${r.get("WARC-Target-URI")}: block digest mismatch`);
  }
  const pd = r.get("WARC-Payload-Digest");
  if (pd && r.type !== "revisit") {
    const alg = pd.split(":")[0] as "sha1" | "sha256";
    const payload = r.body ?? r.block;
    if (digestString(alg, payload) !== pd) problems.push(`${r.type} ${r.get("WARC-Target-URI")}: payload digest mismatch`);
  }
  if (Number(r.get("Content-Length")) !== r.block.length) problems.push(`${r.type}: Content-Length ${r.get("Content-Length")} != block ${r.block.length}`);
  return problems;
}

/** The capture records (response + request) for a URI, checking their linkage. */
export function captureOf(records: ReadRecord[], uri: string): { response: ReadRecord; request: ReadRecord } {
  const response = records.find((r) => r.type === "response" && r.get("WARC-Target-URI") === uri);
  if (!response) throw new Error(`no response record for ${uri}; have: ${records.map((r) => `${r.type} ${r.get("WARC-Target-URI")}`).join(", ")}`);
  const id = response.get("WARC-Record-ID");
  const request = records.find((r) => r.type === "request" && r.getAll("WARC-Concurrent-To").includes(id!));
  if (!request) throw new Error(`no request record concurrent to ${id} (${uri})`);
  return { response, request };
}
