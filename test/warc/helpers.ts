/** Test helpers for the WARC writer: drafts, stream sources, and independent file readers. */
import { createHash, randomUUID } from "node:crypto";
import { createReadStream } from "node:fs";
import { mkdtemp, readFile, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable } from "node:stream";
import { gunzipSync } from "node:zlib";
import { WARCParser } from "warcio";
import { expect } from "vitest";
import { fixedClock } from "../../src/core/clock.js";
import { recordId, sequentialIds } from "../../src/core/ids.js";
import { silentLogger } from "../../src/core/log.js";
import { digestOf } from "../../src/warc/digest.js";
import type { BlockPart, RecordDraft, StreamSource, WarcType, WrittenRecord } from "../../src/warc/types.js";
import type { WarcinfoInfo } from "../../src/warc/warcinfo.js";
import { nodeWriterFs, type WarcFileHandle, type WarcWriterOptions, type WriterFs } from "../../src/warc/writer.js";

/** 2026-12-03T10:45:07.123456Z */
export const START = BigInt(Date.UTC(2026, 11, 3, 10, 45, 7, 123)) * 1000n + 456n;

export const INFO: WarcinfoInfo = {
  operator: "Web Archive Team <archive@example.org>",
  description: "Weekly news crawl",
  isPartOf: "news-2026-w49",
  robots: "classic",
  httpHeaderUserAgent: "Mozilla/5.0 (compatible; examplebot/2.0; +https://example.org/bot)",
  httpHeaderFrom: "archive@example.org",
  extra: {},
};

const dirs: string[] = [];
export async function tempDir(): Promise<string> {
  const d = await mkdtemp(join(tmpdir(), "lathe-warc-test-"));
  dirs.push(d);
  return d;
}
export async function removeTempDirs(): Promise<void> {
  await Promise.all(dirs.splice(0).map((d) => rm(d, { recursive: true, force: true })));
}

export function writerOpts(dir: string, over: Partial<WarcWriterOptions> = {}): WarcWriterOptions {
  return {
    dir,
    prefix: "lathe",
    gzip: true,
    version: "1.1",
    digest: "sha1",
    maxFileBytes: 1_000_000_000,
    idleRolloverMs: 0,
    durability: "rollover",
    warcinfo: INFO,
    software: "lathe/0.1.0",
    hostname: "crawl7.example.org",
    ip: "192.0.2.17",
    clock: fixedClock(START, 1000n),
    ids: sequentialIds(),
    log: silentLogger,
    ...over,
  };
}

/** A StreamSource over a buffer, delivered in small chunks (as a spool file would, only smaller). */
export function bufferSource(buf: Buffer, chunk = 1000, size = buf.length): StreamSource {
  return {
    size,
    createReadStream() {
      const parts: Buffer[] = [];
      for (let i = 0; i < buf.length; i += chunk) parts.push(buf.subarray(i, i + chunk));
      return Readable.from(parts);
    },
  };
}

/** A StreamSource over a file. */
export function fileSource(path: string, size: number): StreamSource {
  return { size, createReadStream: () => createReadStream(path) };
}

/** A record draft with a correct block digest; `parts` may be buffers or streams of buffers. */
export function makeDraft(
  type: Exclude<WarcType, "warcinfo">,
  uri: string,
  parts: Array<Buffer | { stream: Buffer; chunk?: number }>,
  extra: Array<[string, string]> = [],
): RecordDraft {
  const id = recordId(randomUUID());
  const bytes = parts.map((p) => (Buffer.isBuffer(p) ? p : p.stream));
  const block: BlockPart[] = parts.map((p) => (Buffer.isBuffer(p) ? p : bufferSource(p.stream, p.chunk)));
  return {
    type,
    id,
    fields: [
      ["WARC-Type", type],
      ["WARC-Record-ID", id],
      ["WARC-Date", "2026-12-03T10:45:06.850113Z"],
      ["WARC-Target-URI", uri],
      ...extra,
      ["WARC-Block-Digest", digestOf("sha1", ...bytes)],
      ["Content-Type", type === "request" ? "application/http;msgtype=request" : "application/http;msgtype=response"],
    ],
    block,
  };
}

