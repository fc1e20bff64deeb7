import { randomBytes } from "node:crypto";
import { Readable } from "node:stream";
import { describe, expect, it } from "vitest";
import { captureFacts, HYBRID_MIN_PAYLOAD_BYTES, needsSample, readSample, routeCapture, type CaptureFacts, type SeriesKind } from "../../src/warc/routing.js";
import type { RecordDraft, StreamSource } from "../../src/warc/types.js";

const BIG = HYBRID_MIN_PAYLOAD_BYTES;
const random = randomBytes(4096);
const text = Buffer.from("<html><body><p>hello archive</p></body></html>\n".repeat(100)).subarray(0, 4096);

describe("routeCapture: type, encoding, size, incompressibility → series", () => {
  const row = (recordType: string | null, contentType: string | null, contentEncoding: string[], payloadBytes: number, sample: Uint8Array | null): CaptureFacts => ({ recordType, contentType, contentEncoding, payloadBytes, sample });
  const table: Array<[string, CaptureFacts, SeriesKind]> = [
    ["JPEG", row("response", "image/jpeg", [], BIG, null), "plain"],
    ["PNG", row("response", "image/png", [], 5 * BIG, null), "plain"],
    ["WebP", row("response", "image/webp", [], BIG, null), "plain"],
    ["GIF", row("response", "image/gif", [], BIG, null), "plain"],
    ["AVIF", row("response", "image/avif", [], BIG, null), "plain"],
    ["SVG is text", row("response", "image/svg+xml", [], BIG, null), "gzip"],
    ["BMP is raw pixels", row("response", "image/bmp", [], BIG, null), "gzip"],
    ["ICO holds bitmaps", row("response", "image/x-icon", [], BIG, null), "gzip"],
    ["MP4", row("response", "video/mp4", [], 100 * BIG, null), "plain"],
    ["WebM", row("response", "video/webm", [], BIG, null), "plain"],
    ["MPEG audio", row("response", "audio/mpeg", [], BIG, null), "plain"],
    ["Opus", row("response", "audio/ogg", [], BIG, null), "plain"],
    ["WAV is PCM", row("response", "audio/wav", [], BIG, null), "gzip"],
    ["WOFF2", row("response", "font/woff2", [], BIG, null), "plain"],
    ["legacy WOFF type", row("response", "application/font-woff", [], BIG, null), "plain"],
    ["TTF compresses", row("response", "font/ttf", [], BIG, null), "gzip"],
    ["ZIP", row("response", "application/zip", [], BIG, null), "plain"],
    ["gzip file", row("response", "application/gzip", [], BIG, null), "plain"],
    ["7z", row("response", "application/x-7z-compressed", [], BIG, null), "plain"],
    ["RAR", row("response", "application/vnd.rar", [], BIG, null), "plain"],
    ["XZ", row("response", "application/x-xz", [], BIG, null), "plain"],
    ["Zstandard", row("response", "application/zstd", [], BIG, null), "plain"],
    ["PDF", row("response", "application/pdf", [], BIG, null), "plain"],
    ["DOCX", row("response", "application/vnd.openxmlformats-officedocument.wordprocessingml.document", [], BIG, null), "plain"],
    ["ODT", row("response", "application/vnd.oasis.opendocument.text", [], BIG, null), "plain"],
    ["EPUB", row("response", "application/epub+zip", [], BIG, null), "plain"],
    ["HTML", row("response", "text/html", [], 10 * BIG, null), "gzip"],
    ["JS", row("response", "text/javascript", [], 10 * BIG, random), "gzip"],
    ["JSON", row("response", "application/json", [], BIG, null), "gzip"],
    ["WebAssembly", row("response", "application/wasm", [], BIG, null), "gzip"],
    ["HTML, gzip-encoded", row("response", "text/html", ["gzip"], BIG, null), "plain"],
    ["CSS, Brotli-encoded", row("response", "text/css", ["br"], BIG, null), "plain"],
    ["JS, zstd-encoded", row("response", "text/javascript", ["zstd"], BIG, null), "plain"],
    ["deflate-encoded", row("response", "text/plain", ["deflate"], BIG, null), "plain"],
    ["unknown coding", row("response", "text/plain", ["x-custom"], BIG, null), "gzip"],
    ["small JPEG: headers dominate", row("response", "image/jpeg", [], BIG - 1, null), "gzip"],
    ["small gzip-encoded", row("response", "text/html", ["gzip"], 200, null), "gzip"],
    ["octet-stream, random bytes", row("response", "application/octet-stream", [], BIG, random), "plain"],
    ["octet-stream, text bytes", row("response", "application/octet-stream", [], BIG, text), "gzip"],
    ["no type, random bytes", row("response", null, [], BIG, random), "plain"],
    ["no type, no sample: in doubt", row("response", null, [], BIG, null), "gzip"],
    ["generic, tiny sample: in doubt", row("response", "application/octet-stream", [], BIG, random.subarray(0, 100)), "gzip"],
    ["revisit", row("revisit", "image/jpeg", [], 100 * BIG, null), "gzip"],
    ["resource record (screenshot)", row("resource", "image/png", [], BIG, null), "plain"],
    ["metadata only", row("metadata", null, [], BIG, null), "gzip"],
    ["nothing", row(null, null, [], 0, null), "gzip"],
  ];

  it.each(table)("%s", (_name, facts, series) => {
    expect(routeCapture(facts).series).toBe(series);
  });

  it("asks for a sample only where the first bytes decide", () => {
    expect(needsSample(row("response", "application/octet-stream", [], BIG, null))).toBe(true);
    expect(needsSample(row("response", null, [], BIG, null))).toBe(true);
    expect(needsSample(row("response", "image/png", [], BIG, null))).toBe(false);
    expect(needsSample(row("response", "application/octet-stream", [], 10, null))).toBe(false);
  });
});

