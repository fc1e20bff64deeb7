import http, { type IncomingMessage, type ServerResponse } from "node:http";
import https from "node:https";
import { type Socket, isIP } from "node:net";
import { MessageCapture, type CapturedMessage, type Truncation } from "../capture/messageCapture.js";
import { ProxyError } from "../core/errors.js";
import type { CaptureOutcome, CompletedExchange } from "../archive/pipeline.js";
import { classifyUpstreamError } from "../upstream/errors.js";
import { type SocketTap, tapOf } from "../upstream/tap.js";
import type { ProxyContext } from "./context.js";
import { forwardRequestHeaders, forwardResponseHeaders } from "./headers.js";
import { sendPlain } from "./respond.js";
import { type RequestPolicy, filteredOut, requestPolicy } from "./requestPolicy.js";
import { PROXY_AUTH_REQUIRED, sessionOf } from "./sessionOf.js";
import type { Session } from "../archive/sessions.js";
import { type Admitted, type RuleAnswer, admit } from "../warcprox/limits.js";
import { blockAnswer, matchBlock } from "../warcprox/blocks.js";
import { WarcproxMetaError } from "../warcprox/warcproxMeta.js";
import { type Target, authorityOf, hostMatches, targetUri } from "./target.js";

/**
 * Why a request may not go upstream at all (checked before any DNS lookup), or null. An IP
 * literal is checked against loops and upstream.denyAddresses here; names are checked on the
 * addresses they resolve to, by the connector.
 */
export function refusal(ctx: ProxyContext, host: string, session: Session | null = null, port?: number): { status: number; message: string } | null {
  if (port !== undefined && isIP(host)) {
    const r = ctx.connector.guard.check(host, port);
    if (r) return { status: r.status, message: `lathe: ${r.message}` };
  }
  const { allowHosts, denyHosts } = ctx.config.upstream;
  if (session?.options.denyHosts?.some((p) => hostMatches(host, p))) {
    return { status: 403, message: `lathe: ${host} is refused in this recording session (a browser service, not the web being recorded); the request was not sent` };
  }
  if (denyHosts.some((p) => hostMatches(host, p))) {
    return { status: 403, message: `lathe: ${host} is in upstream.denyHosts; the request was not sent` };
  }
  if (allowHosts.length > 0 && !allowHosts.some((p) => hostMatches(host, p))) {
    return { status: 403, message: `lathe: ${host} is not in upstream.allowHosts; the request was not sent` };
  }
  const failure = ctx.writerFailure();
  if (failure) {
    return { status: 503, message: `lathe cannot archive right now, so it does not fetch: ${failure.message}` };
  }
  return null;
}

interface Captures {
  request: MessageCapture;
  response: MessageCapture;
  sentAt: bigint | null;
  tap: SocketTap | null;
  /** The upstream certificate's verdict when the session refuses invalid ones. */
  certError?: string;
}

function startCaptures(ctx: ProxyContext, method: string): Captures {
  const { capture, warc } = ctx.config;
  const now = () => ctx.clock.nowMicros();
  const spool = { memoryBytes: capture.spoolMemoryBytes, dir: capture.spoolDir };
  return {
    request: new MessageCapture({ kind: "request", digest: warc.digest, spool, maxBodyBytes: 0, now }),
    response: new MessageCapture({
      kind: "response",
      digest: warc.digest,
      spool,
      maxBodyBytes: capture.maxBodyBytes,
      noBody: method === "HEAD",
      lenient: ctx.config.upstream.lenientParsing,
      now,
    }),
    sentAt: null,
    tap: null,
  };
}

/** Attach the captures to whichever pooled socket the request gets. */
function attach(ctx: ProxyContext, upReq: http.ClientRequest, caps: Captures, rejectInvalidCerts = false): void {
  upReq.on("socket", (socket: Socket) => {
    const tap = tapOf(socket);
    if (!tap) return;
    caps.tap = tap;
    if (rejectInvalidCerts) {
      // Checked as soon as the handshake is done, before Node flushes the request it holds for
      // a connecting socket (best effort: see the closing note on TLS 1.3 early flushes).
      const check = () => {
        const v = tap.tls?.verifyResult;
        if (v && v !== "ok") {
          caps.certError = v;
          upReq.destroy(new ProxyError("ERR_TLS_CERT_INVALID", `the certificate is invalid: ${v}`));
        }
      };
      if (tap.tls) check();
      else socket.once("secureConnect", check);
    }
    tap.current = {
      onWrite: (b) => {
        caps.sentAt ??= ctx.clock.nowMicros();
        caps.request.feed(b);
      },
      onRead: (b) => caps.response.feed(b),
    };
  });
}

