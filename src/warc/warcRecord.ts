/**
 * One record as the reader yields it: where it lies on disk, its WARC header fields, and its
 * block — kept whole in memory when small (a view of the inflated member or of the read
 * buffer, so the record stays usable after the iteration moves on), else only its first bytes,
 * the rest read again from the file on demand.
 */
import { createReadStream } from "node:fs";
import { createGunzip } from "node:zlib";
import { fieldGetter, type ParsedFields } from "./headerFields.js";
import { parseHttpHead, type HttpHead } from "./httpHead.js";
import { WarcReadError } from "./readProblems.js";

const MIB = 1024 * 1024;

export interface WarcRecord {
  /** Path as given to readWarcRecords. */
  readonly file: string;
  /** File offset of the record: its gzip member (gzip), or its `WARC/` line (plain). */
  readonly offset: number;
  /** Bytes on disk: the gzip member(s) holding it, or header + block without the trailer (plain). */
  readonly length: number;
  /** True when the record is exactly one gzip member (always true for plain files). */
  readonly aligned: boolean;
  /** e.g. `WARC/1.1`. */
  readonly version: string;
  /** Header fields in file order, names and values as written (values trimmed). */
  readonly headers: ReadonlyArray<readonly [string, string]>;
  /** WARC-Type value ("" when absent). */
  readonly warcType: string;
  readonly contentLength: number;
  /** WARC-Target-URI with `<...>` stripped (wget 1.19 writes them); null when absent. */
  readonly targetUri: string | null;
  /** WARC-Date, WARC-Record-ID verbatim; null when absent. */
  readonly date: string | null;
  readonly recordId: string | null;
  /** Bytes of the WARC header section, its blank line included. */
  readonly headerLength: number;
  /** False when the block is not followed by CRLF CRLF. */
  readonly trailerOk: boolean;
  /** The whole block when it was kept in memory, else its first bytes. */
  readonly blockPrefix: Buffer;
  /** True when `blockPrefix` is the whole block. */
  readonly blockKept: boolean;
  /** First value of a WARC header field (case-insensitive), or null. */
  get(name: string): string | null;
  getAll(name: string): string[];
  /**
   * The HTTP head of an `application/http` block (response, request, revisit with a block),
   * parsed from the block's first bytes; null when the block does not hold one.
   */
  httpHead(): HttpHead | null;
  /** The whole block. Kept blocks come from memory; large ones are read again from the file. */
  readBlock(): Promise<Buffer>;
  /** The block as chunks (streams large blocks from the file). */
  blockStream(): AsyncGenerator<Buffer>;
}

/** What the record parser found; `warcRecord` makes it a `WarcRecord`. */
export interface RecordInit {
  file: string;
  gzip: boolean;
  offset: number;
  length: number;
  aligned: boolean;
  fields: ParsedFields;
  contentLength: number;
  headerLength: number;
  trailerOk: boolean;
  block: Buffer;
  blockKept: boolean;
  /** Where to find the block again: plain = file position; gzip = member start + decompressed skip. */
  reread: { cstart: number; skip: number };
}

/** A block that holds an HTTP head (what `httpHead()` parses): `application/http`, or a response, request or revisit. */
export function holdsHttpHead(warcType: string, contentType: string | null): boolean {
  return (contentType !== null && /^application\/http/i.test(contentType)) || warcType === "response" || warcType === "request" || warcType === "revisit";
}

/** The record the parser found, as the reader yields it; its HTTP head is parsed on first use. */
export function warcRecord(r: RecordInit): WarcRecord {
  const { get, getAll } = fieldGetter(r.fields.lower, r.fields.values);
  const warcType = get("warc-type") ?? "";
  const t = get("warc-target-uri");
  let http: HttpHead | null | undefined;
  return {
    file: r.file,
    offset: r.offset,
    length: r.length,
    aligned: r.aligned,
    version: r.fields.firstLine,
    headers: r.fields.headers,
    warcType,
    contentLength: r.contentLength,
    targetUri: t !== null && t.startsWith("<") && t.endsWith(">") ? t.slice(1, -1) : t,
    date: get("warc-date"),
    recordId: get("warc-record-id"),
    headerLength: r.headerLength,
    trailerOk: r.trailerOk,
    blockPrefix: r.block,
    blockKept: r.blockKept,
    get,
    getAll,
    httpHead(): HttpHead | null {
      if (http === undefined) {
        http = holdsHttpHead(warcType, get("content-type")) && r.contentLength > 0 ? parseHttpHead(r.block) : null;
      }
      return http;
    },
    async readBlock(): Promise<Buffer> {
      if (r.blockKept) return r.block;
      const parts: Buffer[] = [];
      for await (const c of blockChunks(r)) parts.push(c);
      return Buffer.concat(parts);
    },
    blockStream: () => blockChunks(r),
  };
}

/** The block as chunks: from memory when kept, else read again from the file. */
async function* blockChunks(r: RecordInit): AsyncGenerator<Buffer> {
  if (r.blockKept) {
    if (r.block.length > 0) yield r.block;
    return;
  }
  const want = r.contentLength;
  if (!r.gzip) {
    const s = createReadStream(r.file, { start: r.reread.skip, end: r.reread.skip + want - 1, highWaterMark: MIB });
    for await (const c of s) yield c as Buffer;
    return;
  }
  const s = createReadStream(r.file, { start: r.reread.cstart, highWaterMark: MIB });
  const z = createGunzip({ chunkSize: MIB });
  s.pipe(z);
  let skip = r.reread.skip;
  let left = want;
  try {
    for await (const chunk of z) {
      let c = chunk as Buffer;
      if (skip > 0) {
        if (c.length <= skip) {
          skip -= c.length;
          continue;
        }
        c = c.subarray(skip);
        skip = 0;
      }
      if (c.length >= left) {
        yield c.subarray(0, left);
        left = 0;
        break;
      }
      left -= c.length;
      yield c;
    }
  } finally {
    s.destroy();
    z.destroy();
  }
  if (left > 0) throw new WarcReadError(r.file, r.offset, "the block could not be read again: the file ends early");
}
