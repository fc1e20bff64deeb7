/**
 * A WarcRecord view of a record draft as it landed in a WARC file: what the live index's entry
 * builder reads, without reading the file back. Field values are the ones a reader of the file
 * gets (the serialised UTF-8 decoded again, trimmed); the block comes from the draft's parts.
 *
 * One class rather than an object literal of closures: two records land per exchange, and a
 * literal with six closures is allocated and compiled anew (Node 20's V8 compiled the old
 * function three times in a fresh proxy, ~60 ms each, after "wrong map" deopts).
 */
import type { Readable } from "node:stream";
import { parseHttpHead, type HttpHead } from "../warc/httpHead.js";
import { blockSize } from "../warc/serialize.js";
import type { WarcRecord } from "../warc/warcRecord.js";
import type { BlockPart, RecordDraft } from "../warc/types.js";

const MIB = 1024 * 1024;
/** As the file reader: blocks up to 8 MiB are kept whole (the head is looked for in the first 1 MiB), larger ones 256 KiB. */
const KEEP_BLOCK = 8 * MIB;
const MAX_HEAD = 1 * MIB;
const PREFIX = 256 * 1024;

async function* partsStream(parts: BlockPart[]): AsyncGenerator<Buffer> {
  for (const p of parts) {
    if (p instanceof Uint8Array) {
      if (p.byteLength > 0) yield Buffer.from(p.buffer, p.byteOffset, p.byteLength);
    } else if (p.size > 0) {
      const s: Readable = p.createReadStream();
      for await (const c of s) yield c as Buffer;
    }
  }
}

/** The first `n` bytes of a block (fewer if it is shorter). */
async function blockHead(parts: BlockPart[], n: number): Promise<Buffer> {
  const out: Buffer[] = [];
  let got = 0;
  for await (const c of partsStream(parts)) {
    const take = Math.min(c.length, n - got);
    out.push(c.subarray(0, take));
    got += take;
    if (got >= n) break;
  }
  return Buffer.concat(out);
}

/** A blank line (CRLF CRLF or LF LF) ends within the first `limit` bytes of `b`. */
function hasHeadEnd(b: Uint8Array, limit: number): boolean {
  const buf = Buffer.from(b.buffer, b.byteOffset, Math.min(b.byteLength, limit));
  return buf.indexOf("\r\n\r\n") >= 0 || buf.indexOf("\n\n") >= 0;
}

/** Printable ASCII, no space at either end: what the serialiser wrote is what a reader gets. */
const READS_AS_IS = /^(?:[\x21-\x7e][\x20-\x7e]*)?[\x21-\x7e]$/;

/** A field value as the reader sees it: the serialised UTF-8 decoded again, trimmed. */
const asRead = (v: string): string => (READS_AS_IS.test(v) ? v : Buffer.from(v, "utf8").toString("utf8").trim());

const NO_PREFIX = Buffer.alloc(0);

/** Field names seen, lower-cased: drafts use a few names, and toLowerCase makes a new string each call. */
const LOWER_NAMES = new Map<string, string>();
const LOWER_NAMES_MAX = 256;

function lowerName(name: string): string {
  let l = LOWER_NAMES.get(name);
  if (l === undefined) {
    l = name.toLowerCase();
    if (LOWER_NAMES.size < LOWER_NAMES_MAX) LOWER_NAMES.set(name, l);
  }
  return l;
}

class LandedWarcRecord implements WarcRecord {
  readonly aligned = true;
  readonly version = "";
  readonly headerLength = 0;
  readonly trailerOk = true;
  /** blockPrefix is only what the HTTP head parser needs. */
  readonly blockKept = false;
  readonly headers: Array<readonly [string, string]>;
  readonly warcType: string;
  readonly targetUri: string | null;
  readonly date: string | null;
  readonly recordId: string | null;
  /** Set by `landedRecord` before the record is handed out. */
  blockPrefix: Buffer = NO_PREFIX;
  /** Whether the block holds an HTTP head (decided from the fields, as the file reader does). */
  readonly httpish: boolean;
  readonly #lower: string[];
  readonly #block: BlockPart[];
  #http: HttpHead | null | undefined = undefined;