function detach(caps: Captures): void {
  if (caps.tap?.current) caps.tap.current = null;
}

function upstreamRequest(ctx: ProxyContext, t: Target, method: string, headers: string[]): http.ClientRequest {
  const { upstream } = ctx.config;
  const opts: http.RequestOptions = {
    host: t.host,
    port: t.port,
    method,
    path: t.path,
    headers: headers as unknown as http.OutgoingHttpHeaders,
    setHost: false,
    insecureHTTPParser: upstream.lenientParsing,
    maxHeaderSize: upstream.maxHeaderBytes,
  };
  const r = t.scheme === "https"
    ? https.request({ ...opts, agent: ctx.connector.https })
    : http.request({ ...opts, agent: ctx.connector.http });
  // No 2000-field cap (Node's default would drop the rest silently): every field reaches the
  // client; upstream.maxHeaderBytes bounds the section.
  r.maxHeadersCount = 0;
  return r;
}

/**
 * Back-pressure from the WARC writer to the proxy (DESIGN.md): bytes of captures handed to the
 * archive pipeline and not yet written. Over BACKLOG_BYTES, new exchanges wait before going
 * upstream, so a writer slower than the traffic (gzip on a busy machine) slows the clients down
 * instead of piling captures up in memory without bound (found by `npm run soak`: 12,000
 * captures, 700 MB, waiting after a minute at full speed).
 */
const BACKLOG_BYTES = 64 * 1024 * 1024;
interface Backlog {
  bytes: number;
  waiters: Array<() => void>;
}
const backlogs = new WeakMap<object, Backlog>();

function backlogOf(ctx: ProxyContext): Backlog {
  let b = backlogs.get(ctx.archiver);
  if (!b) backlogs.set(ctx.archiver, (b = { bytes: 0, waiters: [] }));
  return b;
}

function chargeBacklog(ctx: ProxyContext, bytes: number): () => void {
  const b = backlogOf(ctx);
  b.bytes += bytes;
  return () => {
    b.bytes -= bytes;
    if (b.bytes <= BACKLOG_BYTES && b.waiters.length) for (const w of b.waiters.splice(0)) w();
  };
}

/** Null when there is room now, else a promise resolved once the backlog is under its bound. */
function whenBacklogRoom(ctx: ProxyContext): Promise<void> | null {
  const b = backlogOf(ctx);
  return b.bytes <= BACKLOG_BYTES ? null : new Promise<void>((r) => b.waiters.push(r));
}

/** Finalize both messages and hand the exchange to the archive pipeline. */
async function archiveExchange(
  ctx: ProxyContext,
  uri: string,
  method: string,
  caps: Captures,
  ended: "clean" | Truncation,
  policy: RequestPolicy,
  admitted: Admitted,
  wireExact = false,
): Promise<boolean> {
  const mode = wireExact ? "wire-exact" : ctx.config.warc.chunked;
  const lenient = ctx.config.upstream.lenientParsing;
  let request: CapturedMessage | null = null;
  let response: CapturedMessage | null = null;
  try {
    request = await caps.request.finalize(mode, "clean");
    response = await caps.response.finalize(mode, ended, { lenient, rejected: wireExact });
  } catch (e) {
    ctx.log.error("capture-failed", { uri, error: e });
  }
  if (!request || !response || !caps.tap) {
    await Promise.all([request?.dispose(), response?.dispose(), caps.request.discard(), caps.response.discard()]);
    ctx.log.warn("capture-incomplete", { uri, reason: "no complete response head was received" });
    admitted.release(null);
    return false;
  }
  const ex: CompletedExchange = {
    targetUri: uri,
    method,
    dateMicros: caps.sentAt ?? request.firstByteMicros,
    endedMicros: ctx.clock.nowMicros(),
    request,
    response,
    tap: caps.tap,
    series: policy.series,
    version: policy.collection.warcVersion,
    collection: policy.collection,
    dedupPolicy: policy.dedupPolicy,
    dedupOk: policy.dedupOk,
    session: policy.session?.id,
    ...(skipReason(policy, response) ? { skip: skipReason(policy, response)! } : {}),
  };
  const release = chargeBacklog(ctx, response.rawHead.length + response.wireBodyLength + request.rawHead.length + request.wireBodyLength);
  const archiving = ctx.archiver.archive(ex);
  archiving.finally(release).catch(() => undefined);
  const outcome = await archiving;
  const written = outcome.kind === "written";
  const first = written ? outcome.records[0] : undefined;
  const wireBytes = response.rawHead.length + response.wireBodyLength;
  admitted.release({ written, revisit: written && outcome.revisit, wireBytes });
  const header = (m: CapturedMessage, n: string) => m.headFields.find((f) => f.name.toLowerCase() === n)?.value ?? null;
  void ctx.crawlLog
    ?.append(
      {
        status: response.status,
        size: response.wireBodyLength,
        url: uri,
        referer: header(request, "referer"),
        metadata: policy.meta?.metadata ?? null,
        contentType: header(response, "content-type"),
        fetchStart: new Date(Number(ex.dateMicros / 1000n)),
        fetchEnd: new Date(Number(ex.endedMicros / 1000n)),
        digest: response.payloadDigest,
        revisit: written && outcome.revisit,
        truncated: response.truncated,
        contentSize: wireBytes,
        warcFilename: first?.filename ?? null,
        warcFileOffset: first?.offset ?? null,
        method,
      },
      policy.meta?.warcPrefix ?? (policy.noArchive ? "-" : policy.series),
    )
    .catch((e) => ctx.log.error("crawl-log-failed", { error: e }));
  countOutcome(ctx, policy, outcome);
  return outcome.kind === "written";
}

