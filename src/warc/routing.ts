/**
 * Hybrid compression (issue #24): which series a capture goes to. `gzip` (the `.warc.gz`
 * series) unless the payload is already compressed, when recompressing it saves nothing, costs
 * CPU at write and at every read, and stops a replay tool from seeking to a byte range: then
 * the `plain` series (`.warc`). Compressed when in doubt. Pure: facts in, series out.
 */
import { incompressible } from "./gzipMember.js";
import { parseHttpHead } from "./httpHead.js";
import type { BlockPart, RecordDraft, StreamSource } from "./types.js";

export type SeriesKind = "gzip" | "plain";

/**
 * Payloads below this go to the gzip series whatever they are: the records' headers (the WARC
 * header, the HTTP head, the request record that travels with the response) deflate to about
 * a third, and what the codec left (JPEG headers, small GIFs) deflates a little too. Measured
 * with scripts/bench-hybrid.mjs on a page-weight corpus: a capture in `.warc` costs 11–14% of
 * its payload more than in `.warc.gz` under 16 KiB, 3.5% at 16–64 KiB, 1% at 64–256 KiB, nothing
 * above; and small payloads gain nothing from `.warc` (no range to seek to, no deflate saved:
 * the gzip series stores them as stored blocks).
 */
export const HYBRID_MIN_PAYLOAD_BYTES = 64 * 1024;

/** What the routing looks at, read from a capture's main record. */
export interface CaptureFacts {
  /** `response`, `resource`, `revisit`, … of the group's main record; null for none. */
  recordType: string | null;
  /** Media type, lower case, without parameters; null when absent. */
  contentType: string | null;
  /** Content-Encoding codings, lower case, in order. */
  contentEncoding: string[];
  payloadBytes: number;
  /** The first bytes of the payload, when the decision needs them; null if not read. */
  sample: Uint8Array | null;
}

export interface Route {
  series: SeriesKind;
  /** Why, for logs and the table test. */
  reason: string;
}

/**
 * Types whose payload is already compressed, with why. Not listed, so compressed: SVG, BMP,
 * ICO (bitmaps), TIFF (mostly uncompressed), WAV/AIFF (PCM), TTF/OTF (WOFF's raw material,
 * deflate takes a third off), WebAssembly and JavaScript source maps (compress well).
 */
const COMPRESSED_TYPES: ReadonlyMap<string, string> = new Map([
  ...["image/jpeg", "image/pjpeg", "image/png", "image/apng", "image/gif", "image/webp", "image/avif", "image/heic", "image/heif", "image/jxl", "image/jp2"].map((t) => [t, "image codec"] as [string, string]),
  ...["font/woff", "font/woff2", "application/font-woff", "application/font-woff2", "application/x-font-woff"].map((t) => [t, "WOFF font (zlib or Brotli inside)"] as [string, string]),
  ...["application/zip", "application/x-zip-compressed", "application/gzip", "application/x-gzip", "application/x-7z-compressed", "application/vnd.rar", "application/x-rar-compressed", "application/x-xz", "application/zstd", "application/x-zstd", "application/x-bzip2", "application/x-brotli", "application/x-lzma"].map((t) => [t, "compressed archive"] as [string, string]),
  ...["application/epub+zip", "application/java-archive", "application/vnd.android.package-archive", "application/x-apple-diskimage"].map((t) => [t, "ZIP-based package"] as [string, string]),
  ["application/pdf", "PDF (its streams are Flate-compressed)"],
]);

/** Compressed prefixes: audio and video codecs, OOXML / ODF documents (ZIP files). */
const COMPRESSED_PREFIXES: ReadonlyArray<[string, string]> = [
  ["video/", "video codec"],
  ["application/vnd.openxmlformats-officedocument.", "Office document (a ZIP file)"],
  ["application/vnd.oasis.opendocument.", "OpenDocument (a ZIP file)"],
];

/** Audio is compressed except PCM and MIDI. */
const UNCOMPRESSED_AUDIO = new Set(["audio/wav", "audio/wave", "audio/x-wav", "audio/vnd.wave", "audio/aiff", "audio/x-aiff", "audio/basic", "audio/l16", "audio/midi", "audio/x-midi"]);

/** Types that say nothing about the bytes: the first bytes decide. */
const GENERIC_TYPES = new Set(["application/octet-stream", "binary/octet-stream", "application/unknown", "application/x-download", "application/force-download", "application/binary"]);

const ENCODED = new Set(["gzip", "x-gzip", "br", "zstd", "deflate", "compress", "x-compress"]);

