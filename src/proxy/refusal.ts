import { isIP } from "node:net";
import type { Session } from "../archive/sessions.js";
import type { ProxyContext } from "./context.js";
import { hostMatches } from "./target.js";

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
