import type { IncomingMessage } from "node:http";
import type { Socket } from "node:net";
import type { Session } from "../archive/sessions.js";
import type { ProxyContext } from "./context.js";

const SESSION = Symbol("lathe.session");

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
export function sessionOf(ctx: ProxyContext, req: IncomingMessage): Session | null | "invalid" {
  const marked = sessionMark(req.socket);
  if (marked) return marked.closed ? "invalid" : marked;
  const auth = req.headers["proxy-authorization"];
  const s = ctx.sessions.fromProxyAuthorization(Array.isArray(auth) ? auth[0] : auth);
  if (s === undefined) return null;
  return s ?? "invalid";
}

export const PROXY_AUTH_REQUIRED =
  "lathe: the Proxy-Authorization credentials do not name an open session (username = session id, password = the token returned when it was opened)";
