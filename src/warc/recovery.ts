/**
 * Start-up recovery of `.open` files left by a crash (warc-files.md §7, steps 1–3 and 5): keep
 * the longest prefix of complete records, cut the rest, rename (or delete when nothing is left).
 * Files are read through a bounded window and gzip members inflate as streams, so a
 * multi-GB record never has to fit in memory.
 */
import { once } from "node:events";
import { lstat, open, readdir, rename, unlink, type FileHandle } from "node:fs/promises";
import { join } from "node:path";
import { createInflateRaw, crc32 } from "node:zlib";
import { ProxyError, errorMessage, isProxyError, systemCode } from "../core/errors.js";
import type { Logger } from "../core/log.js";
import { syncDir } from "./syncDir.js";

export interface RecoveryReport {
  /** Final file name (what WrittenRecord.filename, dedup and index entries hold). */
  file: string;
  /** The `.open` path found. */
  openPath: string;
  keptBytes: number;
  droppedBytes: number;
  /** Complete records kept, the warcinfo included. */
  recordsKept: number;
  /** True when nothing complete remained and the file was removed. */
  deleted?: boolean;
}

export interface ScanResult {
  keptBytes: number;
  records: number;
  size: number;
}

const WINDOW = 4 * 1024 * 1024;
const MAX_HEAD = 1024 * 1024;
const CRLF2 = Buffer.from("\r\n\r\n");

export async function recoverOpenFiles(dir: string, log: Logger): Promise<RecoveryReport[]> {
  let names: string[];
  try {
    names = (await readdir(dir)).filter((n) => n.endsWith(".warc.gz.open") || n.endsWith(".warc.open")).sort();
  } catch (e) {
    if (systemCode(e) === "ENOENT") return [];
    throw new ProxyError("ERR_WARC_RECOVERY", `cannot list ${dir} for .open WARC files: ${errorMessage(e)}`, e);
  }
  const reports: RecoveryReport[] = [];
  for (const n of names) {
    const r = await recoverFile(dir, n);
    log.info("warc-recovered", { file: r.file, keptBytes: r.keptBytes, droppedBytes: r.droppedBytes, recordsKept: r.recordsKept, deleted: r.deleted });
    reports.push(r);
  }
  return reports;
}

async function recoverFile(dir: string, openName: string): Promise<RecoveryReport> {
  const openPath = join(dir, openName);
  const file = openName.slice(0, -".open".length);
  const finalPath = join(dir, file);
  try {
    const fh = await open(openPath, "r+");
    try {
      const scan = await scanHandle(fh, file.endsWith(".gz"));
      const report = { file, openPath, keptBytes: scan.keptBytes, droppedBytes: scan.size - scan.keptBytes, recordsKept: scan.records };
      if (scan.keptBytes === 0) {
        await fh.close();
        await unlink(openPath);
        await syncDir(dir);
        return { ...report, deleted: true };
      }
      // Checked before anything changes: exclusive create makes this impossible, so someone
      // intervened, and a person must decide which file is right.
      if (await exists(finalPath)) {
        throw new ProxyError("ERR_WARC_RECOVERY", `cannot recover ${openPath}: ${finalPath} already exists; move one of the two files away and start again`);
      }
      if (scan.keptBytes < scan.size) await fh.truncate(scan.keptBytes);
      await fh.sync();
      await fh.close();
      await rename(openPath, finalPath);
      await syncDir(dir);
      return report;
    } finally {
      await fh.close().catch(() => {});
    }
  } catch (e) {
    if (isProxyError(e)) throw e;
    throw new ProxyError("ERR_WARC_RECOVERY", `cannot recover ${openPath}: ${errorMessage(e)}`, e);
  }
}

/** The longest prefix of complete records of a WARC file (gzip when the name ends in .gz). */
export async function scanCompleteRecords(path: string): Promise<ScanResult> {
  const fh = await open(path, "r");
  try {
    return await scanHandle(fh, /\.gz(\.open)?$/.test(path));
  } finally {
    await fh.close();
  }
}

async function scanHandle(fh: FileHandle, gzip: boolean): Promise<ScanResult> {
  const size = (await fh.stat()).size;
  const win = new Window(fh, size);
  let pos = 0;
  let records = 0;
  while (pos < size) {
    const end = gzip ? await memberEnd(win, pos) : await plainRecordEnd(win, pos);
    if (end === null) break;
    pos = end;
    records++;
  }
  return { keptBytes: pos, records, size };
}

/** End of the `.warc` record at `pos`: header parses, block and CRLF CRLF present; else null. */
async function plainRecordEnd(win: Window, pos: number): Promise<number | null> {
  const head = await findHead(win, pos);
  if (!head) return null;
  const end = pos + head.headerLength + head.contentLength;
  const t = await win.bytes(end, 4);
  return t.length === 4 && t.equals(CRLF2) ? end + 4 : null;
}

async function findHead(win: Window, pos: number): Promise<WarcHead | null> {
  for (let n = 8192; ; n *= 4) {
    const b = await win.bytes(pos, Math.min(n, MAX_HEAD));
    const i = b.indexOf(CRLF2);
    if (i >= 0) return parseHead(b.subarray(0, i + 4));
    if (b.length < n || n >= MAX_HEAD) return null;
  }
}

interface WarcHead {
  headerLength: number;
  contentLength: number;
}

/** A WARC header section (through its blank line), or null when it is not one. */
function parseHead(b: Buffer): WarcHead | null {
  const lines = b.toString("latin1").split("\r\n");
  if (!/^WARC\/\d+\.\d+$/.test(lines[0]!)) return null;
  const cl = lines.find((l) => /^content-length:/i.test(l));
  const v = cl?.slice(cl.indexOf(":") + 1).trim();
  if (!v || !/^\d+$/.test(v)) return null;
  return { headerLength: b.length, contentLength: Number(v) };
}

