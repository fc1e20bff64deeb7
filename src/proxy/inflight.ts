import type { Session } from "../archive/sessions.js";
import type { ProxyContext } from "./context.js";

/**
 * Count an exchange as in flight, for a graceful stop and for its session (which waits for its
 * captures when it closes). The returned function ends the count; calling it again does nothing.
 */
export function countInflight(ctx: ProxyContext, session: Session | null): () => void {
  const begun = ctx.begin();
  if (session) session.inflight++;
  let ended = false;
  return () => {
    if (ended) return;
    ended = true;
    if (session) session.inflight--;
    begun();
  };
}
