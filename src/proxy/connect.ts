import type { IncomingMessage, Server } from "node:http";
import type { Http2Server } from "node:http2";
import net, { type Socket } from "node:net";
import tls from "node:tls";
import type { LeafSource } from "./leafSource.js";
import type { ProxyContext } from "./context.js";
import { refusal } from "./refusal.js";
import { sendPlainOnSocket } from "./respond.js";
import { parseConnectTarget } from "./target.js";
import { markSession, requireSessionCredentials, sessionOf } from "./sessionOf.js";

/** Where the requests arriving on a tunnel go: the CONNECT target. */
export interface TunnelTarget {
  scheme: "http" | "https";
  host: string;
  port: number;
}

const TUNNEL = Symbol("lathe.tunnel");

export function tunnelOf(socket: Socket): TunnelTarget | undefined {
  return (socket as unknown as Record<symbol, TunnelTarget | undefined>)[TUNNEL];
}

function markTunnel(socket: Socket, t: TunnelTarget): void {
  (socket as unknown as Record<symbol, TunnelTarget>)[TUNNEL] = t;
}

export interface TunnelServers {
  /** Serves the decrypted requests of intercepted TLS tunnels. */
  https: Server;
  /** Serves plain HTTP sent inside a tunnel (e.g. ws:// through a proxy). */
  http: Server;
  /** Serves intercepted TLS tunnels whose client chose HTTP/2 (ALPN `h2`). */
  h2: Http2Server;
}

/**
 * CONNECT host:port → answer 200, then look at the first byte the client sends: a TLS handshake
 * (0x16) is terminated with a leaf for the CONNECT host (or the SNI name) and its requests are
 * served like any other; anything else is treated as plain HTTP for that host.
 */
export function handleConnect(
  ctx: ProxyContext,
  leaves: LeafSource,
  servers: TunnelServers,
  req: IncomingMessage,
  socket: Socket,
  head: Buffer,
): void {
  const target = parseConnectTarget(req.url ?? "");
  socket.on("error", (e) => ctx.log.debug("client-socket-error", { error: e }));
  if (!target) {
    sendPlainOnSocket(socket, 400, `lathe: CONNECT needs host:port, got ${JSON.stringify(req.url)}`);
    return;
  }
  // Credentials on the CONNECT select the session of every request inside the tunnel.
  const session = sessionOf(ctx, req.socket, req.rawHeaders);
  if (session === "invalid") {
    socket.end(`HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic realm="lathe"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n`);
    return;
  }
  const refused = refusal(ctx, target.host, session, target.port);
  if (refused) {
    sendPlainOnSocket(socket, refused.status, refused.message);
    return;
  }
  markSession(socket, session);
  // The CONNECT carried the credentials; the requests inside the tunnel need not repeat them.
  requireSessionCredentials(socket, false);
  socket.setNoDelay(true);
  socket.write("HTTP/1.1 200 Connection Established\r\n\r\n");
  const timer = setTimeout(() => {
    ctx.log.debug("tunnel-timeout", { host: target.host, reason: "no TLS handshake" });
    socket.destroy();
  }, ctx.config.proxy.tlsHandshakeTimeoutMs);
  timer.unref();

  const dispatch = (first: Buffer) => {
    if (first.length > 0) socket.unshift(first);
    if (first[0] === 0x16) {
      let tlsSocket: tls.TLSSocket;
      try {
        tlsSocket = new tls.TLSSocket(socket, {
          isServer: true,
          // Given to the socket as it is made: the context may present another leaf by the next call.
          secureContext: leaves.contextFor(target.host),
          SNICallback: leaves.sniCallbackFor(target.host),
          ALPNProtocols: ctx.config.proxy.http2 ? ["h2", "http/1.1"] : ["http/1.1"],
        });
      } catch (e) {
        ctx.log.error("leaf-failed", { host: target.host, error: e });
        socket.destroy();
        clearTimeout(timer);
        return;
      }
      tlsSocket.once("secure", () => clearTimeout(timer));
      tlsSocket.on("error", (e) => {
        clearTimeout(timer);
        ctx.log.debug("client-tls-error", { host: target.host, error: e });
        tlsSocket.destroy();
      });
      markTunnel(tlsSocket, { scheme: "https", ...target });
      markSession(tlsSocket, session);
      // The protocol is known once the handshake is done: ALPN picks the server.
      tlsSocket.once("secure", () => {
        if (tlsSocket.alpnProtocol === "h2") {
          // Node clears this flag only on sockets a tls.Server made; an h2 session on any other
          // TLS socket waits for a 'secureConnect' that a server socket never emits.
          (tlsSocket as unknown as { secureConnecting: boolean }).secureConnecting = false;
          servers.h2.emit("connection", tlsSocket);
          return;
        }
        servers.https.emit("connection", tlsSocket);
        // A tunnel whose TLS is up but which never sends a request: closed like any silent connection.
        const silent = setTimeout(() => {
          ctx.log.debug("tunnel-timeout", { host: target.host, reason: "no request within proxy.headersTimeoutMs" });
          tlsSocket.destroy();
        }, ctx.config.proxy.headersTimeoutMs);
        silent.unref();
        tlsSocket.once("data", () => clearTimeout(silent));
        tlsSocket.once("close", () => clearTimeout(silent));
      });
    } else {
      clearTimeout(timer);
      markTunnel(socket, { scheme: "http", ...target });
      servers.http.emit("connection", socket);
      // The first chunk was unshifted into the paused stream; Node's HTTP server reads the
      // handle directly (parser.consume) and never resumes it, so the request would sit unread.
      socket.resume();
    }
  };

  if (head.length > 0) {
    dispatch(head);
  } else {
    // The 200 is on its way: mint the leaf (or touch the cached one) while the client prepares
    // its ClientHello, instead of after it arrives. Plain HTTP tunnels are mostly port 80.
    if (target.port !== 80) {
      try {
        leaves.prepare(target.host);
      } catch {
        // dispatch reports it, if the client does start a handshake
      }
    }
    socket.once("data", (chunk: Buffer) => {
      socket.pause();
      dispatch(chunk);
    });
  }
}

export function isIpLiteral(host: string): boolean {
  return net.isIP(host) !== 0;
}
