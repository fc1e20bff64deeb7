/**
 * One admitted exchange on its way: the request goes upstream, the response streams back to the
 * client as it arrives (never buffered whole), and both messages are recorded from the upstream
 * leg's bytes. The client and upstream legs are interfaces (clientLeg.ts, upstreamLeg.ts), so
 * this code does not know which HTTP version carried either side.
 */
import type { Readable } from "node:stream";
import type { MessageCapture, Truncation } from "../capture/messageCapture.js";
import { ProxyError } from "../core/errors.js";
import { classifyUpstreamError, type UpstreamFailure } from "../upstream/errors.js";
import type { Admitted } from "../warcprox/limits.js";
import { archiveExchange, logFetchFailure } from "./archiveCapture.js";
import { type Captures, discardCaptures, requestCapture, startCaptures } from "./captures.js";
import { type ClientLeg, answerPlain } from "./clientLeg.js";
import type { ProxyContext } from "./context.js";
import { sendCertErrorPage } from "./answers.js";
import { countInflight } from "./inflight.js";
import { forwardRequestHeaders, forwardResponseHeaders, headerValues } from "./headers.js";
import { http1Request } from "./http1Upstream.js";
import { http2Request } from "./http2Upstream.js";
import type { OriginRoute } from "../upstream/h2Pool.js";
import { refusal } from "./refusal.js";
import type { RequestPolicy } from "./requestPolicy.js";
import { authorityOf, targetUri } from "./target.js";
import type { UpstreamRequest, UpstreamResponse } from "./upstreamLeg.js";

/** Methods safe to send again (RFC 9110 §9.2.2) that lathe retries, when they carry no body. */
const RETRYABLE_METHODS = new Set(["GET", "HEAD", "OPTIONS", "TRACE"]);

/** Start an admitted exchange (or answer its refusal). */
export function forwardExchange(ctx: ProxyContext, client: ClientLeg, policy: RequestPolicy, admitted: Admitted, attempt = 1): void {
  const t = client.head.target;
  const refused = refusal(ctx, t.host, policy.session, t.port);
  if (refused) {
    admitted.release(null);
    client.discardBody();
    answerPlain(client, refused.status, refused.message);
    return;
  }
  new Exchange(ctx, client, policy, admitted, attempt).start();
}

class Exchange {
  readonly #ctx: ProxyContext;
  readonly #client: ClientLeg;
  readonly #policy: RequestPolicy;
  readonly #admitted: Admitted;
  readonly #attempt: number;
  readonly #uri: string;
  readonly #method: string;
  readonly #hostPort: string;
  readonly #caps: Captures;
  /** The upstream request, once the route to the origin is known. */
  #up: UpstreamRequest | null = null;
  /** The exchange has ended (failed, or its response is over): later events are ignored. */
  #done = false;
  /** Ends the in-flight count (idempotent). */
  #settle: () => void;
  #headTimer: NodeJS.Timeout | null = null;
  #maxTimer: NodeJS.Timeout | null = null;
  /** Set once the response head arrived: then failures cut the body instead of answering. */
  #response: UpstreamResponse | null = null;
  #truncation: Truncation | null = null;
  /** Strict durability holds back the last byte until the capture is on disk (warc-files.md §6). */
  #held: Buffer | null = null;

  constructor(ctx: ProxyContext, client: ClientLeg, policy: RequestPolicy, admitted: Admitted, attempt: number) {
    this.#ctx = ctx;
    this.#client = client;
    this.#policy = policy;
    this.#admitted = admitted;
    this.#attempt = attempt;
    const t = client.head.target;
    this.#uri = targetUri(t);
    this.#method = client.head.method;
    this.#hostPort = `${t.host}:${t.port}`;
    this.#caps = startCaptures(ctx, { noBody: this.#method === "HEAD", lenient: ctx.config.upstream.lenientParsing });
    this.#settle = this.#beginInflight();
  }

