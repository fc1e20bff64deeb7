import { createHash, timingSafeEqual } from "node:crypto";
import type { Socket } from "node:net";
import type { Session } from "../archive/sessions.js";
import type { ProxyContext } from "./context.js";
import { headerValues } from "./headers.js";

const SESSION = Symbol("lathe.session");
const NEEDS_CREDENTIALS = Symbol("lathe.needsCredentials");

/**
 * A session port reachable from other hosts without an allow-list (proxy.host not loopback,
 * proxy.allowClients empty) would be open to anyone who finds it: there, requests arriving on
 * the port itself must carry that session's credentials too (README "Security").
 */
export function requireSessionCredentials(socket: Socket, yes: boolean): void {
  (socket as unknown as Record<symbol, boolean>)[NEEDS_CREDENTIALS] = yes;
}

/** Tie a client connection to a session (its own port, or an authenticated CONNECT tunnel). */
export function markSession(socket: Socket, s: Session | null): void {
  if (s) (socket as unknown as Record<symbol, Session>)[SESSION] = s;
}

export function sessionMark(socket: Socket): Session | null {
  return (socket as unknown as Record<symbol, Session | undefined>)[SESSION] ?? null;
}

/**
 * The session of a request: from its connection, else from `Proxy-Authorization` (Basic,
 * username = session id). `"invalid"` means credentials were sent and are wrong: 407.
 */
export function sessionOf(ctx: ProxyContext, socket: Socket, rawHeaders: string[]): Session | null | "invalid" {
  const marked = sessionMark(socket);
  // The first field wins, as in Node's merged headers (a duplicate Proxy-Authorization is dropped).
  const auth = headerValues(rawHeaders, "proxy-authorization")[0];
  if (marked) {
    if (marked.closed) return "invalid";
    if ((socket as unknown as Record<symbol, boolean | undefined>)[NEEDS_CREDENTIALS]) {
      return ctx.sessions.fromProxyAuthorization(auth) === marked ? marked : "invalid";
    }
    return marked;
  }
  const s = ctx.sessions.fromProxyAuthorization(auth);
  const p = ctx.config.proxy;
  if (s) return s;
  if (p.auth === "required") {
    // The default collection's own credentials, when configured; anything else is a 407.
    if (auth && p.defaultUser !== null && p.defaultPassword !== null && sameSecret(auth, `Basic ${Buffer.from(`${p.defaultUser}:${p.defaultPassword}`).toString("base64")}`)) return null;
    return "invalid";
  }
  return s === undefined ? null : "invalid";
}

export const PROXY_AUTH_REQUIRED =
  "lathe: the Proxy-Authorization credentials do not name an open session (username = session id, password = the token returned when it was opened)";

function sameSecret(a: string, b: string): boolean {
  const h = (x: string) => createHash("sha256").update(x.trim()).digest();
  return timingSafeEqual(h(a), h(b));
}
