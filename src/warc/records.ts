/**
 * Pure builders for the records of a capture (warc-records.md §2, §3; tls-and-resources.md A).
 * They produce RecordDrafts: fields in spec order, no WARC-Warcinfo-ID or Content-Length (the
 * writer adds those, it knows the file).
 */
import { createHash } from "node:crypto";
import { type WarcVersion, formatWarcDate } from "./date.js";
import { type DigestAlgorithm, digestOf } from "./digest.js";
import type { BlockPart, RecordDraft, StreamSource } from "./types.js";

export interface HttpBlock {
  head: Uint8Array;
  body: StreamSource | null;
  blockDigest: string;
  payloadDigest: string | null;
}

export interface CaptureMeta {
  /** µs since epoch; the instant the request head's first byte went upstream. */
  dateMicros: bigint;
  targetUri: string;
  ip?: string;
  /** e.g. ["http/1.1", "tls/1.3"], application first. */
  protocols: string[];
  cipherSuite?: string;
}

function blockOf(b: HttpBlock): BlockPart[] {
  return b.body && b.body.size > 0 ? [b.head, b.body] : [b.head];
}

function common(meta: CaptureMeta): Array<[string, string]> {
  const f: Array<[string, string]> = [];
  if (meta.ip) f.push(["WARC-IP-Address", meta.ip]);
  for (const p of meta.protocols) f.push(["WARC-Protocol", p]);
  if (meta.cipherSuite) f.push(["WARC-Cipher-Suite", meta.cipherSuite]);
  return f;
}

export function buildResponse(
  id: string,
  meta: CaptureMeta,
  http: HttpBlock & { truncated: string | null },
  version: WarcVersion,
): RecordDraft {
  const fields: Array<[string, string]> = [
    ["WARC-Type", "response"],
    ["WARC-Record-ID", id],
    ["WARC-Date", formatWarcDate(meta.dateMicros, version)],
    ["WARC-Target-URI", meta.targetUri],
    ...common(meta),
  ];
  if (http.truncated) fields.push(["WARC-Truncated", http.truncated]);
  fields.push(["WARC-Block-Digest", http.blockDigest]);
  if (http.payloadDigest) fields.push(["WARC-Payload-Digest", http.payloadDigest]);
  fields.push(["Content-Type", "application/http;msgtype=response"]);
  return { type: "response", id, fields, block: blockOf(http) };
}

export function buildRequest(
  id: string,
  concurrentTo: string,
  meta: CaptureMeta,
  http: HttpBlock & { truncated?: string | null },
  version: WarcVersion,
): RecordDraft {
  const fields: Array<[string, string]> = [
    ["WARC-Type", "request"],
    ["WARC-Record-ID", id],
    ["WARC-Date", formatWarcDate(meta.dateMicros, version)],
    ["WARC-Target-URI", meta.targetUri],
    ["WARC-Concurrent-To", concurrentTo],
    ...common(meta),
  ];
  // A request body cut short by its spool (issue #26) says so, as a response would.
  if (http.truncated) fields.push(["WARC-Truncated", http.truncated]);
  fields.push(["WARC-Block-Digest", http.blockDigest]);
  if (http.payloadDigest) fields.push(["WARC-Payload-Digest", http.payloadDigest]);
  fields.push(["Content-Type", "application/http;msgtype=request"]);
  return { type: "request", id, fields, block: blockOf(http) };
}

/** What lathe knows of one upstream TLS connection (tls-and-resources.md A). */
export interface TlsInfo {
  protocol?: string; // "tls/1.3"
  cipherSuite?: string; // IANA name
  serverName?: string;
  alpn?: string;
  sessionReused: boolean;
  verifyResult: string; // "ok" or the verifier's code
  chain: Uint8Array[]; // DER, leaf first
}

