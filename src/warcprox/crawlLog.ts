/**
 * Heritrix-format crawl log (warcprox-compat.md §6; warcprox crawl_log.py `CrawlLogger.notify`):
 * one line per completed or failed capture (rule answers excluded), 13 fields joined by one space,
 * UTF-8, `\n`, appended to `<warc-prefix or "crawl">-<short hostname>-<proxy port>.log` in the
 * crawl-log directory.
 *
 * `formatCrawlLogLine` is pure; `CrawlLog` does the file I/O (one append handle per file, lines
 * of one file written in call order).
 */
import { mkdir, open, type FileHandle } from "node:fs/promises";
import { hostname as osHostname } from "node:os";
import { join } from "node:path";
import { domainToASCII } from "node:url";
import { appendWhole } from "../core/appendWhole.js";
import { DONE } from "../core/done.js";
import { SecondText } from "../core/secondText.js";

/** Heritrix fetch-status codes for captures that got no HTTP status (decisions.md §2). */
export const FETCH_STATUS = {
  /** DNS lookup failed. */
  DNS: -6,
  /** Connection refused, connect timeout, TLS handshake failure / rejected certificate. */
  CONNECT: -2,
  /** Connection lost (reset) after connecting, before a complete status line and headers. */
  CONNECTION_LOST: -3,
  /** Timeout after connecting, before the status line (`upstream.headTimeoutMs`). */
  TIMEOUT: -4,
  /** Retries exhausted. */
  RETRIES: -8,
  /** Anything else (e.g. the 400 for a bad Warcprox-Meta). */
  OTHER: -404,
} as const;

export interface CrawlLogEntry {
  /** Field 1: when the line is logged (default: now). */
  logTime?: Date;
  /** Field 2: the HTTP status; 204 for WARCPROX_WRITE_RECORD; a FETCH_STATUS value on failure. */
  status: number;
  /** Field 3: body bytes after the headers, as received (raw); the body length for WRITE_RECORD; null → `-` (failures). */
  size: number | null;
  /** Field 4: the URL as requested (`https://host[:port]/path` inside tunnels), or the WRITE_RECORD URI. */
  url: string;
  /** The request's `Referer` (fields 5/6). */
  referer?: string | null;
  /** `Warcprox-Meta` `metadata` (`hop_path`, `brozzled_url`, `hop_via_url`, `seed`). */
  metadata?: Record<string, unknown> | null;
  /** Field 7: the full response Content-Type (request Content-Type for WRITE_RECORD); null → `no-type`. */
  contentType?: string | null;
  /** Field 9: capture start (the WARC-Date instant; for WRITE_RECORD the request's arrival); null → `-`. */
  fetchStart?: Date | null;
  /** Field 9: last response byte (WRITE_RECORD: body read). Or give `durationMs`. */
  fetchEnd?: Date | null;
  durationMs?: number | null;
  /** Field 10: the capture's WARC-Payload-Digest value verbatim; null → `-`. */
  digest?: string | null;
  /** Field 12: the first record written is a revisit (`duplicate:digest`). */
  revisit?: boolean;
  /** Field 12: the response record's WARC-Truncated value: `length` → `lenTrunc`, `time` → `timeTrunc`. */
  truncated?: string | null;
  /** Field 13 `contentSize`: bytes including headers (omitted unless > 0). */
  contentSize?: number | null;
  /** Field 13: exception name and message of a failure (spaces become `_`). */
  exception?: string | null;
  exceptionMessage?: string | null;
  /** Field 13: final name of the WARC holding the first record, and that record's offset. */
  warcFilename?: string | null;
  warcFileOffset?: number | null;
  /** Field 13 `method`, written when not GET. */
  method?: string | null;
}

const pad2 = (n: number) => String(n).padStart(2, "0");
const pad3 = (n: number) => String(n).padStart(3, "0");

const logSeconds = new SecondText(
  (d) => `${d.getUTCFullYear()}-${pad2(d.getUTCMonth() + 1)}-${pad2(d.getUTCDate())}T${pad2(d.getUTCHours())}:${pad2(d.getUTCMinutes())}:${pad2(d.getUTCSeconds())}`,
);
const seconds14 = new SecondText(
  (d) => `${String(d.getUTCFullYear()).padStart(4, "0")}${pad2(d.getUTCMonth() + 1)}${pad2(d.getUTCDate())}${pad2(d.getUTCHours())}${pad2(d.getUTCMinutes())}${pad2(d.getUTCSeconds())}`,
);

