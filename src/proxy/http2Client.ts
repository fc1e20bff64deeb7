/**
 * The HTTP/2 client leg (http2.md §1, §3): inside an intercepted tunnel whose client chose ALPN
 * `h2`, each stream is one exchange, handed to the same code as an HTTP/1.1 request. The core
 * http2 API is used (not the compatibility layer): the raw header list keeps names and order.
 */
import http2, { type Http2Server, type Http2Session, type IncomingHttpHeaders, type ServerHttp2Stream } from "node:http2";
import type { Socket } from "node:net";
import type { Config } from "../config/schema.js";
import type { ClientLeg, ResponseHead } from "./clientLeg.js";
import { answerPlain } from "./clientLeg.js";
import type { ProxyContext } from "./context.js";
import type { TunnelTarget } from "./connect.js";
import { H2_CONNECTION_SPECIFIC, fieldsObject, headerValues } from "./headers.js";
import { defaultPort, hostForUri, targetIn } from "./target.js";

const { NGHTTP2_FLAG_END_STREAM, NGHTTP2_INTERNAL_ERROR } = http2.constants;


/** The server that speaks h2 on decrypted tunnel sockets it is handed (`emit("connection")`). */
export function createH2TunnelServer(ctx: ProxyContext, tunnelOf: (s: Socket) => TunnelTarget | undefined, onExchange: (leg: ClientLeg) => void): Http2Server {
  const server = http2.createServer(h2Options(ctx.config));
  server.on("session", (session: Http2Session) => {
    session.on("error", (e) => ctx.log.debug("client-h2-session-error", { error: e }));
    closeWhenIdle(session, ctx.config.proxy.keepAliveTimeoutMs);
  });
  server.on("stream", (stream: ServerHttp2Stream, headers: IncomingHttpHeaders, flags: number, rawHeaders: string[]) => {
    stream.on("error", (e) => ctx.log.debug("client-h2-stream-error", { error: e }));
    const tunnel = tunnelOf(stream.session?.socket as Socket);
    if (!tunnel) return stream.close(NGHTTP2_INTERNAL_ERROR);
    const leg = legOf(stream, rawHeaders, flags, tunnel);
    if (typeof leg === "string") {
      stream.resume();
      return answerPlainOnStream(stream, tunnel, leg === "misdirected" ? 421 : 400, leg === "misdirected"
        ? `lathe: the request's :authority ${JSON.stringify(headers[":authority"] ?? headers.host)} is not this tunnel's host (${tunnel.host}:${tunnel.port}) (RFC 9113 §9.1.2): open a tunnel to that host`
        : "lathe: CONNECT inside an intercepted tunnel is not supported");
    }
    // Node's HTTP/1.1 server answers `Expect: 100-continue` itself; an h2 stream needs it said.
    if (String(headers.expect ?? "").toLowerCase() === "100-continue") stream.additionalHeaders({ ":status": 100 });
    onExchange(leg);
  });
  return server;
}

function h2Options(config: Config): http2.ServerOptions {
  return {
    settings: {
      // lathe never pushes, and does not offer RFC 8441 WebSockets (they use HTTP/1.1 Upgrade).
      enablePush: false,
      enableConnectProtocol: false,
      maxHeaderListSize: config.proxy.maxHeaderBytes,
    },
    // Node's defaults are too low for a proxy: 10 MB of session memory rejects streams under
    // load (ENHANCE_YOUR_CALM), 128 header pairs are fewer than some sites send (http2.md §4).
    maxSessionMemory: 256,
    maxHeaderListPairs: 100_000,
  };
}

/** A session without open streams for `ms` is closed (GOAWAY), like an idle keep-alive connection. */
function closeWhenIdle(session: Http2Session, ms: number): void {
  let open = 0;
  let timer: NodeJS.Timeout | null = null;
  const arm = () => {
    timer = setTimeout(() => session.close(), ms);
    timer.unref();
  };
  session.on("stream", (stream: ServerHttp2Stream) => {
    open++;
    if (timer) clearTimeout(timer);
    stream.once("close", () => {
      if (--open === 0 && !session.closed) arm();
    });
  });
  session.once("close", () => timer && clearTimeout(timer));
  arm();
}

/** The exchange's view of one stream, or why the stream is refused. */
function legOf(stream: ServerHttp2Stream, raw: string[], flags: number, tunnel: TunnelTarget): ClientLeg | "misdirected" | "connect" {
  const pseudo = new Map<string, string>();
  const fields: string[] = [];
  for (let i = 0; i < raw.length; i += 2) {
    if (raw[i]!.startsWith(":")) pseudo.set(raw[i]!, raw[i + 1]!);
    else fields.push(raw[i]!, raw[i + 1]!);
  }
  const method = pseudo.get(":method") ?? "GET";
  if (method === "CONNECT") return "connect";
  const authority = pseudo.get(":authority") ?? headerValues(fields, "host")[0];
  if (authority !== undefined && !sameAuthority(authority, tunnel)) return "misdirected";
  const target = targetIn(tunnel, pseudo.get(":path") ?? "/");
  return http2ClientLeg(stream, { method, target, rawHeaders: joinCookies(fields) }, (flags & NGHTTP2_FLAG_END_STREAM) === 0);
}