export function tlsFields(tls: TlsInfo): string {
  const lines: string[] = [];
  if (tls.protocol) lines.push(`tls-protocol: ${tls.protocol}`);
  if (tls.cipherSuite) lines.push(`tls-cipher-suite: ${tls.cipherSuite}`);
  if (tls.serverName) lines.push(`tls-server-name: ${tls.serverName}`);
  if (tls.alpn) lines.push(`tls-alpn: ${tls.alpn}`);
  lines.push(`tls-session-reused: ${tls.sessionReused}`);
  lines.push(`tls-verify-result: ${tls.verifyResult}`);
  for (const der of tls.chain) lines.push(`tls-certificate-sha256: ${createHash("sha256").update(der).digest("hex")}`);
  for (const der of tls.chain) lines.push(`tls-certificate: ${Buffer.from(der).toString("base64")}`);
  return lines.map((l) => l + "\r\n").join("");
}

export function buildTlsMetadata(
  id: string,
  concurrentTo: string,
  meta: CaptureMeta,
  tls: TlsInfo,
  version: WarcVersion,
  alg: DigestAlgorithm,
  clientProtocol?: string,
  notes: string[] = [],
): RecordDraft {
  // The protocol the client spoke to lathe on the tunnel the exchange came in on (http2.md §2.10):
  // not the recorded messages' protocol, which is the upstream leg's.
  const client = (clientProtocol ? `client-protocol: ${clientProtocol}\r\n` : "") + notes.map((n) => n + "\r\n").join("");
  const extra: Array<[string, string]> = [];
  if (tls.protocol) extra.push(["WARC-Protocol", tls.protocol]);
  if (tls.cipherSuite) extra.push(["WARC-Cipher-Suite", tls.cipherSuite]);
  return fieldsMetadata(id, concurrentTo, meta, tlsFields(tls) + client, extra, version, alg);
}

/**
 * What an h2 exchange had that its HTTP/1.1-form records cannot hold (http2.md §2.11, §2.12):
 * trailers (`trailer: Name: value`) and interim responses (`interim: 103`), in a metadata record
 * concurrent to the response.
 */
export function buildExchangeMetadata(
  id: string,
  concurrentTo: string,
  meta: CaptureMeta,
  extras: { interim: number[]; trailers: Array<[string, string]>; notes?: string[] },
  version: WarcVersion,
  alg: DigestAlgorithm,
): RecordDraft {
  const lines = [...extras.interim.map((s) => `interim: ${s}`), ...extras.trailers.map(([n, v]) => `trailer: ${n}: ${v}`), ...(extras.notes ?? [])];
  return fieldsMetadata(id, concurrentTo, meta, lines.map((l) => l + "\r\n").join(""), [], version, alg);
}

/** A `metadata` record of `application/warc-fields` about a capture (its response is `concurrentTo`). */
function fieldsMetadata(id: string, concurrentTo: string, meta: CaptureMeta, text: string, extra: Array<[string, string]>, version: WarcVersion, alg: DigestAlgorithm): RecordDraft {
  const body = Buffer.from(text, "latin1");
  const fields: Array<[string, string]> = [
    ["WARC-Type", "metadata"],
    ["WARC-Record-ID", id],
    ["WARC-Date", formatWarcDate(meta.dateMicros, version)],
    ["WARC-Target-URI", meta.targetUri],
    ["WARC-Concurrent-To", concurrentTo],
  ];
  if (meta.ip) fields.push(["WARC-IP-Address", meta.ip]);
  fields.push(...extra, ["WARC-Block-Digest", digestOf(alg, body)], ["Content-Type", "application/warc-fields"]);
  return { type: "metadata", id, fields, block: [body] };
}

export const REVISIT_PROFILES = {
  "identical-payload-digest": {
    "1.0": "http://netpreserve.org/warc/1.0/revisit/identical-payload-digest",
    "1.1": "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest",
  },
  "server-not-modified": {
    "1.0": "http://netpreserve.org/warc/1.0/revisit/server-not-modified",
    "1.1": "http://netpreserve.org/warc/1.1/revisit/server-not-modified",
  },
} as const;

export interface RevisitOf {
  profile: keyof typeof REVISIT_PROFILES;
  /** The original's WARC-Record-ID, when known. */
  refersTo: string | null;
  refersToTargetUri: string;
  /** The original's WARC-Date, verbatim. */
  refersToDate: string;
  /** The original's payload digest (the same bytes as this capture's, for identical-payload-digest). */
  payloadDigest: string;
}

