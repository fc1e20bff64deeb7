/**
 * CDXJ and CDX-11 index lines for WARC records (issue "CDXJ index"; cdxj-and-surt.md §2–§7):
 * byte for byte what `cdxj-indexer --sort --post-append` writes, except that a record without
 * WARC-Payload-Digest gets the SHA-1 of its payload (§2: the reference's `--post-append` run
 * hashes an already-consumed stream and writes the digest of nothing).
 *
 * The line builders are pure; `indexWarc` reads one file with the WARC reader, pairs adjacent
 * request/response records for POST/PUT keys (§4) and yields one entry per indexable record.
 */
import { createHash } from "node:crypto";
import { basename } from "node:path";
import { gunzipSync, inflateRawSync, inflateSync, constants as zc } from "node:zlib";
import { Dechunker } from "../capture/dechunk.js";
import { base32 } from "../warc/digest.js";
import { readWarcRecords, type HttpHead, type ReadWarcOptions, type WarcRecord } from "../warc/reader.js";
import { methodQuery } from "./postQuery.js";
import { surt } from "./surt.js";

/** One index line before formatting; JSON members in the reference's order, absent ones undefined. */
export interface IndexEntry {
  key: string;
  timestamp: string;
  url?: string;
  mime?: string;
  status?: string;
  digest?: string;
  length: string;
  offset: string;
  filename: string;
  /** POST/PUT only; null when the request's Content-Length did not parse (the reference writes null). */
  requestBody?: string | null;
  method?: string;
}

/** What a paired POST/PUT request adds to its response's line. */
export interface PostAppend {
  /** The SURT key of URI + `__wb_method=…` + body query. */
  key: string;
  requestBody: string | null;
  /** Upper-cased method. */
  method: string;
}

export const CDX11_HEADER = " CDX N b a m s k r M S V g";

const INDEXED_TYPES = new Set(["response", "revisit", "resource", "metadata"]);

// ---------------------------------------------------------------------------------------------
// Pure rules.

/** §3: default record types, minus Heritrix-style `application/warc-fields` resources/metadata. */
export function isIndexed(rec: Pick<WarcRecord, "warcType" | "get">): boolean {
  if (!INDEXED_TYPES.has(rec.warcType)) return false;
  if ((rec.warcType === "resource" || rec.warcType === "metadata") && rec.get("content-type") === "application/warc-fields") return false;
  return true;
}

/**
 * warcio parses an HTTP head only for response/request/revisit records of `http:`/`https:`
 * URIs; a `dns:` response therefore has neither `mime` nor `status`.
 */
export function httpHeadOf(rec: WarcRecord): HttpHead | null {
  const t = rec.warcType;
  if (t !== "response" && t !== "request" && t !== "revisit") return null;
  const uri = rec.targetUri;
  if (uri === null || !(uri.startsWith("http:") || uri.startsWith("https:"))) return null;
  return rec.httpHead();
}

/** `WARC-Date` → `YYYYMMDDhhmmss` (warcio's iso_date_to_timestamp: the digit groups, fraction dropped). */
export function warcDateToTimestamp(date: string | null): string {
  if (date === null) return "-";
  // The usual `YYYY-MM-DDThh:mm:ss…`: its six groups already have the widths the rule pads to
  // (sliced at their fixed places: no match array).
  if (RE_W3C_SECONDS.test(date)) return date.slice(0, 4) + date.slice(5, 7) + date.slice(8, 10) + date.slice(11, 13) + date.slice(14, 16) + date.slice(17, 19);
  const nums = date.split(/\D/);
  if (nums[nums.length - 1] === "") nums.pop();
  const n = nums.slice(0, 6).map((x) => Number(x || "0"));
  while (n.length < 6) n.push(n.length < 3 ? 1 : 0);
  return String(n[0]).padStart(4, "0") + n.slice(1).map((x) => String(x).padStart(2, "0")).join("");
}

/** `YYYY-MM-DDThh:mm:ss`, then a non-digit or the end (a seventh digit would make the seconds longer). */
const RE_W3C_SECONDS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?!\d)/;

/** The `mime` member: cut at the first `;` or whitespace, then trimmed; "" stays "". */
export function mimeValue(value: string | null): string | undefined {
  if (value === null) return undefined;
  return value.split(/[;\s]/, 1)[0]!.trim();
}

/** warcio's `get_statuscode`: the first word after the protocol of the status line. */
export function statusCode(startLine: string): string {
  let rest: string;
  if (startLine.startsWith("HTTP/1.0") || startLine.startsWith("HTTP/1.1")) rest = startLine.slice(8);
  else {
    const sp = startLine.indexOf(" ");
    rest = sp < 0 ? "" : startLine.slice(sp + 1);
  }
  const words = rest.trim();
  const sp = words.indexOf(" ");
  return sp < 0 ? words : words.slice(0, sp);
}

/**
 * §4: a request and a response pair when adjacent, with the same WARC-Target-URI, the second
 * naming the first in WARC-Concurrent-To (either order; revisits never pair).
 */