/** A response + request group; `body` bytes as the response body (streamed). */
export function captureGroup(uri: string, body: Buffer): RecordDraft[] {
  const resp = makeDraft("response", uri, [Buffer.from(`HTTP/1.1 200 OK\r\nContent-Length: ${body.length}\r\n\r\n`), { stream: body, chunk: 4096 }]);
  const req = makeDraft("request", uri, [Buffer.from(`GET ${new URL(uri).pathname} HTTP/1.1\r\nHost: ${new URL(uri).host}\r\n\r\n`)], [["WARC-Concurrent-To", resp.id]]);
  return [resp, req];
}

export interface ParsedRecord {
  version: string;
  fields: Array<[string, string]>;
  block: Buffer;
  /** Bytes after the record's CRLF CRLF. */
  rest: Buffer;
}

/** Parse one record from bytes, checking Content-Length and the CRLF CRLF trailer. */
export function parseRecord(buf: Buffer): ParsedRecord {
  const end = buf.indexOf("\r\n\r\n");
  expect(end).toBeGreaterThan(0);
  const lines = buf.subarray(0, end).toString("utf8").split("\r\n");
  const version = lines.shift()!;
  const fields = lines.map((l): [string, string] => {
    const i = l.indexOf(": ");
    return [l.slice(0, i), l.slice(i + 2)];
  });
  const cl = Number(fields.find(([n]) => n === "Content-Length")![1]);
  const start = end + 4;
  const block = buf.subarray(start, start + cl);
  expect(block.length).toBe(cl);
  expect(buf.subarray(start + cl, start + cl + 4).toString("latin1")).toBe("\r\n\r\n");
  return { version, fields, block, rest: buf.subarray(start + cl + 4) };
}

export const get = (r: ParsedRecord, name: string) => r.fields.find(([n]) => n === name)?.[1];

/** Split a `.warc` into its records. */
export function splitPlain(buf: Buffer): Array<ParsedRecord & { offset: number; length: number }> {
  const out: Array<ParsedRecord & { offset: number; length: number }> = [];
  let off = 0;
  while (off < buf.length) {
    const r = parseRecord(buf.subarray(off));
    const total = buf.length - off - r.rest.length;
    out.push({ ...r, offset: off, length: total - 4 });
    off += total;
  }
  return out;
}

/**
 * Check a finished file against what the writer reported: exact member/record boundaries,
 * one record per member, warcinfo first and only there, WARC-Warcinfo-ID linkage, block digests.
 * Returns the parsed records in file order (warcinfo first).
 */
export async function verifyFile(path: string, written: WrittenRecord[], gzip = true): Promise<ParsedRecord[]> {
  const buf = await readFile(path);
  const records: ParsedRecord[] = [];
  const bounds: Array<[number, number]> = [];
  if (gzip) {
    // Members must tile the file: warcinfo at 0, each reported record starts where the last ended.
    // The warcinfo member ends where the first reported record starts; inflating each slice
    // below proves every slice is exactly one whole member.
    let off = written[0]?.offset ?? buf.length;
    bounds.push([0, off]);
    for (const w of written) {
      expect(w.offset).toBe(off);
      bounds.push([w.offset, w.length]);
      off = w.offset + w.length;
    }
    expect(off).toBe(buf.length);
    for (const [o, l] of bounds) {
      expect(buf[o]).toBe(0x1f);
      expect(buf[o + 1]).toBe(0x8b);
      const r = parseRecord(gunzipSync(buf.subarray(o, o + l)));
      expect(r.rest.length).toBe(0); // exactly one record in the member
      records.push(r);
    }
  } else {
    const all = splitPlain(buf);
    expect(all.length).toBe(written.length + 1);
    all.slice(1).forEach((r, i) => {
      expect(r.offset).toBe(written[i]!.offset);
      expect(r.length).toBe(written[i]!.length);
    });
    records.push(...all);
  }
  const [info, ...rest] = records;
  expect(get(info!, "WARC-Type")).toBe("warcinfo");
  expect(get(info!, "WARC-Filename")).toBe(path.split("/").pop());
  expect(get(info!, "WARC-Warcinfo-ID")).toBeUndefined();
  rest.forEach((r, i) => {
    expect(get(r, "WARC-Type")).not.toBe("warcinfo");
    expect(get(r, "WARC-Record-ID")).toBe(written[i]!.id);
    expect(get(r, "WARC-Warcinfo-ID")).toBe(get(info!, "WARC-Record-ID"));
    expect(written[i]!.filename).toBe(path.split("/").pop());
  });
  for (const r of records) {
    expect(r.fields.at(-1)![0]).toBe("Content-Length");
    expect(get(r, "WARC-Block-Digest")).toBe(digestOf("sha1", r.block));
  }
  await checkWithWarcio(path, records, gzip ? bounds : null);
  return records;
}