/** The route of a capture (see the module comment), for payloads of `minBytes` or more. */
export function routeCapture(f: CaptureFacts, minBytes = HYBRID_MIN_PAYLOAD_BYTES): Route {
  if (f.recordType === "revisit") return { series: "gzip", reason: "revisit" };
  if (f.recordType !== "response" && f.recordType !== "resource") return { series: "gzip", reason: "no payload record" };
  if (f.payloadBytes < minBytes) return { series: "gzip", reason: `payload under ${minBytes} bytes` };
  const coding = f.contentEncoding.find((c) => ENCODED.has(c));
  if (coding) return { series: "plain", reason: `Content-Encoding ${coding}` };
  const t = f.contentType;
  const why = t === null ? undefined : (COMPRESSED_TYPES.get(t) ?? COMPRESSED_PREFIXES.find(([p]) => t.startsWith(p))?.[1]);
  if (why) return { series: "plain", reason: why };
  if (t?.startsWith("audio/") && !UNCOMPRESSED_AUDIO.has(t)) return { series: "plain", reason: "audio codec" };
  if (t === null || t === "" || GENERIC_TYPES.has(t)) {
    if (f.sample && incompressible(f.sample)) return { series: "plain", reason: "first bytes incompressible" };
    return { series: "gzip", reason: "generic type, first bytes compress" };
  }
  return { series: "gzip", reason: "compressible type" };
}

/** Whether the route of a capture with these facts depends on its first payload bytes. */
export function needsSample(f: CaptureFacts, minBytes = HYBRID_MIN_PAYLOAD_BYTES): boolean {
  return f.sample === null && routeCapture(f, minBytes).reason === "generic type, first bytes compress";
}

/** Bytes of payload the incompressibility check reads. */
export const SAMPLE_BYTES = 4096;

const mediaType = (v: string | null | undefined) => (v ? v.split(";")[0]!.trim().toLowerCase() : null);

/**
 * The facts of a group (the records of one capture): its response, revisit or resource, the
 * Content-Type and Content-Encoding of its HTTP head (or the record's Content-Type for a
 * resource), the payload size, and the first payload bytes when they are in memory. `source`
 * is the payload part to read the sample from when they are not.
 */
export function captureFacts(group: readonly RecordDraft[]): CaptureFacts & { source: StreamSource | null } {
  const main = group.find((d) => d.type === "response" || d.type === "revisit" || d.type === "resource");
  const none = { recordType: main?.type ?? null, contentType: null, contentEncoding: [], payloadBytes: 0, sample: null, source: null };
  if (!main || main.type === "revisit") return none;
  let payload: BlockPart[] = main.block;
  let contentType = mediaType(main.fields.find(([k]) => k.toLowerCase() === "content-type")?.[1]);
  let contentEncoding: string[] = [];
  if (main.type === "response") {
    const first = main.block[0];
    const head = first instanceof Uint8Array ? parseHttpHead(Buffer.from(first.buffer, first.byteOffset, first.byteLength)) : null;
    if (!head) return none;
    // The payload is what follows the head, in the same part or the next ones.
    const rest = (first as Uint8Array).subarray(head.length);
    payload = rest.byteLength > 0 ? [rest, ...main.block.slice(1)] : main.block.slice(1);
    contentType = mediaType(head.get("content-type"));
    contentEncoding = head.getAll("content-encoding").flatMap((v) => v.split(",")).map((c) => c.trim().toLowerCase()).filter((c) => c && c !== "identity");
  }
  const payloadBytes = payload.reduce((n, p) => n + (p instanceof Uint8Array ? p.byteLength : p.size), 0);
  const { sample, source } = firstBytes(payload);
  return { recordType: main.type, contentType, contentEncoding, payloadBytes, sample, source };
}

/** Up to SAMPLE_BYTES from the start of `payload` when in memory; else the part to read them from. */
function firstBytes(payload: BlockPart[]): { sample: Uint8Array | null; source: StreamSource | null } {
  const p = payload[0];
  if (p === undefined) return { sample: new Uint8Array(0), source: null };
  if (p instanceof Uint8Array) return { sample: p.subarray(0, SAMPLE_BYTES), source: null };
  const m = p.memory?.();
  if (!m) return { sample: null, source: p };
  const take: Uint8Array[] = [];
  let n = 0;
  for (const c of m) {
    if (n >= SAMPLE_BYTES) break;
    take.push(c.subarray(0, SAMPLE_BYTES - n));
    n += take[take.length - 1]!.byteLength;
  }
  return { sample: take.length === 1 ? take[0]! : Buffer.concat(take, n), source: null };
}

/** The first SAMPLE_BYTES of a spooled payload (the stream is dropped once they are in). */
export async function readSample(source: StreamSource): Promise<Uint8Array> {
  const chunks: Buffer[] = [];
  let n = 0;
  const stream = source.createReadStream();
  try {
    for await (const c of stream) {
      const b: Buffer = typeof c === "string" ? Buffer.from(c) : c;
      chunks.push(b);
      n += b.length;
      if (n >= SAMPLE_BYTES) break;
    }
  } finally {
    stream.destroy();
  }
  return Buffer.concat(chunks, n).subarray(0, SAMPLE_BYTES);
}