/** `yyyy-MM-ddTHH:mm:ss.SSSZ` (UTC). */
export function logTimestamp(d: Date): string {
  return `${logSeconds.of(d)}.${pad3(d.getUTCMilliseconds())}Z`;
}

/** `yyyyMMddHHmmssSSS` (UTC, 17 digits). */
export function timestamp17(d: Date): string {
  return `${seconds14.of(d)}${pad3(d.getUTCMilliseconds())}`;
}

const UNSAFE = /[\x00-\x20\x7f]/;

/** Percent-encode what would break a space-separated field (space, controls, DEL); empty → `-`. */
function field(s: string | null | undefined): string {
  if (s === null || s === undefined || s === "") return "-";
  // Tested first: most fields have nothing to encode, and a test is cheaper than a replace.
  return UNSAFE.test(s) ? encodeUnsafe(s, /[\x00-\x20\x7f]/g) : s;
}

function encodeUnsafe(s: string, re: RegExp): string {
  return s.replace(re, (c) => {
    const b = Buffer.from(c, "utf8");
    return [...b].map((x) => "%" + x.toString(16).toUpperCase().padStart(2, "0")).join("");
  });
}

/** Heritrix `MimetypeUtils.truncate`: up to the first whitespace, `;` or `,`; `no-type` if none. */
export function crawlLogMime(contentType: string | null | undefined): string {
  if (contentType === null || contentType === undefined) return "no-type";
  const m = /^([^\s;,]+)/.exec(contentType);
  return m ? field(m[1]) : "no-type";
}

/**
 * How warcprox spells a metadata URL (`canonicalize_url`): IDNA-encoded host (non-ASCII labels
 * only), everything else percent-encoded where RFC 3986 does not allow the character.
 */