/** Read the file with npm warcio: same records, types, headers, lengths, digests, offsets. */
export async function checkWithWarcio(path: string, expected: ParsedRecord[], bounds: Array<[number, number]> | null): Promise<void> {
  const parser = new WARCParser(createReadStream(path), { parseHttp: false, keepHeadersCase: true });
  let i = 0;
  for await (const rec of parser) {
    const exp = expected[i]!;
    const offset = parser.offset;
    expect(rec.warcHeaders.protocol).toBe(exp.version);
    expect(rec.warcType).toBe(get(exp, "WARC-Type"));
    expect(rec.warcHeader("WARC-Record-ID")).toBe(get(exp, "WARC-Record-ID"));
    expect(rec.warcContentLength).toBe(exp.block.length);
    const block = Buffer.from(await rec.readFully(false));
    expect(block.equals(exp.block)).toBe(true);
    expect(digestOf("sha1", block)).toBe(rec.warcBlockDigest);
    if (bounds) {
      expect(offset).toBe(bounds[i]![0]);
      expect(parser.recordLength).toBe(bounds[i]![1]);
    }
    i++;
  }
  expect(i).toBe(expected.length);
}

export async function listDir(dir: string): Promise<string[]> {
  return (await readdir(dir)).sort();
}

export function sha1hex(b: Uint8Array): string {
  return createHash("sha1").update(b).digest("hex");
}

/** Deterministic pseudo-random (incompressible) bytes. */
export function noise(n: number, seed = 1): Buffer {
  const b = Buffer.alloc(n);
  let x = seed >>> 0 || 1;
  for (let i = 0; i < n; i++) {
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    b[i] = x & 0xff;
  }
  return b;
}

/** The real file system, with the writes (and fsyncs) to the files it opens going through `hooks`. */
export function interceptedFs(hooks: { write: (fh: WarcFileHandle, b: Uint8Array, o: number, l: number, pos: number) => Promise<{ bytesWritten: number }>; sync?: (fh: WarcFileHandle) => Promise<void> }): WriterFs {
  return {
    ...nodeWriterFs,
    async open(p, flags, mode) {
      const fh = await nodeWriterFs.open(p, flags, mode);
      const h: WarcFileHandle = {
        write: (b, o, l, pos) => hooks.write(fh, b, o, l, pos),
        sync: () => (hooks.sync ? hooks.sync(fh) : fh.sync()),
        truncate: (n) => fh.truncate(n),
        close: () => fh.close(),
      };
      return h;
    },
  };
}

/**
 * A file system whose WARC files accept only `budget` more bytes, then fail with `code` —
 * the way a filling disk behaves: the write that crosses the limit lands partly, the next one
 * fails. Everything else is the real file system.
 */
export function limitedFs() {
  const ctl: { budget: number | null; code: string; failSync: boolean } = { budget: null, code: "ENOSPC", failSync: false };
  const osError = (code: string) => Object.assign(new Error(`${code}: simulated, write`), { code });
  const fs = interceptedFs({
    async write(fh, b, o, l, pos) {
      if (ctl.budget === null) return fh.write(b, o, l, pos);
      if (ctl.budget <= 0) throw osError(ctl.code);
      const n = Math.min(l, ctl.budget);
      ctl.budget -= n;
      return fh.write(b, o, n, pos);
    },
    sync: (fh) => (ctl.failSync ? Promise.reject(osError("EIO")) : fh.sync()),
  });
  return { ctl, fs };
}
