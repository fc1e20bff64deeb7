/**
 * `WARCPROX_WRITE_RECORD <uri>` and `PUTMETA <uri>` (warcprox-compat.md §3, tls-and-resources.md
 * B.3): a crawler pushes a screenshot, video or yt-dlp JSON, and lathe writes it through the same
 * writer as everything else. Node's HTTP parser knows no such methods, so these requests are
 * recognised on their connection's first bytes and read here; `204 OK` is sent only once the
 * record is on disk.
 */
import type { Socket } from "node:net";
import { findHeadEnd, parseHead } from "../capture/httpHead.js";
import { Spool } from "../capture/spool.js";
import { recordId } from "../core/ids.js";
import { errorMessage } from "../core/errors.js";
import { type WarcproxMeta, WarcproxMetaError, parseWarcproxMeta } from "./warcproxMeta.js";
import { formatDigest, newHash } from "../warc/digest.js";
import { buildResource, type ResourceContext } from "../warc/records.js";
import { formatWarcDate } from "../warc/date.js";
import type { Config } from "../config/schema.js";
import type { Clock } from "../core/clock.js";
import type { ProxyError } from "../core/errors.js";
import type { IdSource } from "../core/ids.js";
import type { Logger } from "../core/log.js";
import type { Archiver } from "../archive/pipeline.js";
import type { CrawlLog } from "./crawlLog.js";
import type { StatsStore } from "./statsStore.js";
import type { Admitted, RuleAnswer } from "./limits.js";
import { blockAnswer, matchBlock } from "./blocks.js";

const METHODS = ["WARCPROX_WRITE_RECORD ", "PUTMETA "];
const TYPES = new Set(["resource", "metadata", "conversion"]);
/** Page links of brozzler's URIs: the scheme word and what it means. */
const LINKED = /^(screenshot|thumbnail|youtube-dl(?::\d{5})?):(.+)$/;

export function isWriteRecordStart(first: Buffer): boolean {
  const s = first.subarray(0, 24).toString("latin1");
  return METHODS.some((m) => s.startsWith(m) || m.startsWith(s));
}

function answer(socket: Socket, status: number, reason: string, body = "", extra: string[] = []): void {
  const b = Buffer.from(body, "utf8");
  const head = [`HTTP/1.1 ${status} ${reason}`, ...extra];
  if (status !== 204) head.push("Content-Type: text/plain;charset=utf-8", `Content-Length: ${b.length}`);
  head.push("Connection: close");
  socket.end(head.join("\r\n") + "\r\n\r\n" + (status === 204 ? "" : b.toString("utf8")));
}

/** What a pushed record needs of the running lathe (the proxy's context has all of it). */
export interface WriteRecordContext {
  config: Config;
  archiver: Archiver;
  clock: Clock;
  ids: IdSource;
  log: Logger;
  stats: StatsStore;
  crawlLog: CrawlLog | null;
  /** Why captures cannot be written right now, or null when the writer is healthy. */
  writerFailure(): ProxyError | null;
  /** Mark a write as in flight; call the returned function when it is done. */
  begin(): () => void;
}

/** A pushed record's request, checked: what to write and where. */
interface PushRequest {
  method: string;
  uri: string;
  meta: WarcproxMeta | null;
  warcType: "resource" | "metadata" | "conversion";
  contentType: string;
  length: number;
}

export function handleWriteRecord(ctx: WriteRecordContext, socket: Socket, first: Buffer): void {
  new PushReceiver(ctx, socket, first).start();
}

/** Reads one pushed record from its connection: head, admission, body, then the write. */
class PushReceiver {
  readonly #ctx: WriteRecordContext;
  readonly #socket: Socket;
  #buf: Buffer;
  #spool: Spool | null = null;
  #onBody: ((chunk: Buffer) => void) | null = null;
  #timer: NodeJS.Timeout | null = null;
  readonly #onData = (chunk: Buffer) => {
    if (this.#onBody) return this.#onBody(chunk);
    this.#buf = Buffer.concat([this.#buf, chunk]);
    this.#tryHead();
  };

  constructor(ctx: WriteRecordContext, socket: Socket, first: Buffer) {
    this.#ctx = ctx;
    this.#socket = socket;
    this.#buf = first;
  }