export function pairOf(a: WarcRecord | null, b: WarcRecord): { req: WarcRecord; resp: WarcRecord } | null {
  if (!a) return null;
  if (a.get("warc-target-uri") !== b.get("warc-target-uri")) return null;
  if (b.get("warc-concurrent-to") !== a.recordId) return null;
  if (a.warcType === "response" && b.warcType === "request") return { req: b, resp: a };
  if (a.warcType === "request" && b.warcType === "response") return { req: a, resp: b };
  return null;
}

const UTF8_STRICT = new TextDecoder("utf-8", { fatal: true });

/** HTTP header values were read as latin1; warcio reads each line as UTF-8 when it decodes. */
function redecode(v: string | null): string | null {
  if (v === null || !/[\x80-\xff]/.test(v)) return v;
  try {
    return UTF8_STRICT.decode(Buffer.from(v, "latin1"));
  } catch {
    return v;
  }
}

/** The entry of an indexable record, given its payload digest (header or computed) and POST data. */
export function buildEntry(rec: WarcRecord, filename: string, digest: string, post: PostAppend | null): IndexEntry {
  const head = httpHeadOf(rec);
  const url = rec.targetUri ?? undefined;
  let mime: string | undefined;
  if (rec.warcType === "revisit") mime = "warc/revisit";
  else if (rec.warcType === "response" || rec.warcType === "request") mime = mimeValue(head ? redecode(head.get("content-type")) : null);
  else mime = mimeValue(rec.get("content-type"));
  const e: IndexEntry = {
    key: post ? post.key : surt(rec.targetUri),
    timestamp: warcDateToTimestamp(rec.date),
    length: String(rec.length),
    offset: String(rec.offset),
    filename,
    digest,
  };
  if (url !== undefined) e.url = url;
  if (mime !== undefined) e.mime = mime;
  if (head && (rec.warcType === "response" || rec.warcType === "revisit")) e.status = statusCode(head.startLine);
  if (post) {
    e.requestBody = post.requestBody;
    e.method = post.method;
  }
  return e;
}

/** `KEY TIMESTAMP {JSON}` + LF, JSON as Python's json.dumps writes it. */
export function formatCdxj(e: IndexEntry): string {
  // Member by member in the reference's order, not a loop over the names: e[k] with a key
  // changing at each step is a slow (megamorphic) load, and every indexed record has a line.
  let json = "";
  if (e.url !== undefined) json = withMember(json, "url", e.url);
  if (e.mime !== undefined) json = withMember(json, "mime", e.mime);
  if (e.status !== undefined) json = withMember(json, "status", e.status);
  if (e.digest !== undefined) json = withMember(json, "digest", e.digest);
  if (e.length !== undefined) json = withMember(json, "length", e.length);
  if (e.offset !== undefined) json = withMember(json, "offset", e.offset);
  if (e.filename !== undefined) json = withMember(json, "filename", e.filename);
  if (e.requestBody !== undefined) json = withMember(json, "requestBody", e.requestBody);
  if (e.method !== undefined) json = withMember(json, "method", e.method);
  return `${e.key} ${e.timestamp} {${json}}\n`;
}

const withMember = (json: string, name: string, v: string | null): string => `${json === "" ? "" : `${json}, `}"${name}": ${v === null ? "null" : pyJsonString(v)}`;

/** Classic 11 fields (§7); a missing value is `-`, the digest loses its `sha1:` prefix. */
export function formatCdx11(e: IndexEntry): string {
  const digest = e.digest === undefined ? "-" : e.digest.slice(e.digest.lastIndexOf(":") + 1);
  const f = [e.key, e.timestamp, e.url ?? "-", e.mime ?? "-", e.status ?? "-", digest, "-", "-", e.length, e.offset, e.filename];
  return f.join(" ") + "\n";
}

/** What pyJsonString escapes: `"`, `\\`, controls, beyond ASCII (DEL is kept). */
const RE_JSON_ESCAPED = /[\x00-\x1f"\\\u0080-\uffff]/;

/** A JSON string literal as Python's json.dumps (ensure_ascii) writes it: `\uXXXX` beyond ASCII. */
export function pyJsonString(s: string): string {
  if (!RE_JSON_ESCAPED.test(s)) return '"' + s + '"';
  let out = '"';
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c === 0x22) out += '\\"';
    else if (c === 0x5c) out += "\\\\";
    else if (c === 0x0a) out += "\\n";
    else if (c === 0x0d) out += "\\r";
    else if (c === 0x09) out += "\\t";
    else if (c === 0x08) out += "\\b";
    else if (c === 0x0c) out += "\\f";
    else if (c < 0x20 || c > 0x7f) out += "\\u" + c.toString(16).padStart(4, "0"); // DEL is ASCII: kept
    else out += s[i];
  }
  return out + '"';
}

/**
 * §6: whole lines in code-point order (= UTF-8 byte order), identical lines once. JS `<`
 * compares UTF-16 units, which differs from code points only beyond U+FFFF, so such lines
 * are compared as bytes.
 */
export function compareLines(a: string, b: string): number {
  if (a === b) return 0;
  if (RE_SURROGATE.test(a) || RE_SURROGATE.test(b)) return Buffer.compare(Buffer.from(a, "utf8"), Buffer.from(b, "utf8"));
  return a < b ? -1 : 1;
}

