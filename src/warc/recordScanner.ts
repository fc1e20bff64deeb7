/**
 * The records in the decompressed data of one WARC file (cursor.ts), one at a time: blank lines
 * between records, the WARC header section, its Content-Length, the block (kept whole when
 * small, else its first bytes), the CRLF CRLF trailer, and where the record lies on disk.
 *
 * Damage (a header or Content-Length that does not parse or runs past its member, a record cut
 * by the end of the file or by a damaged member) is reported with its offset and reading goes
 * on at the next member (gzip, one record per member) or the next `WARC/1.` (plain, and inside
 * multi-record members). Recoverable oddities (a missing trailer, a few bytes after a record
 * whose Content-Length was too small, records not one per member) are warnings.
 */
import { WARC_1, type Cursor, type Status } from "./cursor.js";
import { CRLF2, fieldGetter, findHeadEnd, MAX_HEAD, parseFields, type HeadEnd, type ParsedFields } from "./headerFields.js";
import type { ProblemLog } from "./readProblems.js";
import type { Member, Now } from "./readSource.js";
import type { RecordInit } from "./warcRecord.js";

/** Bytes after a record searched for the next `WARC/1.`; up to JUNK_WARN_MAX of them are only a warning. */
const JUNK_LIMIT = 64 * 1024;
const JUNK_WARN_MAX = 64;

const WARC_SLASH = Buffer.from("WARC/");

export interface ScanOptions {
  /** Path of the file, for the records. */
  file: string;
  /** File size: a plain record whose Content-Length runs past it is truncated. */
  size: number;
  gzip: boolean;
  /** Blocks up to this size are kept whole; larger ones only their first `prefixBytes`. */
  keepBlockBytes: number;
  prefixBytes: number;
}

/** No record here: look again (what was in the way is reported and passed), or the file has ended. */
type NoRecord = "again" | "end";

/** Where a record starts: in member `m`, at `u` in the decompressed data; its problems are reported at `offset`. */
interface RecordStart {
  m: Member;
  u: number;
  offset: number;
}

interface WarcHeader {
  fields: ParsedFields;
  contentLength: number;
  /** Bytes of the WARC header section, its blank line included. */
  headerLength: number;
}

interface Block {
  /** The whole block when kept, else its first bytes. */
  data: Buffer;
  kept: boolean;
}

/** Reads the records off a cursor one at a time, reporting what it passes over to the log. */
export class RecordScanner {
  readonly #cur: Cursor;
  readonly #opts: ScanOptions;
  readonly #log: ProblemLog;
  #unalignedWarned = false;
  /** The previous record ended right here, with nothing damaged since. */
  #afterRecord: { offset: number } | null = null;
  /** Data was lost since the last good record (reported already): a member that continues it is dropped silently. */
  #afterBreak = false;

  constructor(cur: Cursor, opts: ScanOptions, log: ProblemLog) {
    this.#cur = cur;
    this.#opts = opts;
    this.#log = log;
  }

  /**
   * The next record that reads whole; null at the end of the file. Each step gives its result at
   * once when the bytes are at hand and a promise only when it has to wait (see `Now`).
   */
  async next(): Promise<RecordInit | null> {
    const cur = this.#cur;
    for (;;) {
      const st = await cur.need(1);
      if (st === "eof") return null;
      if (st === "break") {
        this.#passBreak();
        continue;
      }
      let start = this.#recordStart();
      if (start instanceof Promise) start = await start;
      if (start === "again") continue;
      let header = this.#header(start);
      if (header instanceof Promise) header = await header;
      if (header === "end") return null;
      if (header === "again") continue;
      let block = this.#block(start, header.contentLength);
      if (block instanceof Promise) block = await block;
      if (block === "end") return null;
      if (block === "again") continue;
      let trailer = this.#trailer();
      if (trailer instanceof Promise) trailer = await trailer;
      const endM = cur.last!;

      // 5. Where the last member ends (a streaming member learns it when the next data arrives).
      if (this.#opts.gzip && endM.uend < 0) await cur.need(1);
      const bm = cur.breakMember();
      if (bm && (bm === start.m || bm === endM)) {
        // Its member turned out damaged (reported): drop the record.
        this.#passBreak();
        continue;
      }
      return this.#found(start, endM, header, block, trailer);
    }
  }

  /** Data was lost here (reported already): go on after it; what follows does not continue a record. */
  #passBreak(): "again" {
    this.#cur.passBreak();
    this.#afterRecord = null;
    this.#afterBreak = true;
    return "again";
  }

  /** 1. Past blank lines between records (trailers of records with too-short Content-Length, padding) to a `WARC/` line. */
  #recordStart(): Now<RecordStart | "again"> {
    const cur = this.#cur;
    let f = cur.first();
    let ws = 0;
    while (ws < f.length && (f[ws] === 13 || f[ws] === 10)) ws++;
    if (ws > 0) {
      cur.advance(ws);
      if (ws === f.length) return "again";
      f = cur.first();
    }
    const m = cur.member();
    const start = { m, u: cur.u, offset: this.#opts.gzip ? m.cstart : cur.u };
    if (f.length < 5) return cur.peek(5).then((lead) => this.#checkLead(start, lead));
    return this.#checkLead(start, f);
  }

  /** A record starts with `WARC/`. */
  #checkLead(start: RecordStart, lead: Buffer): Now<RecordStart | "again"> {
    if (!(lead.length >= 5 && lead[0] === 0x57 && lead.subarray(0, 5).equals(WARC_SLASH))) return this.#notARecord(start, lead);
    this.#afterRecord = null;
    return start;
  }