describe("captureFacts: what a group says about its payload", () => {
  const response = (head: string, body: StreamSource | Uint8Array): RecordDraft => ({
    type: "response",
    id: "<urn:uuid:1>",
    fields: [["Content-Type", "application/http;msgtype=response"]],
    block: [Buffer.from(head), body],
  });
  const request: RecordDraft = { type: "request", id: "<urn:uuid:2>", fields: [], block: [Buffer.from("GET / HTTP/1.1\r\n\r\n")] };
  const onDisk = (b: Buffer): StreamSource => ({ size: b.length, createReadStream: () => Readable.from([b.subarray(0, 1000), b.subarray(1000)]) });

  it("reads type and codings from the HTTP head, size from the parts, a sample from memory", () => {
    const body = randomBytes(BIG);
    const f = captureFacts([request, response("HTTP/1.1 200 OK\r\nContent-Type: Image/JPEG; q=1\r\nContent-Encoding: identity, GZIP\r\n\r\n", body)]);
    expect(f).toMatchObject({ recordType: "response", contentType: "image/jpeg", contentEncoding: ["gzip"], payloadBytes: BIG, source: null });
    expect(Buffer.from(f.sample!).equals(body.subarray(0, 4096))).toBe(true);
  });

  it("points at the spooled part when the sample is on disk, and reads it", async () => {
    const body = randomBytes(BIG);
    const f = captureFacts([response("HTTP/1.1 200 OK\r\n\r\n", onDisk(body))]);
    expect(f.sample).toBeNull();
    expect(f.contentType).toBeNull();
    expect(needsSample(f)).toBe(true);
    expect(Buffer.from(await readSample(f.source!)).equals(body.subarray(0, 4096))).toBe(true);
  });

  it("a revisit group has no payload to route; a resource is routed by its record's type", () => {
    expect(captureFacts([{ type: "revisit", id: "<urn:uuid:3>", fields: [], block: [Buffer.from("HTTP/1.1 200 OK\r\n\r\n")] }]).recordType).toBe("revisit");
    const shot: RecordDraft = { type: "resource", id: "<urn:uuid:4>", fields: [["Content-Type", "image/png"]], block: [randomBytes(BIG)] };
    expect(routeCapture(captureFacts([shot])).series).toBe("plain");
  });
});