  start(): void {
    const socket = this.#socket;
    this.#timer = setTimeout(() => {
      socket.off("data", this.#onData);
      void this.#spool?.dispose();
      answer(socket, 400, "Bad request", "lathe: WARCPROX_WRITE_RECORD request incomplete: the body was shorter than its Content-Length\n");
    }, this.#ctx.config.proxy.headersTimeoutMs);
    this.#timer.unref();
    socket.on("error", () => socket.destroy());
    socket.on("close", () => this.#stopTimer());
    socket.on("data", this.#onData);
    this.#tryHead();
  }

  #stopTimer(): void {
    if (this.#timer) clearTimeout(this.#timer);
  }

  /** Answer and stop: the request is refused. */
  #refuse(status: number, reason: string, body: string): void {
    this.#stopTimer();
    answer(this.#socket, status, reason, body);
  }

  #tryHead(): void {
    const end = findHeadEnd(this.#buf);
    const limit = this.#ctx.config.proxy.maxHeaderBytes;
    if (end < 0) {
      if (this.#buf.length > limit) this.#refuse(431, "Request Header Fields Too Large", `lathe: request header section exceeds ${limit} bytes (proxy.maxHeaderBytes)\n`);
      return;
    }
    const push = this.#parse(parseHead(Buffer.from(this.#buf.subarray(0, end))));
    if (push) this.#admit(push, this.#buf.subarray(end));
  }

  /** The request checked, or null once it was refused. */
  #parse(head: ReturnType<typeof parseHead>): PushRequest | null {
    const m = /^(WARCPROX_WRITE_RECORD|PUTMETA) (\S+) HTTP\/1\.[01]$/.exec(head.startLine);
    if (!m) {
      this.#refuse(400, "Bad request", `lathe: malformed request line ${JSON.stringify(head.startLine)}\n`);
      return null;
    }
    const [, method, uri] = m;
    const get = (n: string) => head.fields.filter((f) => f.name.toLowerCase() === n).map((f) => f.value);
    let meta: WarcproxMeta | null;
    try {
      meta = parseWarcproxMeta(get("warcprox-meta"));
    } catch (e) {
      if (!(e instanceof WarcproxMetaError)) throw e;
      this.#refuse(400, e.reason, `${e.message}\n`);
      return null;
    }
    const failure = this.#ctx.writerFailure();
    if (failure) {
      this.#refuse(503, "Service Unavailable", `lathe cannot archive right now, so it does not fetch: ${failure.message}\n`);
      return null;
    }
    const warcType = method === "PUTMETA" ? "metadata" : get("warc-type")[0];
    const contentType = get("content-type")[0];
    const cl = get("content-length")[0];
    const problem = fieldProblem(warcType, contentType, cl);
    if (problem) {
      this.#refuse(400, "Bad request", problem);
      return null;
    }
    return { method: method!, uri: uri!, meta, warcType: warcType as PushRequest["warcType"], contentType: contentType!, length: Number(cl) };
  }

  /** Limits and blocks apply to pushed records too (warcprox-compat.md §3); bytes wait meanwhile. */
  #admit(push: PushRequest, rest: Buffer): void {
    const socket = this.#socket;
    socket.pause();
    void this.#ctx.stats.admit(push.meta, push.uri, { mayBeRevisit: false, mayBeNew: !push.meta?.noArchive }).then((a) => {
      if (!a.ok) {
        this.#stopTimer();
        return answerRule(socket, a.answer);
      }
      const rule = matchBlock(push.meta?.blocks, push.uri);
      if (rule) {
        a.release(null);
        this.#stopTimer();
        return answerRule(socket, blockAnswer(rule));
      }
      this.#receiveBody(push, a, rest);
      socket.resume();
    });
  }

  /** The body into a spool (hashed as it comes), then the record is written. */
  #receiveBody(push: PushRequest, admitted: Admitted, rest: Buffer): void {
    const ctx = this.#ctx;
    const received: Received = {
      micros: ctx.clock.nowMicros(),
      hash: newHash(ctx.config.warc.digest),
      spool: new Spool({ memoryBytes: ctx.config.capture.spoolMemoryBytes, dir: ctx.config.capture.spoolDir }),
    };
    this.#spool = received.spool;
    const done = ctx.begin();
    let need = push.length;
    const complete = () => {
      this.#socket.off("data", this.#onData);
      this.#stopTimer();
      void writePushed(ctx, this.#socket, push, received, admitted).finally(done);
    };
    this.#onBody = (chunk) => {
      const part = chunk.length > need ? chunk.subarray(0, need) : chunk;
      need -= part.length;
      received.hash.update(part);
      if (!received.spool.write(part)) {
        this.#socket.pause();
        void received.spool.drained().then(() => this.#socket.resume());
      }
      if (need === 0) complete();
    };
    if (need === 0) complete();
    else if (rest.length) this.#onBody(Buffer.from(rest));
  }
}