export function canonicalizeMetadataUrl(url: string): string {
  const m = /^([a-zA-Z][a-zA-Z0-9+.-]*:\/\/)([^/?#]*)([\s\S]*)$/.exec(url);
  const enc = (s: string) => {
    const allPctValid = (s.match(/%/g)?.length ?? 0) === (s.match(/%[0-9a-fA-F]{2}/g)?.length ?? 0);
    return encodeUnsafe(s, allPctValid ? /[^A-Za-z0-9\-._~:/?#[\]@!$&'()*+,;=%]/gu : /[^A-Za-z0-9\-._~:/?#[\]@!$&'()*+,;=]/gu);
  };
  if (!m) return enc(url);
  const auth = m[2]!;
  const at = auth.lastIndexOf("@");
  const userinfo = at >= 0 ? auth.slice(0, at + 1) : "";
  let hostPort = auth.slice(at + 1);
  const hp = /^(\[[^\]]*\]|[^:]*)(:.*)?$/.exec(hostPort);
  if (hp && !hp[1]!.startsWith("[")) {
    const host = hp[1]!
      .split(".")
      .map((l) => (/^[\x00-\x7f]*$/.test(l) ? l : domainToASCII(l) || l))
      .join(".");
    hostPort = host + (hp[2] ?? "");
  }
  return m[1]! + enc(userinfo) + enc(hostPort) + enc(m[3]!);
}

const metaString = (v: unknown): string | null => (v === undefined || v === null ? null : typeof v === "string" ? v : JSON.stringify(v));

/** Fields 5 and 6: hop path and via (warcprox's rules, including brozzler's `B`). */
export function hopPathAndVia(url: string, referer: string | null | undefined, metadata: Record<string, unknown> | null | undefined): [string, string] {
  const md = metadata ?? {};
  let hop = metaString(md.hop_path);
  const brozzled = metaString(md.brozzled_url);
  const hopVia = metaString(md.hop_via_url);
  const ref = referer || null;
  if (hop === null && brozzled === null && hopVia === null) return [field(null), field(ref)];
  hop ??= "-";
  const hopViaC = hopVia === null || hopVia === "" ? "-" : canonicalizeMetadataUrl(hopVia);
  let via = hop !== "-" ? (ref ?? hopViaC) : "-";
  if (brozzled !== null) {
    const b = brozzled === "" ? "" : canonicalizeMetadataUrl(brozzled);
    if (b !== url) {
      via = b;
      hop = hop === "-" ? "B" : hop + "B";
    }
  }
  return [field(hop), field(via)];
}

function annotations(e: CrawlLogEntry): string {
  const truncated = e.truncated === "length" ? "lenTrunc" : e.truncated === "time" ? "timeTrunc" : null;
  if (e.revisit) return truncated === null ? "duplicate:digest" : `duplicate:digest,${truncated}`;
  return truncated ?? "-";
}

/** A string JSON writes as it is, quoted: printable ASCII but `"` and `\\`. */
const PLAIN_JSON = /^[\x20\x21\x23-\x5b\x5d-\x7e]*$/;

function asciiJson(v: string): string {
  if (PLAIN_JSON.test(v)) return `"${v}"`; // file names, methods: nothing to escape
  return JSON.stringify(v).replace(/[\u007f-\uffff]/g, (c) => "\\u" + c.charCodeAt(0).toString(16).padStart(4, "0"));
}

/** A number as JSON.stringify writes it (a non-finite one is `null`). */
const jsonNumber = (n: number) => (Number.isFinite(n) ? String(n) : "null");

/**
 * Field 13, the JSON object written key by key (no object built and then stringified): the same
 * text, since only its strings can hold what asciiJson escapes.
 */
function extraInfo(e: CrawlLogEntry): string {
  let s = "";
  if (typeof e.contentSize === "number" && e.contentSize > 0) s += `,"contentSize":${jsonNumber(e.contentSize)}`;
  if (e.exception) {
    s += `,"exception":${asciiJson(e.exception.replace(/ /g, "_"))}`;
    if (e.exceptionMessage) s += `,"exceptionMessage":${asciiJson(e.exceptionMessage.replace(/ /g, "_"))}`;
  }
  if (e.warcFilename) {
    s += `,"warcFilename":${asciiJson(e.warcFilename)}`;
    if (typeof e.warcFileOffset === "number") s += `,"warcFileOffset":${jsonNumber(e.warcFileOffset)}`;
  }
  if (e.method && e.method !== "GET") s += `,"method":${asciiJson(e.method)}`;
  return s === "" ? "{}" : `{${s.slice(1)}}`;
}

function fetchTiming(e: CrawlLogEntry): string {
  if (!e.fetchStart) return "-";
  let ms: number | null = null;
  if (typeof e.durationMs === "number" && Number.isFinite(e.durationMs)) ms = e.durationMs;
  else if (e.fetchEnd) ms = e.fetchEnd.getTime() - e.fetchStart.getTime();
  if (ms === null) return "-";
  return `${timestamp17(e.fetchStart)}+${Math.max(0, Math.round(ms))}`;
}

/** The line for one capture, without its `\n`. */
export function formatCrawlLogLine(e: CrawlLogEntry): string {
  // Without metadata (most captures) the hop path is `-` and the via the referer, if any: no
  // object, no pair.
  let hop = "-";
  let via: string;
  if (e.metadata === null || e.metadata === undefined) via = field(e.referer);
  else [hop, via] = hopPathAndVia(e.url, e.referer, e.metadata);
  const seed = e.metadata ? metaString(e.metadata.seed) : null;
  const size = e.size === null || e.size === undefined ? "-" : String(e.size);
  return (
    `${logTimestamp(e.logTime ?? new Date())} ${String(e.status).padStart(5, " ")} ${size.padStart(10, " ")} ${field(e.url)} ${hop} ${via} ` +
    `${crawlLogMime(e.contentType)} - ${fetchTiming(e)} ${field(e.digest)} ${field(seed)} ${annotations(e)} ${extraInfo(e)}`
  );
}

export interface CrawlLogOptions {
  /** Directory of the log files (created when needed). */
  dir: string;
  /** The proxy port, part of the file name. */
  port: number;
  /** Short host name for the file name (default: `os.hostname()` up to the first dot). */
  hostname?: string;
  /** How long a write waits for more lines to join it (default 10 ms; 0 = only those queued meanwhile). */
  coalesceMs?: number;
}

/**
 * WHY lines wait a little: every write through the threadpool costs ~40 µs of CPU however short
 * (measured on a 2-core VM: 42 µs for one 300-byte line, 4.6 µs per line in writes of 16), and a
 * capture finishes every few hundred µs under load. A few ms of waiting lets the lines of many
 * captures go in one write(2); a line still lands within that window, and close() writes it.
 */
const COALESCE_MS = 10;

/**
 * The file part for a prefix: the prefix when it is a safe file-name part, else `crawl` (warcprox
 * joins the raw prefix, a path-traversal bug lathe does not copy).
 */
export function crawlLogPrefix(prefix: string | null | undefined): string {
  if (prefix === null || prefix === undefined || prefix === "") return "crawl";
  if (!/^[\x21-\x7e]{1,200}$/.test(prefix) || /[/\\]/.test(prefix) || prefix === "." || prefix === "..") return "crawl";
  return prefix;
}

const MAX_REMEMBERED_PATHS = 256;

export class CrawlLog {
  readonly dir: string;
  readonly port: number;
  readonly hostname: string;
  private readonly files = new Map<string, { handle: Promise<FileHandle>; tail: Promise<void>; batch: { lines: string[]; written: Promise<void> } | null }>();
  /** The file of each prefix seen, up to a bound (prefixes come from requests). */
  private readonly paths = new Map<string, string>();
  private dirReady: Promise<unknown> | null = null;
  private closed = false;
  private readonly coalesceMs: number;

  constructor(opts: CrawlLogOptions) {
    this.coalesceMs = opts.coalesceMs ?? COALESCE_MS;
    this.dir = opts.dir;
    this.port = opts.port;
    this.hostname = opts.hostname ?? (osHostname().split(".")[0] || "localhost");
  }

  /** `<prefix or "crawl">-<short hostname>-<port>.log`. */
  fileNameFor(prefix?: string | null): string {
    return `${crawlLogPrefix(prefix)}-${this.hostname}-${this.port}.log`;
  }

  /** Full path of the log file for `prefix`. */
  pathFor(prefix?: string | null): string {
    return join(this.dir, this.fileNameFor(prefix));
  }

  /** Append the line for `entry` to the file of `prefix` (the request's `warc-prefix`); resolves once written. */
  append(entry: CrawlLogEntry, prefix?: string | null): Promise<void> {
    return this.appendLine(formatCrawlLogLine(entry), prefix);
  }

  /** Append a preformatted line (no `\n`). */
  appendLine(line: string, prefix?: string | null): Promise<void> {
    if (this.closed) return Promise.reject(new Error("crawl log is closed"));
    const path = this.pathOf(prefix);
    let f = this.files.get(path);
    if (!f) {
      this.dirReady ??= mkdir(this.dir, { recursive: true });
      const handle = this.dirReady.then(() => open(path, "a"));
      f = { handle, tail: handle.then(() => undefined), batch: null };
      this.files.set(path, f);
      handle.catch(() => this.files.delete(path));
    }
    // Lines arriving while a write is queued (or waiting to coalesce) join it: one write(2) for all
    // of them, so under load the log keeps up instead of one round trip per capture. Each resolves
    // once written.
    if (f.batch) {
      f.batch.lines.push(line);
      return f.batch.written;
    }
    const batch = { lines: [line], written: DONE }; // set below
    const file = f;
    const h = f.handle;
    const wait = this.coalesceMs;
    batch.written = f.tail.catch(() => undefined).then(async () => {
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      if (file.batch === batch) file.batch = null;
      const fh = await h;
      await appendWhole(fh, Buffer.from(batch.lines.join("\n") + "\n", "utf8"));
    });
    f.batch = batch;
    f.tail = batch.written;
    return batch.written;
  }

  /** pathFor, remembered: its checks and path.join cost ~1 µs a line. */
  private pathOf(prefix: string | null | undefined): string {
    const key = prefix ?? ""; // null, undefined and "" all name the `crawl` file
    let path = this.paths.get(key);
    if (path === undefined) {
      path = this.pathFor(prefix);
      if (this.paths.size < MAX_REMEMBERED_PATHS) this.paths.set(key, path);
    }
    return path;
  }

  /** Wait for pending lines and close every file. */
  async close(): Promise<void> {
    this.closed = true;
    const files = [...this.files.values()];
    this.files.clear();
    await Promise.all(
      files.map(async (f) => {
        await f.tail.catch(() => undefined);
        const h = await f.handle.catch(() => null);
        await h?.close();
      }),
    );
  }
}
