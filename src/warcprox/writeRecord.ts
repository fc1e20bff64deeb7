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
import { WarcproxMetaError, parseWarcproxMeta } from "./warcproxMeta.js";
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
import type { StatsRegistry } from "./stats.js";
import { type Admitted, type RuleAnswer, admit } from "./limits.js";
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
  stats: StatsRegistry;
  crawlLog: CrawlLog | null;
  /** Why captures cannot be written right now, or null when the writer is healthy. */
  writerFailure(): ProxyError | null;
  /** Mark a write as in flight; call the returned function when it is done. */
  begin(): () => void;
}

export function handleWriteRecord(ctx: WriteRecordContext, socket: Socket, first: Buffer): void {
  let buf = first;
  let spool: Spool | null = null;
  let need = 0;
  let onBody: ((chunk: Buffer) => void) | null = null;
  const limit = ctx.config.proxy.maxHeaderBytes;
  const timer = setTimeout(() => {
    socket.off("data", onData);
    void spool?.dispose();
    answer(socket, 400, "Bad request", "lathe: WARCPROX_WRITE_RECORD request incomplete: the body was shorter than its Content-Length\n");
  }, ctx.config.proxy.headersTimeoutMs);
  timer.unref();
  socket.on("error", () => socket.destroy());
  socket.on("close", () => clearTimeout(timer));

  function onData(chunk: Buffer) {
    if (onBody) return onBody(chunk);
    buf = Buffer.concat([buf, chunk]);
    tryHead();
  }

  function tryHead() {
    const end = findHeadEnd(buf);
    if (end < 0) {
      if (buf.length > limit) {
        clearTimeout(timer);
        answer(socket, 431, "Request Header Fields Too Large", `lathe: request header section exceeds ${limit} bytes (proxy.maxHeaderBytes)\n`);
      }
      return;
    }
    const head = parseHead(Buffer.from(buf.subarray(0, end)));
    const rest = buf.subarray(end);
    const m = /^(WARCPROX_WRITE_RECORD|PUTMETA) (\S+) HTTP\/1\.[01]$/.exec(head.startLine);
    if (!m) {
      clearTimeout(timer);
      return answer(socket, 400, "Bad request", `lathe: malformed request line ${JSON.stringify(head.startLine)}\n`);
    }
    const [, method, uri] = m;
    const get = (n: string) => head.fields.filter((f) => f.name.toLowerCase() === n).map((f) => f.value);
    let meta;
    try {
      meta = parseWarcproxMeta(get("warcprox-meta"));
    } catch (e) {
      clearTimeout(timer);
      if (e instanceof WarcproxMetaError) return answer(socket, 400, e.reason, `${e.message}\n`);
      throw e;
    }
    const failure = ctx.writerFailure();
    if (failure) {
      clearTimeout(timer);
      return answer(socket, 503, "Service Unavailable", `lathe cannot archive right now, so it does not fetch: ${failure.message}\n`);
    }
    const warcType = method === "PUTMETA" ? "metadata" : get("warc-type")[0];
    const contentType = get("content-type")[0];
    const cl = get("content-length")[0];
    const missing = [!warcType && "WARC-Type", !contentType && "Content-Type", cl === undefined && "Content-Length"].filter(Boolean);
    if (missing.length) {
      clearTimeout(timer);
      return answer(socket, 400, "Bad request", `lathe: WARCPROX_WRITE_RECORD needs the ${missing.join(", ")} request header${missing.length > 1 ? "s" : ""} (WARC-Type, Content-Length and Content-Type are required; chunked bodies are not accepted)\n`);
    }
    if (!TYPES.has(warcType!)) {
      clearTimeout(timer);
      return answer(socket, 400, "Bad request", `lathe: WARC-Type ${JSON.stringify(warcType)} cannot be written this way: use resource, metadata or conversion\n`);
    }
    if (!/^\d+$/.test(cl!)) {
      clearTimeout(timer);
      return answer(socket, 400, "Bad request", `lathe: Content-Length must be a number, got ${JSON.stringify(cl)}\n`);
    }
    need = Number(cl);
    // Limits and blocks apply to pushed records too (warcprox-compat.md §3); bytes wait meanwhile.
    socket.pause();
    void admit(ctx.stats, meta, uri!, { mayBeRevisit: false, mayBeNew: !meta?.noArchive }).then((a) => {
      if (!a.ok) {
        clearTimeout(timer);
        return answerRule(socket, a.answer);
      }
      const rule = matchBlock(meta?.blocks, uri!);
      if (rule) {
        a.release(null);
        clearTimeout(timer);
        return answerRule(socket, blockAnswer(rule));
      }
      startBody(a);
      socket.resume();
    });
    const startBody = (admitted: Admitted) => {
    const receivedMicros = ctx.clock.nowMicros();
    const hash = newHash(ctx.config.warc.digest);
    spool = new Spool({ memoryBytes: ctx.config.capture.spoolMemoryBytes, dir: ctx.config.capture.spoolDir });
    const s = spool;
    const done = ctx.begin();
    onBody = (chunk) => {
      const part = chunk.length > need ? chunk.subarray(0, need) : chunk;
      need -= part.length;
      hash.update(part);
      if (!s.write(part)) {
        socket.pause();
        void s.drained().then(() => socket.resume());
      }
      if (need === 0) {
        socket.off("data", onData);
        clearTimeout(timer);
        void finish().finally(done);
      }
    };
    const finish = async () => {
      try {
        await s.finish();
        if (meta?.noArchive) {
          admitted.release({ written: false, revisit: false, wireBytes: s.size });
          return answer(socket, 204, "OK");
        }
        const series = meta?.warcPrefix ?? ctx.config.warc.prefix;
        const link = LINKED.exec(uri!);
        let context: ResourceContext | undefined;
        let page: { id: string; date: string } | null = null;
        if (link) {
          const word = link[1]!.replace(/:\d{5}$/, "");
          page = await ctx.archiver.awaitPageRecord(series, link[2]!, 600_000);
          context = {
            kind: word === "youtube-dl" ? "video" : "screenshot",
            variant: word,
            mode: "parallel",
            ...(page ? { capturedAt: formatWarcDate(receivedMicros, "1.1"), page: { url: link[2]!, recordId: page.id } } : {}),
            tool: "brozzler",
          };
        }
        const draft = buildResource(
          recordId(ctx.ids.uuid()),
          {
            type: warcType as "resource" | "metadata" | "conversion",
            targetUri: uri!,
            dateMicros: receivedMicros,
            ...(page ? { pageDate: page.date, concurrentTo: page.id } : {}),
            contentType: contentType!,
            body: s,
            blockDigest: formatDigest(ctx.config.warc.digest, hash.digest()),
            ...(context ? { context } : {}),
          },
          ctx.config.warc.version,
        );
        const w = await ctx.archiver.writeAlone(series, draft);
        admitted.release({ written: true, revisit: false, wireBytes: s.size });
        void ctx.crawlLog
          ?.append(
            { status: 204, size: s.size, url: uri!, metadata: meta?.metadata ?? null, contentType: contentType!, fetchStart: new Date(Number(receivedMicros / 1000n)), fetchEnd: new Date(), digest: draft.fields.find(([n]) => n === "WARC-Payload-Digest")?.[1] ?? null, warcFilename: w.filename, warcFileOffset: w.offset, method: method! },
            meta?.warcPrefix,
          )
          .catch(() => undefined);
        answer(socket, 204, "OK");
      } catch (e) {
        admitted.release(null);
        ctx.log.error("write-record-failed", { uri, error: e });
        answer(socket, 503, "Service Unavailable", `lathe could not write the record: ${errorMessage(e)}\n`);
      } finally {
        await s.dispose();
      }
    };
    if (need === 0) {
      socket.off("data", onData);
      clearTimeout(timer);
      void finish().finally(done);
    } else if (rest.length) onBody(Buffer.from(rest));
    };
  }

  function answerRule(sock: Socket, a: RuleAnswer) {
    sock.end(`HTTP/1.1 ${a.status} ${a.reason}\r\n${a.headers.map(([n, v]) => `${n}: ${v}\r\n`).join("")}\r\n${a.body}`);
  }

  socket.on("data", onData);
  tryHead();
}