/** Why the fields cannot make a record, or null. */
function fieldProblem(warcType: string | undefined, contentType: string | undefined, cl: string | undefined): string | null {
  const missing = [!warcType && "WARC-Type", !contentType && "Content-Type", cl === undefined && "Content-Length"].filter(Boolean);
  if (missing.length) {
    return `lathe: WARCPROX_WRITE_RECORD needs the ${missing.join(", ")} request header${missing.length > 1 ? "s" : ""} (WARC-Type, Content-Length and Content-Type are required; chunked bodies are not accepted)\n`;
  }
  if (!TYPES.has(warcType!)) return `lathe: WARC-Type ${JSON.stringify(warcType)} cannot be written this way: use resource, metadata or conversion\n`;
  if (!/^\d+$/.test(cl!)) return `lathe: Content-Length must be a number, got ${JSON.stringify(cl)}\n`;
  return null;
}

/** A pushed body, received whole. */
interface Received {
  micros: bigint;
  hash: ReturnType<typeof newHash>;
  spool: Spool;
}

/** Write the pushed record (linked to its page when brozzler's URI names one); 204 once on disk. */
async function writePushed(ctx: WriteRecordContext, socket: Socket, push: PushRequest, r: Received, admitted: Admitted): Promise<void> {
  const s = r.spool;
  try {
    await s.finish();
    if (push.meta?.noArchive) {
      admitted.release({ written: false, revisit: false, wireBytes: s.size });
      return answer(socket, 204, "OK");
    }
    const series = push.meta?.warcPrefix ?? ctx.config.warc.prefix;
    const { context, page } = await pageLink(ctx, series, push.uri, r.micros);
    const draft = buildResource(
      recordId(ctx.ids.uuid()),
      {
        type: push.warcType,
        targetUri: push.uri,
        dateMicros: r.micros,
        ...(page ? { pageDate: page.date, concurrentTo: page.id } : {}),
        contentType: push.contentType,
        body: s,
        blockDigest: formatDigest(ctx.config.warc.digest, r.hash.digest()),
        ...(context ? { context } : {}),
      },
      ctx.config.warc.version,
    );
    const w = await ctx.archiver.writeAlone(series, draft);
    admitted.release({ written: true, revisit: false, wireBytes: s.size });
    void ctx.crawlLog
      ?.append(
        { status: 204, size: s.size, url: push.uri, metadata: push.meta?.metadata ?? null, contentType: push.contentType, fetchStart: new Date(Number(r.micros / 1000n)), fetchEnd: new Date(), digest: draft.fields.find(([n]) => n === "WARC-Payload-Digest")?.[1] ?? null, warcFilename: w.filename, warcFileOffset: w.offset, method: push.method },
        push.meta?.warcPrefix,
      )
      .catch(() => undefined);
    answer(socket, 204, "OK");
  } catch (e) {
    admitted.release(null);
    ctx.log.error("write-record-failed", { uri: push.uri, error: e });
    answer(socket, 503, "Service Unavailable", `lathe could not write the record: ${errorMessage(e)}\n`);
  } finally {
    await s.dispose();
  }
}

/** brozzler's `screenshot:`, `thumbnail:` and `youtube-dl:` URIs name the page they belong to. */
async function pageLink(ctx: WriteRecordContext, series: string, uri: string, micros: bigint): Promise<{ context?: ResourceContext; page: { id: string; date: string } | null }> {
  const link = LINKED.exec(uri);
  if (!link) return { page: null };
  const word = link[1]!.replace(/:\d{5}$/, "");
  const page = await ctx.archiver.awaitPageRecord(series, link[2]!, 600_000);
  const context: ResourceContext = {
    kind: word === "youtube-dl" ? "video" : "screenshot",
    variant: word,
    mode: "parallel",
    ...(page ? { capturedAt: formatWarcDate(micros, "1.1"), page: { url: link[2]!, recordId: page.id } } : {}),
    tool: "brozzler",
  };
  return { context, page };
}

function answerRule(sock: Socket, a: RuleAnswer) {
  sock.end(`HTTP/1.1 ${a.status} ${a.reason}\r\n${a.headers.map(([n, v]) => `${n}: ${v}\r\n`).join("")}\r\n${a.body}`);
}