  /** Bytes that do not start a record: a few after a record are a warning, more are damage; resync past them. */
  async #notARecord(start: RecordStart, lead: Buffer): Promise<"again"> {
    const gzip = this.#opts.gzip;
    const after = this.#afterRecord;
    const junk = after ? await this.#skipJunk() : null;
    if (after && junk !== null) {
      // A few bytes (warcio reads one line): the Content-Length was too small. More is damage.
      if (junk <= JUNK_WARN_MAX && !(gzip && start.u === start.m.ustart)) this.#log.warn(start.offset, `${junk} bytes after the record at ${after.offset} before the next record (its Content-Length may be too small)`);
      else this.#log.error(start.offset, `${junk} bytes that are not a WARC record after the record at ${after.offset}`);
      this.#afterRecord = null;
      return "again";
    }
    // The rest of a record whose start was lost to damage already reported: drop quietly.
    const quiet = this.#afterBreak && gzip && start.u === start.m.ustart;
    if (!quiet) this.#log.error(start.offset, `not a WARC record (starts with ${JSON.stringify(lead.subarray(0, 16).toString("latin1"))})`);
    await this.#resync(start.m);
    this.#afterRecord = null;
    return "again";
  }

  /** 2. The WARC header section and its Content-Length; the cursor is left at the block. */
  #header(start: RecordStart): Now<WarcHeader | NoRecord> {
    const head = this.#cur.first();
    const he = findHeadEnd(head.length > MAX_HEAD ? head.subarray(0, MAX_HEAD) : head);
    if (he) return this.#parseHeader(start, head, he);
    if (head.length >= MAX_HEAD) return this.#headerUnended(start, "ok");
    return this.#readHeadEnd(head.length).then((r) => (r.he ? this.#parseHeader(start, r.head, r.he) : this.#headerUnended(start, r.st)));
  }

  /** A header section that does not end in the current segment: read on (up to MAX_HEAD) until it does, else say why not. */
  async #readHeadEnd(have: number): Promise<{ head: Buffer; he: HeadEnd | null; st: Status }> {
    const cur = this.#cur;
    for (let n = Math.max(16 * 1024, have * 2); ; n = Math.min(n * 4, MAX_HEAD)) {
      const st = await cur.need(n);
      const head = cur.view(Math.min(n, cur.avail));
      const he = findHeadEnd(head);
      if (he || st !== "ok" || n >= MAX_HEAD) return { head, he, st };
    }
  }

  /** A header section with no end: the file ends inside it, damage cuts it, or it is too long. */
  async #headerUnended(start: RecordStart, st: Status): Promise<NoRecord> {
    this.#log.error(start.offset, st === "eof" ? "truncated: the file ends inside a WARC header" : st === "break" ? "record incomplete: the data after it is damaged" : "WARC header section longer than 1 MiB");
    if (st === "eof") return "end";
    if (st === "break") return this.#passBreak();
    await this.#resync(start.m);
    return "again";
  }

  /** The header section's fields and Content-Length, checked against the member and the file. */
  #parseHeader(start: RecordStart, head: Buffer, he: HeadEnd): Now<WarcHeader | NoRecord> {
    const cur = this.#cur;
    const fields = parseFields(head.subarray(0, he.end).toString("utf8"));
    if (!/^WARC\/\d+\.\d+$/.test(fields.firstLine)) return this.#unparsable(start, `not a WARC record (first line ${JSON.stringify(fields.firstLine.slice(0, 40))})`);
    const clRaw = fieldGetter(fields.lower, fields.values).get("content-length");
    if (clRaw === null || !/^\d+$/.test(clRaw) || !Number.isSafeInteger(Number(clRaw))) {
      return this.#unparsable(start, clRaw === null ? "WARC record without Content-Length" : `invalid Content-Length ${JSON.stringify(clRaw)}`);
    }
    const header = { fields, contentLength: Number(clRaw), headerLength: he.end + he.sep };
    cur.advance(header.headerLength);
    if (this.#opts.gzip && start.m.uend >= 0 && cur.u + header.contentLength > start.m.uend) return this.#pastMember(start, header);
    if (!this.#opts.gzip && cur.u + header.contentLength > this.#opts.size) {
      this.#log.error(start.offset, `truncated: the file ends inside the record (Content-Length ${header.contentLength})`);
      return cur.scanToWarcLine().then(() => "again" as const);
    }
    return header;
  }

  /** A Content-Length that runs past the record's gzip member. */
  async #pastMember(start: RecordStart, header: WarcHeader): Promise<WarcHeader | "again"> {
    // A record may continue in the next member, but not when that one starts a record.
    if (!(await this.#cur.nextMemberStartsWith(start.m, WARC_SLASH))) return header;
    this.#log.error(start.offset, `Content-Length ${header.contentLength} runs past the end of its gzip member`);
    await this.#cur.dropMember(start.m);
    return "again";
  }

  /** A record start whose header does not parse: reported, and passed. */
  async #unparsable(start: RecordStart, reason: string): Promise<"again"> {
    this.#log.error(start.offset, reason);
    await this.#resync(start.m);
    return "again";
  }

  /** 3. The block: a view when it lies in one segment, a copy when it is small, else only its start. */
  #block(start: RecordStart, cl: number): Now<Block | NoRecord> {
    const f = this.#cur.first();
    if (f.length >= cl && cl <= this.#opts.keepBlockBytes) {
      this.#cur.advance(cl);
      return { data: f.subarray(0, cl), kept: true };
    }
    return this.#blockAcross(start, cl);
  }

  /** A block that goes on past the current segment. */
  async #blockAcross(start: RecordStart, cl: number): Promise<Block | NoRecord> {
    const cur = this.#cur;
    const { keepBlockBytes: keep, prefixBytes } = this.#opts;
    if (cl <= keep) {
      const st = await cur.need(cl);
      if (st !== "ok") return this.#incomplete(start, st);
      const data = cur.view(cl);
      cur.advance(cl);
      return { data, kept: true };
    }
    let st = await cur.need(Math.min(prefixBytes, cl));
    if (st !== "ok") return this.#incomplete(start, st);
    const data = Buffer.from(cur.view(Math.min(prefixBytes, cl)));
    st = await cur.skip(cl);
    if (st !== "ok") return this.#incomplete(start, st);
    return { data, kept: false };
  }

  #incomplete(start: RecordStart, st: Status): NoRecord {
    this.#log.error(start.offset, st === "eof" ? "truncated: the file ends inside the record" : "record incomplete: the data after it is damaged");
    if (st === "eof") return "end";
    return this.#passBreak();
  }

  /** 4. The trailer: CRLF CRLF, or as much of it as there is (how many of its 4 bytes). */
  #trailer(): Now<number> {
    const f = this.#cur.first();
    if (f.length < 4) return this.#cur.peek(4).then((b) => this.#takeTrailer(b));
    return this.#takeTrailer(f);
  }

  #takeTrailer(f: Buffer): number {
    let k = 0;
    while (k < 4 && k < f.length && f[k] === CRLF2[k]) k++;
    if (k > 0) this.#cur.advance(k);
    return k;
  }

  /** 6. The record read whole: where it lies on disk; the warnings it brings. */
  #found(start: RecordStart, endM: Member, header: WarcHeader, block: Block, trailer: number): RecordInit {
    const { offset, length, aligned } = this.#placement(start, endM, header);
    if (trailer < 4) this.#log.warn(offset, "record not followed by CRLF CRLF");
    this.#afterRecord = { offset };
    this.#afterBreak = false;
    const { gzip, file } = this.#opts;
    const { fields, contentLength, headerLength } = header;
    return {
      file,
      gzip,
      offset,
      length,
      aligned,
      fields,
      contentLength,
      headerLength,
      trailerOk: trailer === 4,
      block: block.data,
      blockKept: block.kept,
      reread: gzip ? { cstart: start.m.cstart, skip: start.u - start.m.ustart + headerLength } : { cstart: 0, skip: start.u + headerLength },
    };
  }

  /** Where the record lies on disk: its gzip member(s), or its header and block in a plain file. */
  #placement(start: RecordStart, endM: Member, header: WarcHeader): { offset: number; length: number; aligned: boolean } {
    if (!this.#opts.gzip) return { offset: start.u, length: header.headerLength + header.contentLength, aligned: true };
    const cur = this.#cur;
    const offset = start.m.cstart;
    const length = (endM.cend >= 0 ? endM.cend : cur.src.position()) - offset;
    const aligned = start.m === endM && start.u === start.m.ustart && cur.u === endM.uend;
    if (!aligned && !this.#unalignedWarned) {
      this.#unalignedWarned = true;
      this.#log.warn(offset, "gzip members do not hold exactly one record each (first seen here): offsets point at the member holding a record's start");
    }
    return { offset, length, aligned };
  }

  /**
   * Bytes right after a record that are not a record: when `WARC/1.` follows within JUNK_LIMIT
   * bytes, skip to it and say how many bytes were skipped; else null, nothing consumed.
   */
  async #skipJunk(): Promise<number | null> {
    const cur = this.#cur;
    await cur.need(JUNK_LIMIT);
    const b = cur.view(Math.min(cur.avail, JUNK_LIMIT));
    const i = b.indexOf(WARC_1, 1);
    if (i < 0) return null;
    cur.advance(i);
    return i;
  }

  /** After a record start that does not parse: the next member (one record per member), else the next `WARC/1.`. */
  async #resync(m: Member): Promise<void> {
    if (this.#opts.gzip && this.#cur.u === m.ustart) await this.#cur.dropMember(m);
    else await this.#cur.scanToWarcLine();
  }
}
