import http, { type IncomingMessage, type ServerResponse } from "node:http";
import net, { type AddressInfo, type Socket } from "node:net";
import { handleWriteRecord, isWriteRecordStart } from "../warcprox/writeRecord.js";
import { answerWarcproxRoute } from "../warcprox/proxyPortRoutes.js";
import { markSession, requireSessionCredentials } from "./sessionOf.js";
import type { Session } from "../archive/sessions.js";
import { ProxyError } from "../core/errors.js";
import type { ProxyContext } from "./context.js";
import { handleConnect, tunnelOf, type TunnelServers } from "./connect.js";
import { handleExchange } from "./exchange.js";
import { http1ClientLeg } from "./http1Client.js";
import { createH2TunnelServer } from "./http2Client.js";
import type { LeafSource } from "./leafSource.js";
import { sendPlain, sendPlainOnSocket } from "./respond.js";
import { type Target, parseAbsoluteForm, targetIn } from "./target.js";
import { handleUpgrade } from "./upgrade.js";
import { cidrMatcher } from "../core/cidr.js";
import { isLoopbackHost } from "../config/validate.js";

export interface ProxyServer {
  listen(port: number, host: string): Promise<AddressInfo>;
  /** Stop accepting, let exchanges in flight finish (up to graceMs) and be archived. */
  close(graceMs?: number): Promise<void>;
  readonly server: http.Server;
}

function serverOptions(ctx: ProxyContext): http.ServerOptions {
  const p = ctx.config.proxy;
  return {
    maxHeaderSize: p.maxHeaderBytes,
    headersTimeout: p.headersTimeoutMs,
    requestTimeout: 0,
    keepAliveTimeout: p.keepAliveTimeoutMs,
    // How often Node checks headersTimeout (default every 30 s, so a 30 s limit could take 60).
    connectionsCheckingInterval: Math.max(50, Math.min(1000, Math.floor(p.headersTimeoutMs / 4))),
    // HTTP/1.0 clients may send absolute-form requests without Host.
    requireHostHeader: false,
    joinDuplicateHeaders: false,
  } as http.ServerOptions;
}

/** Target of a request: from the tunnel it came through, or from its absolute-form URL. */
function targetOf(req: IncomingMessage): Target | null {
  const tunnel = tunnelOf(req.socket);
  if (tunnel) {
    const url = req.url ?? "/";
    if (url.startsWith("/")) return targetIn(tunnel, url);
    const abs = parseAbsoluteForm(url);
    return abs ? targetIn(tunnel, abs.path) : null;
  }
  return parseAbsoluteForm(req.url ?? "");
}

function onRequest(ctx: ProxyContext, req: IncomingMessage, res: ServerResponse): void {
  // Requests to the proxy itself (origin-form, not through a tunnel): warcprox's own routes.
  if (!tunnelOf(req.socket) && answerWarcproxRoute(ctx, req, res)) return;
  const framing = requestFramingProblem(req);
  if (framing) {
    // Refused before anything goes upstream; the connection is closed, as it may be out of step.
    req.resume();
    res.shouldKeepAlive = false;
    sendPlain(res, framing.status, framing.message, ["Connection", "close"]);
    return;
  }
  const t = targetOf(req);
  if (!t) {
    req.resume();
    res.shouldKeepAlive = false;
    sendPlain(
      res,
      400,
      req.url?.startsWith("/")
        ? `lathe is a recording proxy: configure your client to use it as its HTTP proxy (got origin-form request ${JSON.stringify(req.url)})`
        : `lathe: cannot parse request target ${JSON.stringify(req.url)}: expected http://host[:port]/path`,
    );
    return;
  }
  handleExchange(ctx, http1ClientLeg(req, res, t));
}

/**
 * What Node's strict parser lets through but lathe refuses, so that lathe and the origin can
 * never frame a request differently (request smuggling): a Transfer-Encoding other than plain
 * `chunked` (e.g. `identity, chunked`), and HTTP versions other than 1.0 and 1.1 (0.9, 2.0 in
 * an HTTP/1 request line).
 */
function requestFramingProblem(req: IncomingMessage): { status: number; message: string } | null {
  if (req.httpVersionMajor !== 1 || req.httpVersionMinor > 1) {
    return { status: 505, message: `lathe: HTTP/${req.httpVersion} is not supported: send HTTP/1.1 or HTTP/1.0` };
  }
  const te = req.headers["transfer-encoding"];
  if (te !== undefined && !/^\s*chunked\s*$/i.test(te)) {
    return { status: 400, message: `lathe: Transfer-Encoding ${JSON.stringify(te)} is not accepted in a request: only "chunked"` };
  }
  return null;
}

/** Client-side protocol errors: malformed request → 400, header section too large → 431. */
function onClientError(ctx: ProxyContext, err: Error & { code?: string }, socket: Socket): void {
  ctx.log.debug("client-error", { code: err.code, error: err.message });
  if (err.code === "ECONNRESET" || !socket.writable) {
    socket.destroy();
    return;
  }
  if (err.code === "HPE_HEADER_OVERFLOW") {
    sendPlainOnSocket(socket, 431, `lathe: request header section exceeds ${ctx.config.proxy.maxHeaderBytes} bytes (proxy.maxHeaderBytes)`);
  } else if (err.code === "ERR_HTTP_REQUEST_TIMEOUT" || err.code === "ERR_HTTP_HEADERS_TIMEOUT") {
    sendPlainOnSocket(socket, 408, "lathe: request headers not received in time (proxy.headersTimeoutMs)");
  } else {
    sendPlainOnSocket(socket, 400, `lathe: malformed request (${err.code ?? "parse error"}: ${err.message})`);
  }
}

