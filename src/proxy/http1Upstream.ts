/**
 * The HTTP/1.1 upstream leg: a request through the connector's keep-alive agents, recorded from
 * the exact bytes of whichever pooled socket it gets (the tap).
 */
import http, { type IncomingMessage } from "node:http";
import https from "node:https";
import type { Socket } from "node:net";
import { ProxyError } from "../core/errors.js";
import { tapOf } from "../upstream/tap.js";
import type { Captures } from "./captures.js";
import type { ProxyContext } from "./context.js";
import type { Target } from "./target.js";
import type { UpstreamRequest, UpstreamResponse } from "./upstreamLeg.js";

export interface Http1RequestOptions {
  method: string;
  /** Header fields to send, `[name, value, …]` (forwardRequestHeaders). */
  headers: string[];
  /** Refuse an origin whose certificate does not verify, before the request is flushed. */
  rejectInvalidCerts: boolean;
}

export function http1Request(ctx: ProxyContext, t: Target, caps: Captures, o: Http1RequestOptions): UpstreamRequest {
  const upReq = clientRequest(ctx, t, o.method, o.headers);
  attach(ctx, upReq, caps, o.rejectInvalidCerts);
  return new Http1Request(upReq, caps);
}

/**
 * Classes, not object literals: a literal with a getter is built through V8's runtime each time
 * (~0.7 µs per getter in Node 20), and one request and one response are made per exchange.
 */
class Http1Request implements UpstreamRequest {
  readonly #upReq: http.ClientRequest;
  readonly #caps: Captures;
  #onError: (e: unknown) => void = () => undefined;

  constructor(upReq: http.ClientRequest, caps: Captures) {
    this.#upReq = upReq;
    this.#caps = caps;
    upReq.on("error", (e) => this.#onError(e));
  }

  get reusedConnection(): boolean {
    return this.#upReq.reusedSocket;
  }
  write(chunk: Buffer): boolean {
    return this.#upReq.write(chunk);
  }
  end(): void {
    this.#upReq.end();
  }
  onDrain(cb: () => void): void {
    this.#upReq.on("drain", cb);
  }
  onInterim(cb: (status: number, rawHeaders: string[]) => void): void {
    this.#upReq.on("information", (info: http.InformationEvent) => cb(info.statusCode, info.rawHeaders));
  }
  onResponse(cb: (res: UpstreamResponse) => void): void {
    this.#upReq.on("response", (res: IncomingMessage) => cb(new Http1Response(res)));
  }
  onError(cb: (e: unknown) => void): void {
    this.#onError = cb;
  }
  destroy(e?: Error): void {
    this.#upReq.destroy(e);
  }
  stopCapture(): void {
    detach(this.#caps);
  }
  setIdleTimeout(ms: number, cb: () => void): void {
    this.#upReq.setTimeout(ms, cb);
  }
}

class Http1Response implements UpstreamResponse {
  readonly status: number;
  readonly reason: string | undefined;
  readonly rawHeaders: string[];
  readonly body: IncomingMessage;

  constructor(res: IncomingMessage) {
    this.status = res.statusCode ?? 502;
    this.reason = res.statusMessage;
    this.rawHeaders = res.rawHeaders;
    this.body = res;
  }

  get complete(): boolean {
    return this.body.complete;
  }
}

/** How a request goes: through which agent, with which limits on the response head. */
export interface RequestVia {
  agent: http.Agent;
  maxHeaderSize: number;
  insecureHTTPParser?: boolean;
}

/**
 * Where and what to send: the header list exactly as given (no Host of Node's own). One object
 * literal, no spread: in Node 20's V8 every property after a spread is defined through the runtime
 * (~1 µs each), and this runs for every request.
 */
export function requestOptions(t: Target, method: string, headers: string[], via: RequestVia): http.RequestOptions {
  return {
    host: t.host,
    port: t.port,
    method,
    path: t.path,
    headers: headers as unknown as http.OutgoingHttpHeaders,
    setHost: false,
    agent: via.agent,
    maxHeaderSize: via.maxHeaderSize,
    insecureHTTPParser: via.insecureHTTPParser,
  };
}

function clientRequest(ctx: ProxyContext, t: Target, method: string, headers: string[]): http.ClientRequest {
  const { upstream } = ctx.config;
  const secure = t.scheme === "https";
  const via = { agent: secure ? ctx.connector.https : ctx.connector.http, maxHeaderSize: upstream.maxHeaderBytes, insecureHTTPParser: upstream.lenientParsing };
  const opts = requestOptions(t, method, headers, via);
  const r = secure ? https.request(opts) : http.request(opts);
  // No 2000-field cap (Node's default would drop the rest silently): every field reaches the
  // client; upstream.maxHeaderBytes bounds the section.
  r.maxHeadersCount = 0;
  return r;
}

/** Attach the captures to whichever pooled socket the request gets. */
function attach(ctx: ProxyContext, upReq: http.ClientRequest, caps: Captures, rejectInvalidCerts: boolean): void {
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

/** Stop feeding the captures: the socket's next bytes belong to another exchange. */
function detach(caps: Captures): void {
  if (caps.tap?.current) caps.tap.current = null;
}