  /** Count the exchange in flight (graceful stop, its session, the page it belongs to). */
  #beginInflight(): () => void {
    const ended = countInflight(this.#ctx, this.#policy.session);
    const pageDone = this.#ctx.archiver.expectPage(this.#policy.series, this.#uri);
    let settled = false;
    return () => {
      if (settled) return;
      settled = true;
      pageDone();
      ended();
    };
  }

  /** The exchange is in flight until `p` (its archiving) settles. */
  #track<T>(p: Promise<T>): Promise<T> {
    p.then(this.#settle, this.#settle);
    return p;
  }

  start(): void {
    const { headTimeoutMs, connectTimeoutMs } = this.#ctx.config.upstream;
    this.#headTimer = setTimeout(() => {
      this.#fail(new ProxyError("ERR_UPSTREAM_TIMEOUT", `${this.#hostPort} sent no response within ${headTimeoutMs} ms (upstream.headTimeoutMs)`));
    }, headTimeoutMs + connectTimeoutMs);
    this.#headTimer.unref();
    // The client went away: stop reading upstream; what was received is recorded as cut off.
    this.#client.onClose((delivered) => {
      if (delivered || this.#done) return;
      const e = new ProxyError("ERR_UPSTREAM_CLOSED", "client closed the connection");
      if (this.#up) this.#up.destroy(e);
      else this.#fail(e);
    });
    const route = this.#route();
    if (route instanceof Promise) route.then((r) => this.#open(r), (e) => this.#fail(e));
    else this.#open(route);
  }

  /** HTTP/2 when the origin speaks it (learned on the first connection), else HTTP/1.1. */
  #route(): OriginRoute | Promise<OriginRoute> {
    const t = this.#client.head.target;
    const pool = this.#ctx.connector.h2;
    return t.scheme === "https" && pool ? pool.route(t.host, t.port) : { kind: "http/1.1" };
  }

  #open(route: OriginRoute): void {
    if (this.#done) return;
    const up = this.#request(route);
    if (!up) return;
    this.#up = up;
    const { idleTimeoutMs } = this.#ctx.config.upstream;
    up.onError((e) => (this.#response ? this.#onBodyError(e) : this.#fail(e)));
    up.setIdleTimeout(idleTimeoutMs, () => {
      up.destroy(new ProxyError("ERR_UPSTREAM_TIMEOUT", `${this.#hostPort} was silent for ${idleTimeoutMs} ms (upstream.idleTimeoutMs)`));
    });
    this.#pipeRequestBody(up);
    // 103 Early Hints go on to the client (http2.md §2.12); 100 Continue is each leg's own business.
    up.onInterim((status, raw) => {
      if (status !== 103) return;
      try {
        this.#client.sendInterim(status, forwardResponseHeaders(raw));
      } catch {
        // Hints Node will not send (a malformed Link, found by test/proxy/fuzz.test.ts) are only
        // hints: the client goes without them, the final response is unaffected.
      }
    });
    up.onResponse((res) => this.#onResponse(res));
  }

  /** The request on the route's protocol, or null once the exchange failed. */
  #request(route: OriginRoute): UpstreamRequest | null {
    const { target, rawHeaders } = this.#client.head;
    const unframedBody = this.#client.protocol === "h2" && this.#client.hasBody;
    const headers = forwardRequestHeaders(rawHeaders, { authority: authorityOf(target), method: this.#method, unframedBody });
    const rejectInvalidCerts = this.#policy.session?.options.rejectInvalidCerts === true;
    if (route.kind === "http/1.1") return http1Request(this.#ctx, target, this.#caps, { method: this.#method, headers, rejectInvalidCerts });
    const verdict = route.tap.tls?.verifyResult;
    if (rejectInvalidCerts && verdict && verdict !== "ok") {
      this.#caps.tap = route.tap;
      this.#caps.certError = verdict;
      this.#fail(new ProxyError("ERR_TLS_CERT_INVALID", `the certificate is invalid: ${verdict}`));
      return null;
    }
    const hasBody = this.#client.hasBody;
    if (hasBody && headerValues(headers, "content-length").length === 0) this.#caps.request = requestCapture(this.#ctx, { bodyUntilEnd: true });
    try {
      return http2Request(this.#ctx, route.session, route.tap, target, this.#caps, { method: this.#method, headers, hasBody });
    } catch (e) {
      // A field HTTP/1.1 allows and HTTP/2 refuses (Node checks them before sending).
      this.#fail(e);
      return null;
    }
  }

  /** Request body: client → upstream, with back-pressure from the origin and the request's spool. */
  #pipeRequestBody(up: UpstreamRequest): void {
    const body = this.#client.body;
    let upstreamFull = false;
    const flow = spoolAndPeerFlow(body, () => upstreamFull, () => this.#caps.request);
    body.on("data", (c: Buffer) => {
      if (!up.write(c)) {
        upstreamFull = true;
        body.pause();
      }
      flow.afterChunk();
    });
    up.onDrain(() => {
      upstreamFull = false;
      flow.resume();
    });
    // A retry comes after the (bodiless) request has ended.
    if (body.readableEnded) up.end();
    else body.on("end", () => up.end());
    body.on("error", () => up.destroy());
  }

  #clearTimers(): void {
    if (this.#headTimer) clearTimeout(this.#headTimer);
    if (this.#maxTimer) clearTimeout(this.#maxTimer);
  }

  /** A failure before the response head: retry, or answer the client and log the failure. */
  #fail(e: unknown): void {
    if (this.#done) return;
    this.#done = true;
    this.#clearTimers();
    this.#up?.stopCapture();
    const raw = classifyUpstreamError(e, this.#hostPort, this.#caps.sentAt ? "head" : "connect");
    if (this.#mayRetry(raw)) return this.#retry(raw);
    const f = this.#refine(raw, e);
    this.#ctx.log.warn("upstream-failed", { uri: this.#uri, code: f.error.code, error: f.error.message });
    // Only a complete, valid status line and header section are recorded (decisions.md §1): a
    // garbled status line would make a response record whose block is not an HTTP response.
    const response = this.#caps.response;
    if (f.error.code === "ERR_UPSTREAM_PARSE" && response.headComplete && Number.isFinite(response.status)) {
      // A response Node's parser refused: keep what was received, wire-exact (decisions.md §1).
      this.#track(this.#archive("unspecified", true));
    } else {
      discardCaptures(this.#caps);
      this.#admitted.release(null);
      logFetchFailure(this.#ctx, this.#uri, this.#method, this.#policy, f.fetchStatus, f.error);
      this.#settle();
    }
    const client = this.#client;
    if (this.#caps.certError && !client.headSent) sendCertErrorPage(client, this.#uri, this.#caps.certError);
    else if (!client.headSent) answerPlain(client, f.status, `lathe: ${f.error.message}`);
    else client.destroy();
    this.#up?.destroy();
  }

  /** What a failure means for the client and the crawl log, once the connection's state is known (decisions.md §2). */
  #refine(f: UpstreamFailure, e: unknown): UpstreamFailure {
    const caps = this.#caps;
    // Node queues the request on a socket still connecting, so `sentAt` does not say whether the
    // connection (and its TLS handshake) was up; the tap does.
    const https = this.#client.head.target.scheme === "https";
    const connecting = !caps.tap || (https ? !caps.tap.tls : caps.tap.ip === undefined);
    if (f.error.code === "ERR_UPSTREAM_CLOSED" && https && connecting) {
      // Closed or reset during the TLS handshake: a handshake failure (decisions.md §2), -2.
      const why = (e as NodeJS.ErrnoException)?.code ?? (e as Error)?.message ?? "closed";
      return { status: 502, fetchStatus: -2, error: new ProxyError("ERR_TLS_HANDSHAKE", `TLS handshake with ${this.#hostPort} failed: the connection was closed during the handshake (${why})`, e) };
    }
    if (f.error.code === "ERR_UPSTREAM_TIMEOUT" && connecting && f.fetchStatus === -4) {
      // Nothing was sent yet: a connect (or TLS handshake) timeout, -2 in the crawl log; -4 is for a silent origin.
      return { status: f.status, error: f.error, fetchStatus: -2 };
    }
    return f;
  }

  /**
   * A request that may be sent again on a fresh connection after a kept-alive one was closed
   * under it before any byte of an answer: the origin closed the idle connection as lathe reused
   * it (the keep-alive race; RFC 9112 §9.3.1 lets a client retry an idempotent request then, and
   * browsers, curl and Go do). Without it the crawler gets a 502 for a page that is fine (seen
   * once in 681,000 responses of a soak). Only bodiless requests: a body already streamed to the
   * dead connection cannot be sent again.
   */
  #mayRetry(f: UpstreamFailure): boolean {
    const client = this.#client;
    return (
      this.#attempt === 1 &&
      this.#up?.reusedConnection === true &&
      f.error.code === "ERR_UPSTREAM_CLOSED" &&
      !this.#caps.response.started &&
      !client.headSent &&
      !client.gone &&
      RETRYABLE_METHODS.has(this.#method) &&
      !client.hasBody
    );
  }

  #retry(f: UpstreamFailure): void {
    // Nothing of this attempt is recorded: no answer came; the next attempt is the capture.
    this.#ctx.log.info("upstream-retried", { uri: this.#uri, reason: f.error.message });
    discardCaptures(this.#caps);
    this.#up?.destroy();
    // The next attempt counts as in flight before this one stops counting: a graceful stop
    // must not see zero exchanges in between.
    forwardExchange(this.#ctx, this.#client, this.#policy, this.#admitted, this.#attempt + 1);
    this.#settle();
  }

  #archive(ended: "clean" | Truncation, wireExact = false): Promise<boolean> {
    // A capture waiting for a writer that cannot write no longer holds up a graceful stop: the
    // writers' close tries it once more, then puts it in lost/ (issue #26).
    const onWaiting = () => this.#settle();
    return archiveExchange(this.#ctx, { uri: this.#uri, method: this.#method, caps: this.#caps, ended, policy: this.#policy, admitted: this.#admitted, wireExact, clientProtocol: this.#client.protocol, onWaiting });
  }

  #onResponse(res: UpstreamResponse): void {
    if (this.#headTimer) clearTimeout(this.#headTimer);
    const verdict = this.#caps.tap?.tls?.verifyResult;
    if (this.#policy.session?.options.rejectInvalidCerts && verdict && verdict !== "ok") {
      // A manual session must not hide a bad certificate behind lathe's own (issue "Standalone
      // recording session"): the person sees why, and nothing is recorded.
      this.#done = true;
      this.#clearTimers();
      this.#up?.stopCapture();
      discardCaptures(this.#caps);
      this.#settle();
      this.#up?.destroy();
      sendCertErrorPage(this.#client, this.#uri, verdict);
      return;
    }
    this.#response = res;
    this.#startMaxDuration();
    if (!this.#sendHead(res)) return;
    this.#streamBody(res);
  }

  /** capture.maxDurationMs: a response still arriving then is cut, `WARC-Truncated: time`. */
  #startMaxDuration(): void {
    const ms = this.#ctx.config.capture.maxDurationMs;
    if (ms <= 0) return;
    this.#maxTimer = setTimeout(() => {
      this.#truncation = "time";
      this.#finish("time");
      this.#up?.destroy();
      this.#client.destroy();
    }, ms);
    this.#maxTimer.unref();
  }

  /** The response head to the client; false when it could not be sent (the exchange ended). */
  #sendHead(res: UpstreamResponse): boolean {
    const headers = forwardResponseHeaders(res.rawHeaders);
    if (this.#policy.acceptCaptureMetadata) {
      // warcprox's capture timestamp: the WARC-Date instant, to the second.
      const ts = new Date(Number((this.#caps.sentAt ?? this.#ctx.clock.nowMicros()) / 1000n)).toISOString().slice(0, 19) + "Z";
      headers.push("Warcprox-Meta", JSON.stringify({ "capture-metadata": { timestamp: ts } }));
    }
    try {
      this.#client.sendHead({ status: res.status, reason: res.reason, headers });
      return true;
    } catch {
      // A head that cannot be sent ends the exchange as refused (decisions.md §1) instead of
      // throwing out of this handler.
      this.#finish("unspecified", true);
      this.#up?.destroy();
      return false;
    }
  }

  #streamBody(res: UpstreamResponse): void {
    const client = this.#client;
    const strict = this.#ctx.config.warc.durability === "strict";
    const flow = spoolAndPeerFlow(res.body, () => client.needsDrain, () => this.#caps.response);
    res.body.on("data", (chunk: Buffer) => {
      let out = chunk;
      if (strict) {
        out = this.#held ? Buffer.concat([this.#held, chunk]) : chunk;
        this.#held = Buffer.from(out.subarray(out.length - 1));
        out = out.subarray(0, out.length - 1);
      }
      const clientOk = out.length === 0 || client.write(out);
      if (!clientOk) res.body.pause();
      flow.afterChunk();
    });
    client.onDrain(flow.resume);
    res.body.on("end", () => this.#finish("clean"));
    res.body.on("close", () => {
      if (!res.complete) {
        this.#finish(this.#truncation ?? "disconnect");
        client.destroy();
      }
    });
  }

  /** A failure while the body arrives: what came is recorded, the client's response is cut. */
  #onBodyError(e: unknown): void {
    // A body Node's parser refused (bad chunk framing) is kept as received (decisions.md §1).
    const code = (e as NodeJS.ErrnoException)?.code;
    const parseError = typeof code === "string" && code.startsWith("HPE_");
    this.#truncation ??= parseError ? "unspecified" : "disconnect";
    this.#finish(this.#truncation, parseError);
    this.#client.destroy();
  }

  /** The response is over (or cut): archive it, then end or cut the client's response. */
  #finish(ended: "clean" | Truncation, wireExact = false): void {
    if (this.#done) return;
    this.#done = true;
    this.#clearTimers();
    this.#up?.stopCapture();
    const archived = this.#track(this.#archive(ended, wireExact));
    if (ended !== "clean") {
      // Cut off (reset, parse error, time limit): the client must see an incomplete response,
      // never a complete wrong one (a chunked end would look complete).
      this.#client.destroy();
    } else if (this.#ctx.config.warc.durability === "strict") {
      archived.then((ok) => (ok ? this.#endClient() : this.#client.destroy()), () => this.#client.destroy());
    } else {
      this.#endClient();
    }
  }

  #endClient(): void {
    if (this.#held) this.#client.end(this.#held);
    else this.#client.end();
  }
}

/**
 * Back-pressure on a body from two sinks: the peer it is written to and the capture's spool. The
 * body goes on only once both can take more. One sink's 'drain' alone used to resume it, so a
 * fast client let the origin outrun a slow spool file: its write queue grew to the whole body
 * (13.7 MB of a 20 MB one in the bench). `afterChunk` pauses the body while the spool is behind;
 * `resume` is for the peer's 'drain' (while `peerFull()`, that 'drain' is still to come).
 */
function spoolAndPeerFlow(body: Readable, peerFull: () => boolean, capture: () => MessageCapture): { afterChunk(): void; resume(): void } {
  const resume = (): void => {
    if (peerFull()) return;
    const c = capture();
    if (c.spoolNeedsDrain()) void c.drained().then(resume);
    else body.resume();
  };
  const afterChunk = (): void => {
    const c = capture();
    if (!c.spoolNeedsDrain()) return;
    body.pause();
    void c.drained().then(resume);
  };
  return { afterChunk, resume };
}