/** The main proxy port, or (with `session`) a session's own port: every connection is that session's. */
export function createProxyServer(ctx: ProxyContext, leaves: LeafSource, bound: { session?: Session } = {}): ProxyServer {
  const opts = serverOptions(ctx);
  const requestHandler = (req: IncomingMessage, res: ServerResponse) => onRequest(ctx, req, res);
  const tunnels: TunnelServers = {
    https: http.createServer(opts, requestHandler),
    http: http.createServer(opts, requestHandler),
    h2: createH2TunnelServer(ctx, tunnelOf, (leg) => handleExchange(ctx, leg)),
  };
  const server = http.createServer(opts, requestHandler);
  // Every header field reaches the origin and the record; proxy.maxHeaderBytes bounds the
  // section (Node would silently drop fields after the 2000th).
  for (const s of [server, tunnels.https, tunnels.http]) s.maxHeadersCount = 0;
  // These servers never listen themselves (connections arrive from the listener below), and
  // Node starts the tracking that enforces headersTimeout, and that closeIdleConnections()
  // needs, on "listening": without this, a client dripping header bytes was never timed out.
  for (const s of [server, tunnels.https, tunnels.http]) s.emit("listening");
  for (const s of [server, tunnels.https, tunnels.http]) {
    s.on("clientError", (err, socket) => onClientError(ctx, err as Error & { code?: string }, socket as Socket));
    s.on("upgrade", (req: IncomingMessage, socket: Socket, head: Buffer) => {
      const t = targetOf(req);
      if (!t) {
        sendPlainOnSocket(socket, 400, `lathe: cannot parse request target ${JSON.stringify(req.url)}`);
        return;
      }
      handleUpgrade(ctx, req, socket, head, t);
    });
  }
  server.on("connect", (req: IncomingMessage, socket: Socket, head: Buffer) => handleConnect(ctx, leaves, tunnels, req, socket, head));

  // Connections are accepted here, not by the HTTP server: the first bytes tell a warcprox
  // WARCPROX_WRITE_RECORD (a method Node's parser refuses) from ordinary HTTP.
  const sockets = new Set<Socket>();
  // proxy.allowClients: anyone else is closed before a byte is read (README "Security").
  const allowList = ctx.config.proxy.allowClients;
  const allowed = allowList.length > 0 ? cidrMatcher(allowList) : null;
  const exposed = !allowed && !isLoopbackHost(ctx.config.proxy.host);
  const listener = net.createServer({ noDelay: true }, (s: Socket) => {
    if (allowed && !allowed(s.remoteAddress ?? "")) {
      ctx.log.debug("client-refused", { address: s.remoteAddress, reason: "not in proxy.allowClients" });
      s.on("error", () => undefined);
      s.destroy();
      return;
    }
    sockets.add(s);
    s.once("close", () => sockets.delete(s));
    s.on("error", () => s.destroy());
    if (bound.session) {
      markSession(s, bound.session);
      if (exposed) requireSessionCredentials(s, true);
    }
    // Node's headersTimeout starts with the parser; a client that connects and never sends a
    // byte is closed here, after the same time (slowloris, idle connection floods).
    const silent = setTimeout(() => {
      ctx.log.debug("client-timeout", { address: s.remoteAddress, reason: "no request within proxy.headersTimeoutMs" });
      s.destroy();
    }, ctx.config.proxy.headersTimeoutMs);
    silent.unref();
    s.once("close", () => clearTimeout(silent));
    s.once("data", (first: Buffer) => {
      clearTimeout(silent);
      s.pause();
      if (isWriteRecordStart(first)) {
        handleWriteRecord(ctx, s, first);
      } else {
        s.unshift(first);
        server.emit("connection", s);
      }
      s.resume();
    });
  });

  return {
    server,
    listen(port, host) {
      return new Promise((resolve, reject) => {
        const onErr = (e: Error & { code?: string }) =>
          reject(new ProxyError("ERR_CONFIG", `cannot listen on ${host}:${port}: ${e.code ?? e.message}${e.code === "EADDRINUSE" ? " (another process uses that port: choose another with --port)" : ""}`, e));
        listener.once("error", onErr);
        listener.listen(port, host, () => {
          listener.off("error", onErr);
          resolve(listener.address() as AddressInfo);
        });
      });
    },
    async close(graceMs = 10_000) {
      // Stop accepting; idle keep-alive connections go now, exchanges in flight may finish.
      const closed = new Promise<void>((resolve) => listener.close(() => resolve()));
      for (const s of [server, tunnels.https, tunnels.http]) s.closeIdleConnections();
      const grace = new Promise<void>((resolve) => setTimeout(resolve, graceMs).unref());
      await Promise.race([ctx.idle(), grace]);
      // Whatever is still running is cut off; it is recorded as truncated, then we are done.
      for (const s of sockets) s.destroy();
      await Promise.race([ctx.idle(), new Promise((r) => setTimeout(r, 5000).unref())]);
      await Promise.race([closed, new Promise((r) => setTimeout(r, 100).unref())]);
      // Stops the connection-checking timers started above.
      for (const s of [server, tunnels.https, tunnels.http]) s.close(() => undefined);
    },
  };
}
