/**
 * HTTP/2 toward origins (http2.md §1): the first TLS connection to an origin offers ALPN `h2`
 * and `http/1.1`; an origin that picks h2 gets one session, its streams multiplexed, and an
 * origin that picks http/1.1 is remembered as such and served by the keep-alive agent (which is
 * handed that first socket). The choice is per origin: host, port and SNI name.
 */
import http2, { type ClientHttp2Session } from "node:http2";
import net from "node:net";
import type tls from "node:tls";
import type { Connector } from "./connector.js";
import { type SocketTap, tapOf } from "./tap.js";

/** How to reach an origin now: a live h2 session, or the HTTP/1.1 agent. */
export type OriginRoute = { kind: "h2"; session: ClientHttp2Session; tap: SocketTap } | { kind: "http/1.1" };

/** At most this many origins are remembered as HTTP/1.1-only (oldest forgotten first). */
const MAX_REMEMBERED = 10_000;

export class H2Pool {
  readonly #connector: Connector;
  readonly #sessions = new Map<string, { session: ClientHttp2Session; tap: SocketTap }>();
  readonly #pending = new Map<string, Promise<OriginRoute>>();
  readonly #http1Only = new Set<string>();

  constructor(connector: Connector) {
    this.#connector = connector;
  }

  /** The route to host:port, connecting (and negotiating) when there is no usable one. */
  route(host: string, port: number): Promise<OriginRoute> | OriginRoute {
    const key = `${host.toLowerCase()}:${port}`;
    if (this.#http1Only.has(key)) return { kind: "http/1.1" };
    const live = this.#sessions.get(key);
    if (live && usable(live.session)) return { kind: "h2", ...live };
    let pending = this.#pending.get(key);
    if (!pending) {
      pending = this.#connect(key, host, port).finally(() => this.#pending.delete(key));
      this.#pending.set(key, pending);
    }
    return pending;
  }

  #connect(key: string, host: string, port: number): Promise<OriginRoute> {
    return new Promise((resolve, reject) => {
      const socket = this.#connector.connectTls(host, port, ["h2", "http/1.1"]);
      const failed = (e: Error) => reject(e);
      socket.once("error", failed);
      socket.once("secureConnect", () => {
        socket.off("error", failed);
        if (socket.alpnProtocol !== "h2") {
          this.#remember(key);
          this.#connector.adoptHttps(socket, host, port);
          return resolve({ kind: "http/1.1" });
        }
        resolve(this.#open(key, host, port, socket));
      });
    });
  }

  #open(key: string, host: string, port: number, socket: tls.TLSSocket): OriginRoute {
    const authority = `https://${net.isIP(host) === 6 ? `[${host}]` : host}:${port}`;
    const session = http2.connect(authority, {
      createConnection: () => socket,
      // No push (http2.md §1); Node's 10 MB session memory and 128 header pairs are too low for a proxy.
      settings: { enablePush: false },
      maxSessionMemory: 256,
      maxHeaderListPairs: 100_000,
    });
    const entry = { session, tap: tapOf(socket)! };
    this.#sessions.set(key, entry);
    const forget = () => {
      if (this.#sessions.get(key) === entry) this.#sessions.delete(key);
    };
    // After GOAWAY no new stream may start here; the streams in flight finish (RFC 9113 §6.8).
    session.once("goaway", forget);
    session.once("close", forget);
    session.on("error", () => forget());
    // An idle session does not keep lathe (or a test) alive.
    socket.unref();
    return { kind: "h2", ...entry };
  }

  #remember(key: string): void {
    if (this.#http1Only.size >= MAX_REMEMBERED) this.#http1Only.delete(this.#http1Only.values().next().value!);
    this.#http1Only.add(key);
  }

  close(): void {
    for (const { session } of this.#sessions.values()) session.destroy();
    this.#sessions.clear();
  }
}

function usable(s: ClientHttp2Session): boolean {
  return !s.closed && !s.destroyed;
}