  constructor(
    d: RecordDraft,
    readonly file: string,
    readonly offset: number,
    readonly length: number,
    readonly contentLength: number,
  ) {
    // (The two fields the serializer adds, WARC-Warcinfo-ID and Content-Length, play no part in
    // an index line.) The draft's own fields serve as the headers while every value reads as
    // it was written (nearly always: nothing changes the fields once the draft is serialised);
    // the fields the constructor needs are picked up in the same pass, the first of each name.
    const fields = d.fields;
    const n = fields.length;
    let headers: Array<readonly [string, string]> = fields;
    const lower = new Array<string>(n);
    let type: string | null = null;
    let target: string | null = null;
    let date: string | null = null;
    let id: string | null = null;
    let ct: string | null = null;
    for (let i = 0; i < n; i++) {
      const f = fields[i]!;
      const name = f[0];
      const value = asRead(f[1]);
      if (value !== f[1]) {
        if (headers === fields) headers = fields.slice();
        headers[i] = [name, value];
      }
      const l = lowerName(name);
      lower[i] = l;
      if (l === "warc-type") type ??= value;
      else if (l === "warc-target-uri") target ??= value;
      else if (l === "warc-date") date ??= value;
      else if (l === "warc-record-id") id ??= value;
      else if (l === "content-type") ct ??= value;
    }
    this.headers = headers;
    this.#lower = lower;
    this.#block = d.block;
    const w = type ?? d.type;
    this.warcType = w;
    this.targetUri = target !== null && target.startsWith("<") && target.endsWith(">") ? target.slice(1, -1) : target;
    this.date = date;
    this.recordId = id ?? d.id;
    this.httpish = (ct !== null && /^application\/http/i.test(ct)) || w === "response" || w === "request" || w === "revisit";
  }

  get(name: string): string | null {
    const i = this.#lower.indexOf(name.toLowerCase());
    return i < 0 ? null : this.headers[i]![1];
  }

  getAll(name: string): string[] {
    const n = name.toLowerCase();
    const out: string[] = [];
    for (let i = 0; i < this.#lower.length; i++) if (this.#lower[i] === n) out.push(this.headers[i]![1]);
    return out;
  }

  httpHead(): HttpHead | null {
    if (this.#http === undefined) this.#http = this.httpish && this.contentLength > 0 ? parseHttpHead(this.blockPrefix) : null;
    return this.#http;
  }

  async readBlock(): Promise<Buffer> {
    const parts: Buffer[] = [];
    for await (const c of partsStream(this.#block)) parts.push(c);
    return Buffer.concat(parts);
  }

  blockStream(): AsyncGenerator<Buffer> {
    return partsStream(this.#block);
  }

  /**
   * The block's first bytes, as many as the HTTP head parser may need; null when they must be
   * read from a spooled part (`blockHead`). Usually the HTTP head is the first part, whole: the
   * parser stops at the first blank line, so what follows cannot change its result.
   */
  prefixInMemory(): Buffer | null {
    const size = this.contentLength;
    if (!this.httpish || size === 0) return NO_PREFIX; // only the HTTP head parser reads it
    const want = size <= KEEP_BLOCK ? Math.min(size, MAX_HEAD) : PREFIX;
    const first = this.#block[0];
    if (first instanceof Uint8Array && (first.byteLength >= want || hasHeadEnd(first, want))) {
      // The part itself when it is a Buffer no longer than wanted (a head, usually): no new view.
      if (first.byteLength <= want && Buffer.isBuffer(first)) return first;
      return Buffer.from(first.buffer, first.byteOffset, Math.min(first.byteLength, want));
    }
    return null;
  }

  /** The prefix read from the parts (a spooled first part, or a head split across parts). */
  prefixFromParts(): Promise<Buffer> {
    const size = this.contentLength;
    return blockHead(this.#block, size <= KEEP_BLOCK ? Math.min(size, MAX_HEAD) : PREFIX);
  }
}

/**
 * The landed draft as a WarcRecord, synchronously when its block's first bytes are in memory
 * (nearly always), else once they are read from the spool.
 */
export function landedRecord(d: RecordDraft, offset: number, length: number, file: string): WarcRecord | Promise<WarcRecord> {
  const rec = new LandedWarcRecord(d, file, offset, length, blockSize(d.block));
  const prefix = rec.prefixInMemory();
  if (prefix !== null) {
    rec.blockPrefix = prefix;
    return rec;
  }
  return rec.prefixFromParts().then((p) => {
    rec.blockPrefix = p;
    return rec;
  });
}
