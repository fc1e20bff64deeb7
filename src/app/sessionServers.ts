/** Each recording session's own proxy port: started when the session opens, closed with it (or at shutdown). */
import type { Session } from "../archive/sessions.js";
import type { ProxyContext } from "../proxy/context.js";
import type { LeafSource } from "../proxy/leafSource.js";
import { type ProxyServer, createProxyServer } from "../proxy/server.js";
import type { OwnEndpoints } from "./upstream.js";

export class SessionServers {
  readonly #servers = new Map<string, ProxyServer>();
  readonly #ctx: ProxyContext;
  readonly #leafSource: LeafSource;
  readonly #own: OwnEndpoints;

  constructor(ctx: ProxyContext, leafSource: LeafSource, own: OwnEndpoints) {
    this.#ctx = ctx;
    this.#leafSource = leafSource;
    this.#own = own;
  }

  /** A proxy server bound to `session` on `wanted` (0 = ephemeral) of the proxy host; its port is one of lathe's own while it listens. */
  start = async (session: Session, wanted: number): Promise<{ server: ProxyServer; port: number }> => {
    const server = createProxyServer(this.#ctx, this.#leafSource, { session });
    const addr = await server.listen(wanted, this.#ctx.config.proxy.host);
    this.#servers.set(session.id, server);
    server.server.once("close", () => this.#servers.delete(session.id));
    this.#own.set(`session:${session.id}`, addr);
    const closeServer = server.close.bind(server);
    server.close = (graceMs) => {
      this.#own.delete(`session:${session.id}`);
      return closeServer(graceMs);
    };
    return { server, port: addr.port };
  };

  closeAll(graceMs: number): Promise<unknown> {
    return Promise.all([...this.#servers.values()].map((p) => p.close(graceMs)));
  }
}