/**
 * A `revisit` (warc-records.md §4): the new response's head exactly as a response record would
 * store it, no body; Refers-To trio of the original; `WARC-Truncated: length` when the profile
 * is identical-payload-digest (a block is kept, the payload is not).
 */
export function buildRevisit(
  id: string,
  meta: CaptureMeta,
  head: Uint8Array,
  blockDigest: string,
  of: RevisitOf,
  version: WarcVersion,
): RecordDraft {
  const fields: Array<[string, string]> = [
    ["WARC-Type", "revisit"],
    ["WARC-Record-ID", id],
    ["WARC-Date", formatWarcDate(meta.dateMicros, version)],
    ["WARC-Target-URI", meta.targetUri],
  ];
  if (of.refersTo) fields.push(["WARC-Refers-To", of.refersTo]);
  fields.push(
    ["WARC-Refers-To-Target-URI", of.refersToTargetUri],
    // A WARC/1.0 file has no fractional seconds (1.0 §5.4).
    ["WARC-Refers-To-Date", version === "1.0" ? of.refersToDate.replace(/\.\d+Z$/, "Z") : of.refersToDate],
    ["WARC-Profile", REVISIT_PROFILES[of.profile][version]],
    ...common(meta),
  );
  if (of.profile === "identical-payload-digest") fields.push(["WARC-Truncated", "length"]);
  fields.push(
    ["WARC-Block-Digest", blockDigest],
    ["WARC-Payload-Digest", of.payloadDigest],
    ["Content-Type", "application/http;msgtype=response"],
  );
  return { type: "revisit", id, fields, block: [head] };
}

/** WARC-JSON-Metadata of an associated resource (tls-and-resources.md B.2), in its key order. */
export interface ResourceContext {
  kind?: string;
  variant?: string;
  mode: "same-transaction" | "parallel" | "replay";
  capturedAt?: string;
  browser?: { name?: string; version?: string; userAgent?: string };
  viewport?: { width?: number; height?: number; deviceScaleFactor?: number };
  page?: { url?: string; recordId?: string };
  tool?: string;
  extra?: Record<string, unknown>;
}

export function resourceJson(c: ResourceContext): string {
  const ordered: Record<string, unknown> = {};
  for (const k of ["kind", "variant", "mode", "capturedAt", "browser", "viewport", "page", "tool", "extra"] as const) {
    if (c[k] !== undefined) ordered[k] = c[k];
  }
  return JSON.stringify(ordered);
}

/**
 * A `resource` (or `metadata`) record for bytes a crawler pushed (screenshots, video, yt-dlp JSON):
 * block = the bytes verbatim, both digests over them; linked to its page record when known
 * (WARC-Concurrent-To and the page's WARC-Date: one capture event, tls-and-resources.md B.2).
 */
export function buildResource(
  id: string,
  o: {
    type: "resource" | "metadata" | "conversion";
    targetUri: string;
    dateMicros: bigint;
    /** The page record's WARC-Date when linked (used verbatim). */
    pageDate?: string;
    concurrentTo?: string;
    contentType: string;
    body: StreamSource | Uint8Array;
    blockDigest: string;
    context?: ResourceContext;
  },
  version: WarcVersion,
): RecordDraft {
  const fields: Array<[string, string]> = [
    ["WARC-Type", o.type],
    ["WARC-Record-ID", id],
    ["WARC-Date", o.pageDate ?? formatWarcDate(o.dateMicros, version)],
    ["WARC-Target-URI", o.targetUri],
  ];
  if (o.concurrentTo) fields.push(["WARC-Concurrent-To", o.concurrentTo]);
  fields.push(["WARC-Block-Digest", o.blockDigest], ["WARC-Payload-Digest", o.blockDigest]);
  if (o.context) fields.push(["WARC-JSON-Metadata", resourceJson(o.context)]);
  fields.push(["Content-Type", o.contentType]);
  const size = o.body instanceof Uint8Array ? o.body.byteLength : o.body.size;
  return { type: o.type, id, fields, block: size > 0 ? [o.body] : [] };
}