const RE_SURROGATE = /[\ud800-\udfff]/;

/** compareLines where no line has a surrogate: each line looked at once, not at every comparison. */
const compareUtf16 = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

export function sortLines(lines: Iterable<string>): string[] {
  const sorted = [...lines];
  sorted.sort(sorted.some((l) => RE_SURROGATE.test(l)) ? compareLines : compareUtf16);
  let n = 0;
  for (let i = 0; i < sorted.length; i++) if (i === 0 || sorted[i] !== sorted[n - 1]) sorted[n++] = sorted[i]!;
  sorted.length = n;
  return sorted;
}

// ---------------------------------------------------------------------------------------------
// Reading records.

/** Bytes of the block after the HTTP head (the whole block without one), hashed as stored. */
export async function computedPayloadDigest(rec: WarcRecord): Promise<string> {
  const skip = httpHeadOf(rec)?.length ?? 0;
  const h = createHash("sha1");
  let seen = 0;
  for await (const chunk of rec.blockStream()) {
    const from = Math.max(0, skip - seen);
    if (from < chunk.length) h.update(from > 0 ? chunk.subarray(from) : chunk);
    seen += chunk.length;
  }
  return "sha1:" + base32(h.digest());
}

/** The request body as warcio's content_stream gives it: de-chunked, Content-Encoding removed. */
export function requestPayload(block: Buffer, head: HttpHead): Buffer {
  let body = block.subarray(head.length);
  if (head.get("transfer-encoding") === "chunked") body = dechunkLenient(body);
  const enc = head.get("content-encoding")?.toLowerCase();
  if (enc === "gzip" || enc === "x-gzip" || enc === "deflate") {
    try {
      const opts = { finishFlush: zc.Z_SYNC_FLUSH };
      body = enc === "deflate" ? inflateOrRaw(body) : gunzipSync(body, opts);
    } catch {
      // warcio falls back to the bytes as stored when they do not decompress.
    }
  }
  return body;
}

function inflateOrRaw(b: Buffer): Buffer {
  try {
    return inflateSync(b, { finishFlush: zc.Z_SYNC_FLUSH });
  } catch {
    return inflateRawSync(b, { finishFlush: zc.Z_SYNC_FLUSH });
  }
}

/** De-chunk; where the framing breaks, the rest is taken as it is (warcio's lenient reader). */
function dechunkLenient(b: Buffer): Buffer {
  const d = new Dechunker();
  const parts: Buffer[] = [];
  d.feed(b, (x) => parts.push(Buffer.from(x)));
  if (d.failed && d.error) {
    if (parts.length === 0) return b;
    parts.push(b.subarray(d.error.offset));
  }
  return Buffer.concat(parts);
}

/** §4: the key, requestBody and method a paired request gives its response (POST/PUT only). */
export async function postAppendFor(req: WarcRecord): Promise<PostAppend | null> {
  const head = httpHeadOf(req);
  if (!head || head.method === null) return null;
  const method = head.startLine.split(" ", 1)[0]!;
  const upper = method.toUpperCase();
  if (upper !== "POST" && upper !== "PUT") return null;
  const url = req.targetUri ?? "";
  const body = requestPayload(await req.readBlock(), head);
  const mq = methodQuery(method, redecode(head.get("content-type")), head.get("content-length"), body, url);
  return { key: surt(url + mq.append), requestBody: mq.query, method: upper };
}

export interface IndexWarcOptions extends ReadWarcOptions {
  /** The `filename` member; default the file's base name. */
  filename?: string;
  /** After each record: compressed bytes consumed so far. */
  onRecord?(position: number): void;
  /** Every record of the file (indexed or not), in file order, as it is read: a second consumer of the same pass (the WACZ packager's pages). */
  inspect?(rec: WarcRecord): void;
}

/** One entry per indexable record of `path`, in file order. */
export async function* indexWarc(path: string, opts: IndexWarcOptions = {}): AsyncGenerator<IndexEntry> {
  const { filename = basename(path), onRecord, inspect, ...readOpts } = opts;
  const reader = readWarcRecords(path, readOpts);
  const entry = async (rec: WarcRecord, req: WarcRecord | null): Promise<IndexEntry | null> => {
    if (!isIndexed(rec)) return null;
    const digest = rec.get("warc-payload-digest") || (await computedPayloadDigest(rec));
    const post = req ? await postAppendFor(req) : null;
    return buildEntry(rec, filename, digest, post);
  };
  // One record is held back: it may pair with the next one (§4).
  let prev: WarcRecord | null = null;
  for await (const rec of reader) {
    inspect?.(rec);
    const pair = pairOf(prev, rec);
    if (pair) {
      for (const r of [prev!, rec]) {
        const e = await entry(r, r === pair.resp ? pair.req : null);
        if (e) yield e;
      }
      prev = null;
    } else {
      if (prev) {
        const e = await entry(prev, null);
        if (e) yield e;
      }
      prev = rec;
    }
    onRecord?.(reader.position);
  }
  if (prev) {
    const e = await entry(prev, null);
    if (e) yield e;
  }
}