/** `host[:port]` names the tunnel's target (case-insensitive host, default port when omitted). */
function sameAuthority(authority: string, t: TunnelTarget): boolean {
  const m = /^(\[[^\]]+\]|[^:]+)(?::(\d+))?$/.exec(authority.trim());
  if (!m) return false;
  const port = m[2] === undefined ? defaultPort(t.scheme) : Number(m[2]);
  return m[1]!.toLowerCase() === hostForUri(t.host.toLowerCase()) && port === t.port;
}

/**
 * h2 clients may split `cookie` into crumbs, one field each; toward HTTP/1.1 they must be one
 * field joined with "; " (RFC 9113 §8.2.3), kept where the first crumb was (http2.md §2.5).
 */
export function joinCookies(fields: string[]): string[] {
  const crumbs: string[] = [];
  for (let i = 0; i < fields.length; i += 2) if (fields[i]!.toLowerCase() === "cookie") crumbs.push(fields[i + 1]!);
  if (crumbs.length < 2) return fields;
  const out: string[] = [];
  for (let i = 0; i < fields.length; i += 2) {
    if (fields[i]!.toLowerCase() !== "cookie") out.push(fields[i]!, fields[i + 1]!);
    else if (crumbs.length) out.push(fields[i]!, crumbs.splice(0).join("; "));
  }
  return out;
}

function http2ClientLeg(stream: ServerHttp2Stream, head: ClientLeg["head"], hasBody: boolean): ClientLeg {
  return new Http2ClientLeg(stream, head, hasBody);
}

/** A class, not an object literal with getters: those are built through V8's runtime each time (~3.7 µs for three in Node 20). */
class Http2ClientLeg implements ClientLeg {
  readonly #stream: ServerHttp2Stream;
  readonly protocol = "h2";
  readonly socket: Socket;

  constructor(
    stream: ServerHttp2Stream,
    readonly head: ClientLeg["head"],
    readonly hasBody: boolean,
  ) {
    this.#stream = stream;
    this.socket = stream.session!.socket as Socket;
  }

  get body(): ServerHttp2Stream {
    return this.#stream;
  }
  get headSent(): boolean {
    return this.#stream.headersSent;
  }
  get gone(): boolean {
    const s = this.#stream;
    return s.destroyed || s.closed || s.writableEnded;
  }
  get needsDrain(): boolean {
    return this.#stream.writableNeedDrain;
  }
  sendHead(h: ResponseHead): void {
    this.#stream.respond(h2Headers(h), withDate(false));
  }
  sendInterim(status: number, headers: string[]): void {
    const s = this.#stream;
    if (!s.headersSent && !s.destroyed) s.additionalHeaders(h2Headers({ status, headers }));
  }
  write(chunk: Buffer): boolean {
    return this.#stream.write(chunk);
  }
  onDrain(cb: () => void): void {
    this.#stream.on("drain", cb);
  }
  end(last?: Buffer): void {
    if (last) this.#stream.end(last);
    else this.#stream.end();
  }
  /** RST_STREAM: the client sees an incomplete response, never a complete wrong one. */
  destroy(): void {
    this.#stream.close(NGHTTP2_INTERNAL_ERROR);
  }
  onClose(cb: (delivered: boolean) => void): void {
    const s = this.#stream;
    s.once("close", () => cb(s.writableFinished));
  }
  answer(h: ResponseHead, body: Buffer | undefined): void {
    const s = this.#stream;
    if (s.destroyed || s.closed) return;
    s.respond(h2Headers(h), Object.assign(withDate(true), { endStream: body === undefined }));
    if (body !== undefined) s.end(body);
  }
  discardBody(): void {
    this.#stream.resume();
  }
}

/**
 * Node adds a `date` field to every h2 response unless told not to (`sendDate`, which its types
 * do not list): the origin's head goes out as it came, lathe's own answers carry a date.
 */
function withDate(sendDate: boolean): http2.ServerStreamResponseOptions {
  return { sendDate } as http2.ServerStreamResponseOptions;
}

/** An h2 header block from a response head: lowercase names, no connection-specific fields. */
function h2Headers(h: ResponseHead): http2.OutgoingHttpHeaders {
  return { ":status": h.status, ...fieldsObject(h.headers, H2_CONNECTION_SPECIFIC) };
}

/** lathe's own answer on a stream that never became an exchange (421, CONNECT). */
function answerPlainOnStream(stream: ServerHttp2Stream, tunnel: TunnelTarget, status: number, message: string): void {
  answerPlain(http2ClientLeg(stream, { method: "GET", target: targetIn(tunnel, "/"), rawHeaders: [] }, false), status, message);
}