/** Count a capture's outcome for its session and its collection (status, session summaries). */
export function countOutcome(ctx: ProxyContext, policy: RequestPolicy, outcome: CaptureOutcome): void {
  for (const c of [policy.session?.counters, ctx.collectionCounters(policy.collection.name)]) {
    if (!c) continue;
    if (outcome.kind === "written") {
      c.captures++;
      if (outcome.revisit) c.revisits++;
      for (const r of outcome.records) {
        c.bytes += r.length;
        if (c === policy.session?.counters) policy.session.files.add(r.filename);
      }
    } else if (outcome.kind === "skipped") c.skipped++;
    else c.failed++;
  }
}

function sendCertErrorPage(res: ServerResponse, uri: string, verdict: string): void {
  const esc = (x: string) => x.replace(/[&<>"]/g, (c) => `&#${c.charCodeAt(0)};`);
  const body = Buffer.from(
    `<!doctype html><html><head><meta charset="utf-8"><title>Certificate error: ${esc(verdict)}</title></head><body>` +
      `<h1>lathe: this site's certificate is not valid</h1><p>The certificate of <code>${esc(uri)}</code> failed verification: ` +
      `<strong>${esc(verdict)}</strong>.</p><p>Nothing was recorded. To record such sites anyway, start the session with <code>--accept-invalid-certs</code>.</p></body></html>\n`,
  );
  sendPlainHtml(res, 502, body);
}

function sendPlainHtml(res: ServerResponse, status: number, body: Buffer): void {
  res.sendDate = true;
  res.writeHead(status, ["Content-Type", "text/html; charset=utf-8", "Content-Length", String(body.length), "Cache-Control", "no-store", "X-Lathe-Error", "1"]);
  res.end(body);
}

function skipReason(policy: RequestPolicy, response: CapturedMessage): string | null {
  if (policy.noArchive) return 'Warcprox-Meta warc-prefix "-"';
  const ct = response.headFields.find((f) => f.name.toLowerCase() === "content-type")?.value;
  if (filteredOut(policy.mimeTypeFilters, ct)) return `mime-type-filters (${ct ?? "no Content-Type"})`;
  return null;
}

/** A rule answer for an invalid Warcprox-Meta: 400 with warcprox's reason, then close. */
function rejectMeta(res: ServerResponse, e: WarcproxMetaError): void {
  const body = Buffer.from(`${e.message}\n`, "utf8");
  res.shouldKeepAlive = false;
  res.writeHead(400, e.reason, ["Content-Type", "text/plain;charset=utf-8", "Connection", "close", "Content-Length", String(body.length)]);
  res.end(body);
}

/**
 * One request/response exchange through lathe: forward the request, stream the response to the
 * client as it arrives (never buffered whole), record both from the upstream socket's bytes.
 */
export function handleExchange(ctx: ProxyContext, req: IncomingMessage, res: ServerResponse, t: Target): void {
  const method = req.method ?? "GET";
  const uri = targetUri(t);
  const session = sessionOf(ctx, req);
  if (session === "invalid") {
    req.resume();
    sendPlain(res, 407, PROXY_AUTH_REQUIRED, ["Proxy-Authenticate", 'Basic realm="lathe"']);
    return;
  }
  let policy: RequestPolicy;
  try {
    policy = requestPolicy(ctx.config, ctx.collections, req.rawHeaders, session);
  } catch (e) {
    req.resume();
    if (e instanceof WarcproxMetaError) return rejectMeta(res, e);
    throw e;
  }
  // Rule answers (limits, then blocks) come before any DNS lookup (warcprox-compat.md §0).
  const noRevisit = policy.noArchive || policy.dedupPolicy.policy === "off";
  admit(ctx.stats, policy.meta, uri, { mayBeNew: !policy.noArchive, mayBeRevisit: !noRevisit, waitTimeoutMs: ctx.config.upstream.headTimeoutMs }).then(
    (a) => {
      if (!a.ok) {
        req.resume();
        return sendRuleAnswer(res, a.answer, method);
      }
      const rule = matchBlock(policy.meta?.blocks, uri);
      if (rule) {
        a.release(null);
        req.resume();
        return sendRuleAnswer(res, blockAnswer(rule), method);
      }
      const room = whenBacklogRoom(ctx);
      if (!room) return runExchange(ctx, req, res, t, policy, a);
      void room.then(() => {
        if (res.destroyed || res.writableEnded) return a.release(null);
        runExchange(ctx, req, res, t, policy, a);
      });
    },
    (e) => {
      ctx.log.error("admit-failed", { uri, error: e });
      sendPlain(res, 500, `lathe: ${(e as Error).message}`);
    },
  );
}

/** A warcprox rule answer (420, 430, 403): exact status line, headers and body, then close. */
function sendRuleAnswer(res: ServerResponse, a: RuleAnswer, method: string): void {
  res.shouldKeepAlive = false;
  const headers: string[] = [];
  for (const [n, v] of a.headers) headers.push(n, v);
  res.writeHead(a.status, a.reason, headers);
  res.end(method === "HEAD" ? undefined : a.body);
}

/** Methods safe to send again (RFC 9110 §9.2.2) that lathe retries, when they carry no body. */
const RETRYABLE_METHODS = new Set(["GET", "HEAD", "OPTIONS", "TRACE"]);

/**
 * A request that may be sent again on a fresh connection after a kept-alive one was closed under
 * it before any byte of an answer: the origin closed the idle connection as lathe reused it (the
 * keep-alive race; RFC 9112 §9.3.1 lets a client retry an idempotent request then, and browsers,
 * curl and Go do). Without it the crawler gets a 502 for a page that is fine (seen once in
 * 681,000 responses of a soak). Only bodiless requests: a body already streamed to the dead
 * connection cannot be sent again.
 */
function mayRetry(req: IncomingMessage, method: string): boolean {
  return RETRYABLE_METHODS.has(method) && req.headers["transfer-encoding"] === undefined && (req.headers["content-length"] ?? "0") === "0";
}

function runExchange(ctx: ProxyContext, req: IncomingMessage, res: ServerResponse, t: Target, policy: RequestPolicy, admitted: Admitted, attempt = 1): void {
  const method = req.method ?? "GET";
  const uri = targetUri(t);
  const hostPort = `${t.host}:${t.port}`;
  const refused = refusal(ctx, t.host, policy.session, t.port);
  if (refused) {
    admitted.release(null);
    req.resume();
    sendPlain(res, refused.status, refused.message);
    return;
  }
  res.sendDate = false;
  const inflight = ctx.begin();
  const pageDone = ctx.archiver.expectPage(policy.series, uri);
  if (policy.session) policy.session.inflight++;
  let settled = false;
  const settle = () => {
    if (settled) return;
    settled = true;
    if (policy.session) policy.session.inflight--;
    pageDone();
    inflight();
  };
  const track = <T>(p: Promise<T>): Promise<T> => {
    p.finally(settle).catch(() => undefined);
    return p;
  };
  const strict = ctx.config.warc.durability === "strict";
  const caps = startCaptures(ctx, method);
  const headers = forwardRequestHeaders(req.rawHeaders, { authority: authorityOf(t), method });
  const upReq = upstreamRequest(ctx, t, method, headers);
  attach(ctx, upReq, caps, policy.session?.options.rejectInvalidCerts === true);

  let done = false;
  let headTimer: NodeJS.Timeout | null = null;
  let maxTimer: NodeJS.Timeout | null = null;
  const clearTimers = () => {
    if (headTimer) clearTimeout(headTimer);
    if (maxTimer) clearTimeout(maxTimer);
  };

  const fail = (e: unknown) => {
    if (done) return;
    done = true;
    clearTimers();
    detach(caps);
    let f = classifyUpstreamError(e, hostPort, caps.sentAt ? "head" : "connect");
    if (attempt === 1 && upReq.reusedSocket && f.error.code === "ERR_UPSTREAM_CLOSED" && !caps.response.started && !res.headersSent && !res.destroyed && mayRetry(req, method)) {
      // Nothing of this attempt is recorded: no answer came; the next attempt is the capture.
      ctx.log.info("upstream-retried", { uri, reason: f.error.message });
      void caps.request.discard();
      void caps.response.discard();
      upReq.destroy();
      // The next attempt counts as in flight before this one stops counting: a graceful stop
      // must not see zero exchanges in between.
      runExchange(ctx, req, res, t, policy, admitted, attempt + 1);
      settle();
      return;
    }
    // Node queues the request on a socket still connecting, so `sentAt` does not say whether the
    // connection (and its TLS handshake) was up; the tap does.
    const connecting = !caps.tap || (t.scheme === "https" ? !caps.tap.tls : caps.tap.ip === undefined);
    if (f.error.code === "ERR_UPSTREAM_CLOSED" && t.scheme === "https" && connecting) {
      // Closed or reset during the TLS handshake: a handshake failure (decisions.md §2), -2.
      const why = (e as NodeJS.ErrnoException)?.code ?? (e as Error)?.message ?? "closed";
      f = { status: 502, fetchStatus: -2, error: new ProxyError("ERR_TLS_HANDSHAKE", `TLS handshake with ${hostPort} failed: the connection was closed during the handshake (${why})`, e) };
    } else if (f.error.code === "ERR_UPSTREAM_TIMEOUT" && connecting && f.fetchStatus === -4) {
      // Nothing was sent yet: a connect (or TLS handshake) timeout, -2 in the crawl log; -4 is for a silent origin.
      f = { ...f, fetchStatus: -2 };
    }
    ctx.log.warn("upstream-failed", { uri, code: f.error.code, error: f.error.message });
    // Only a complete, valid status line and header section are recorded (decisions.md §1): a
    // garbled status line would make a response record whose block is not an HTTP response.
    const parseError = f.error.code === "ERR_UPSTREAM_PARSE" && caps.response.headComplete && Number.isFinite(caps.response.status);
    if (parseError) {
      // A response Node's parser refused: keep what was received, wire-exact (decisions.md §1).
      track(archiveExchange(ctx, uri, method, caps, "unspecified", policy, admitted, true));
    } else {
      void caps.request.discard();
      void caps.response.discard();
      admitted.release(null);
      void ctx.crawlLog
        ?.append({ status: f.fetchStatus, size: null, url: uri, metadata: policy.meta?.metadata ?? null, fetchStart: null, exception: f.error.code, exceptionMessage: f.error.message, method }, policy.meta?.warcPrefix ?? policy.series)
        .catch((e) => ctx.log.error("crawl-log-failed", { error: e }));
      settle();
    }
    if (caps.certError && !res.headersSent) sendCertErrorPage(res, uri, caps.certError);
    else if (!res.headersSent) sendPlain(res, f.status, `lathe: ${f.error.message}`);
    else res.destroy();
    upReq.destroy();
  };

  headTimer = setTimeout(() => {
    fail(new ProxyError("ERR_UPSTREAM_TIMEOUT", `${hostPort} sent no response within ${ctx.config.upstream.headTimeoutMs} ms (upstream.headTimeoutMs)`));
  }, ctx.config.upstream.headTimeoutMs + ctx.config.upstream.connectTimeoutMs);
  headTimer.unref();

  upReq.on("error", fail);
  upReq.setTimeout(ctx.config.upstream.idleTimeoutMs, () => {
    upReq.destroy(new ProxyError("ERR_UPSTREAM_TIMEOUT", `${hostPort} was silent for ${ctx.config.upstream.idleTimeoutMs} ms (upstream.idleTimeoutMs)`));
  });

  // Request body: client → upstream, with back-pressure.
  req.on("data", (c: Buffer) => {
    if (!upReq.write(c)) req.pause();
  });
  upReq.on("drain", () => req.resume());
  // A retry comes after the (bodiless) request has ended.
  if (req.readableEnded) upReq.end();
  else req.on("end", () => upReq.end());
  req.on("error", () => upReq.destroy());

  upReq.on("response", (upRes: IncomingMessage) => {
    if (headTimer) clearTimeout(headTimer);
    const verdict = caps.tap?.tls?.verifyResult;
    if (policy.session?.options.rejectInvalidCerts && verdict && verdict !== "ok") {
      // A manual session must not hide a bad certificate behind lathe's own (issue "Standalone
      // recording session"): the person sees why, and nothing is recorded.
      done = true;
      clearTimers();
      detach(caps);
      void caps.request.discard();
      void caps.response.discard();
      settle();
      upReq.destroy();
      sendCertErrorPage(res, uri, verdict);
      return;
    }
    upReq.removeListener("error", fail);
    let truncation: Truncation | null = null;
    const finish = (ended: "clean" | Truncation, wireExact = false) => {
      if (done) return;
      done = true;
      clearTimers();
      detach(caps);
      const archived = track(archiveExchange(ctx, uri, method, caps, ended, policy, admitted, wireExact));
      if (ended !== "clean") {
        // Cut off (reset, parse error, time limit): the client must see an incomplete response,
        // never a complete wrong one (a chunked `res.end()` would look complete).
        res.destroy();
      } else if (strict) {
        archived.then((ok) => (ok ? endClient() : res.destroy()), () => res.destroy());
      } else {
        endClient();
      }
    };
    upReq.on("error", (e: NodeJS.ErrnoException) => {
      // A body Node's parser refused (bad chunk framing) is kept as received (decisions.md §1).
      const parseError = typeof e?.code === "string" && e.code.startsWith("HPE_");
      truncation ??= parseError ? "unspecified" : "disconnect";
      finish(truncation, parseError);
      res.destroy();
    });
    if (ctx.config.capture.maxDurationMs > 0) {
      maxTimer = setTimeout(() => {
        truncation = "time";
        finish("time");
        upReq.destroy();
        res.destroy();
      }, ctx.config.capture.maxDurationMs);
      maxTimer.unref();
    }

    const out = forwardResponseHeaders(upRes.rawHeaders);
    if (policy.acceptCaptureMetadata) {
      // warcprox's capture timestamp: the WARC-Date instant, to the second.
      const ts = new Date(Number((caps.sentAt ?? ctx.clock.nowMicros()) / 1000n)).toISOString().slice(0, 19) + "Z";
      out.push("Warcprox-Meta", JSON.stringify({ "capture-metadata": { timestamp: ts } }));
    }
    try {
      res.writeHead(upRes.statusCode ?? 502, upRes.statusMessage, out as unknown as http.OutgoingHttpHeaders);
    } catch {
      // A head Node's parser let through but will not send again (e.g. a control character in the
      // reason phrase, found by test/proxy/fuzz.test.ts): the client gets the reason without the
      // characters Node refuses; the record keeps the bytes as received. A head that still cannot
      // be sent ends the exchange as refused (decisions.md §1) instead of throwing out of this handler.
      try {
        res.writeHead(upRes.statusCode ?? 502, (upRes.statusMessage ?? "").replace(/[^\t\x20-\x7e\x80-\xff]/g, ""), out as unknown as http.OutgoingHttpHeaders);
      } catch {
        finish("unspecified", true);
        upReq.destroy();
        return;
      }
    }
    // Strict durability holds back the last byte until the capture is on disk (warc-files.md §6).
    let held: Buffer | null = null;
    const endClient = () => {
      if (held) res.end(held);
      else res.end();
    };
    upRes.on("data", (chunk: Buffer) => {
      let out = chunk;
      if (strict) {
        out = held ? Buffer.concat([held, chunk]) : chunk;
        held = Buffer.from(out.subarray(out.length - 1));
        out = out.subarray(0, out.length - 1);
      }
      const clientOk = out.length === 0 || res.write(out);
      if (!clientOk) upRes.pause();
      if (caps.response.spoolNeedsDrain()) {
        upRes.pause();
        void caps.response.drained().then(() => {
          if (!res.writableNeedDrain) upRes.resume();
        });
      }
    });
    res.on("drain", () => upRes.resume());
    upRes.on("end", () => finish("clean"));
    upRes.on("close", () => {
      if (!upRes.complete) {
        finish(truncation ?? "disconnect");
        res.destroy();
      }
    });
  });

  // The client went away: stop reading upstream; what was received is recorded as cut off.
  res.on("close", () => {
    if (!res.writableFinished && !done) {
      upReq.destroy(new ProxyError("ERR_UPSTREAM_CLOSED", "client closed the connection"));
    }
  });
}