/**
 * End of the gzip member at `pos`, or null unless it inflates fully with matching CRC32 and
 * ISIZE and holds exactly one complete WARC record. The header is parsed here (RFC 1952 §2.3)
 * and the deflate data fed to a raw inflate, so the member's end is where inflate stopped
 * consuming input — something a Gunzip stream, which runs on into the next member, hides.
 */
async function memberEnd(win: Window, pos: number): Promise<number | null> {
  const h = await win.bytes(pos, 10);
  if (h.length < 10 || h[0] !== 0x1f || h[1] !== 0x8b || h[2] !== 8 || (h[3]! & 0xe0) !== 0) return null;
  const flg = h[3]!;
  let p = pos + 10;
  if (flg & 0x04) {
    const x = await win.bytes(p, 2);
    if (x.length < 2) return null;
    p += 2 + x.readUInt16LE(0);
  }
  for (const bit of [0x08, 0x10]) {
    if (!(flg & bit)) continue; // FNAME, FCOMMENT: zero-terminated
    const s = await win.bytes(p, 65536);
    const z = s.indexOf(0);
    if (z < 0) return null;
    p += z + 1;
  }
  if (flg & 0x02) p += 2; // FHCRC
  if (p >= win.size) return null;

  const inflate = createInflateRaw();
  const record = new RecordCheck();
  let crc = 0;
  let isize = 0;
  inflate.on("data", (c: Buffer) => {
    crc = crc32(c, crc);
    isize = (isize + c.length) % 0x1_0000_0000;
    record.push(c);
  });
  const ended = once(inflate, "end");
  ended.catch(() => {});
  try {
    let fed = 0;
    // Inflate stops consuming at the end of the deflate data; until it has, feed more.
    while (inflate.bytesWritten === fed) {
      const chunk = await win.rest(p + fed);
      if (chunk.length === 0) return null; // the file ends inside the member
      await writeChunk(inflate, chunk);
      fed += chunk.length;
    }
    await ended;
  } catch {
    return null; // invalid deflate data
  } finally {
    inflate.destroy();
  }
  const end = p + inflate.bytesWritten;
  const t = await win.bytes(end, 8);
  if (t.length < 8 || t.readUInt32LE(0) !== crc || t.readUInt32LE(4) !== isize) return null;
  return record.complete() ? end + 8 : null;
}

function writeChunk(z: NodeJS.WritableStream, chunk: Buffer): Promise<void> {
  return new Promise((resolve, reject) => {
    z.once("error", reject);
    z.write(chunk, (err) => {
      z.off("error", reject);
      if (err) reject(err);
      else resolve();
    });
  });
}

/** Checks that an inflated member is exactly one WARC record: head, Content-Length bytes, CRLF CRLF. */
class RecordCheck {
  #acc: Buffer | null = Buffer.alloc(0);
  #expected = -1;
  #total = 0;
  #last4 = Buffer.alloc(0);
  #bad = false;

  push(c: Buffer): void {
    this.#total += c.length;
    this.#last4 = Buffer.concat([this.#last4, c.subarray(-4)]).subarray(-4);
    if (!this.#acc) return;
    const from = Math.max(0, this.#acc.length - 3);
    this.#acc = Buffer.concat([this.#acc, c]);
    const i = this.#acc.indexOf(CRLF2, from);
    if (i >= 0) {
      const head = parseHead(this.#acc.subarray(0, i + 4));
      if (head) this.#expected = head.headerLength + head.contentLength + 4;
      else this.#bad = true;
      this.#acc = null;
    } else if (this.#acc.length > MAX_HEAD) {
      this.#bad = true;
      this.#acc = null;
    }
  }

  complete(): boolean {
    return !this.#bad && this.#expected >= 0 && this.#total === this.#expected && this.#last4.equals(CRLF2);
  }
}

/** A read window over a file, so small members share one read and large ones stream through. */
class Window {
  #buf = Buffer.alloc(0);
  #start = 0;
  readonly #fh: FileHandle;
  readonly size: number;

  constructor(fh: FileHandle, size: number) {
    this.#fh = fh;
    this.size = size;
  }

  /** `n` bytes at `pos`, fewer only at the end of the file. */
  async bytes(pos: number, n: number): Promise<Buffer> {
    const end = Math.min(pos + n, this.size);
    if (pos < this.#start || end > this.#start + this.#buf.length) await this.#fill(pos, Math.max(n, WINDOW));
    return this.#buf.subarray(pos - this.#start, Math.max(pos, end) - this.#start);
  }

  /** What the window holds from `pos` on, refilled when it holds nothing there; empty at EOF. */
  async rest(pos: number): Promise<Buffer> {
    if (pos < this.#start || pos >= this.#start + this.#buf.length) await this.#fill(pos, WINDOW);
    return this.#buf.subarray(pos - this.#start);
  }

  async #fill(pos: number, n: number): Promise<void> {
    const len = Math.max(0, Math.min(n, this.size - pos));
    const buf = Buffer.allocUnsafe(len);
    let got = 0;
    while (got < len) {
      const { bytesRead } = await this.#fh.read(buf, got, len - got, pos + got);
      if (bytesRead === 0) break;
      got += bytesRead;
    }
    this.#buf = buf.subarray(0, got);
    this.#start = pos;
  }
}

async function exists(p: string): Promise<boolean> {
  try {
    await lstat(p);
    return true;
  } catch (e) {
    if (systemCode(e) === "ENOENT") return false;
    throw e;
  }
}
