/**
 * One request through lathe, from its arrival to its admission: which session and collection it
 * belongs to, its Warcprox-Meta policy, the warcprox rule answers (limits, then blocks) before
 * any DNS lookup (warcprox-compat.md §0), and the writer's back-pressure. Admitted exchanges go
 * on in forward.ts. Works on a ClientLeg, so every client protocol takes the same path.
 */
import { blockAnswer, matchBlock } from "../warcprox/blocks.js";
import { WarcproxMetaError } from "../warcprox/warcproxMeta.js";
import { rejectMeta, sendRuleAnswer } from "./answers.js";
import { whenBacklogRoom } from "./backlog.js";
import { type ClientLeg, answerPlain } from "./clientLeg.js";
import type { ProxyContext } from "./context.js";
import { forwardExchange } from "./forward.js";
import { politeExchange } from "./politeExchange.js";
import { type RequestPolicy, requestPolicy } from "./requestPolicy.js";
import { PROXY_AUTH_REQUIRED, sessionOf } from "./sessionOf.js";
import { targetUri } from "./target.js";

export function handleExchange(ctx: ProxyContext, client: ClientLeg): void {
  const policy = policyOf(ctx, client);
  if (!policy) return;
  const uri = targetUri(client.head.target);
  const noRevisit = policy.noArchive || policy.dedupPolicy.policy === "off";
  const left = leaveSignal(client);
  const admitting = ctx.stats.admit(policy.meta, uri, {
    mayBeNew: !policy.noArchive,
    mayBeRevisit: !noRevisit,
    waitTimeoutMs: ctx.config.upstream.headTimeoutMs,
    get signal() {
      return left.signal;
    },
  });
  admitting.then(
    (a) => {
      if (!a.ok) {
        client.discardBody();
        return sendRuleAnswer(client, a.answer);
      }
      const rule = matchBlock(policy.meta?.blocks, uri);
      if (rule) {
        a.release(null);
        client.discardBody();
        return sendRuleAnswer(client, blockAnswer(rule));
      }
      // Politeness is off unless the collection turns it on; a person browsing is never held back.
      const go = policy.collection.politeness.enabled && !policy.session?.options.exemptFromPoliteness ? politeExchange : forwardExchange;
      const room = whenBacklogRoom(ctx.archiver);
      if (!room) return go(ctx, client, policy, a);
      void room.then(() => {
        if (client.gone) return a.release(null);
        go(ctx, client, policy, a);
      });
    },
    (e) => {
      if (left.aborted) return;
      ctx.log.error("admit-failed", { uri, error: e });
      answerPlain(client, 500, `lathe: ${(e as Error).message}`);
    },
  );
}

/**
 * A signal that aborts when the client leaves, so that an admission waiting for a limit's
 * verdict stops waiting. Made on first use: most admissions never wait, and a controller, a
 * close listener and an Error (with its stack) per exchange showed up in the profile (#25).
 */
function leaveSignal(client: ClientLeg): { readonly signal: AbortSignal; readonly aborted: boolean } {
  let controller: AbortController | null = null;
  return {
    get signal() {
      if (!controller) {
        const c = (controller = new AbortController());
        if (client.gone) c.abort(new Error("the client went away"));
        else client.onClose(() => c.abort(new Error("the client went away")));
      }
      return controller.signal;
    },
    get aborted() {
      return controller?.signal.aborted === true;
    },
  };
}

/** The request's session and policy, or null once the client has been answered (407, 400). */
function policyOf(ctx: ProxyContext, client: ClientLeg): RequestPolicy | null {
  const session = sessionOf(ctx, client.socket, client.head.rawHeaders);
  if (session === "invalid") {
    client.discardBody();
    answerPlain(client, 407, PROXY_AUTH_REQUIRED, ["Proxy-Authenticate", 'Basic realm="lathe"']);
    return null;
  }
  try {
    return requestPolicy(ctx.config, ctx.collections, client.head.rawHeaders, session);
  } catch (e) {
    client.discardBody();
    if (e instanceof WarcproxMetaError) {
      rejectMeta(client, e);
      return null;
    }
    throw e;
  }
}
