/**
 * One request through lathe, from its arrival to its admission: which session and collection it
 * belongs to, its Warcprox-Meta policy, the warcprox rule answers (limits, then blocks) before
 * any DNS lookup (warcprox-compat.md §0), and the writer's back-pressure. Admitted exchanges go
 * on in forward.ts. Works on a ClientLeg, so every client protocol takes the same path.
 */
import { blockAnswer, matchBlock } from "../warcprox/blocks.js";
import type { AdmitOptions } from "../warcprox/limits.js";
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
  const left = new LeaveSignal(client);
  const admitting = ctx.stats.admit(policy.meta, uri, new AdmitRequest(!policy.noArchive, !noRevisit, ctx.config.upstream.headTimeoutMs, left));
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
 * A class, as AdmitRequest: an object literal with getters is built through V8's runtime each
 * time (~0.7 µs per getter in Node 20).
 */
class LeaveSignal {
  readonly #client: ClientLeg;
  #controller: AbortController | null = null;

  constructor(client: ClientLeg) {
    this.#client = client;
  }

  get signal(): AbortSignal {
    if (!this.#controller) {
      const c = (this.#controller = new AbortController());
      if (this.#client.gone) c.abort(new Error("the client went away"));
      else this.#client.onClose(() => c.abort(new Error("the client went away")));
    }
    return this.#controller.signal;
  }

  get aborted(): boolean {
    return this.#controller?.signal.aborted === true;
  }
}

/** The admission's options; the leave signal is made only if the admission asks for it. */
class AdmitRequest implements AdmitOptions {
  constructor(
    readonly mayBeNew: boolean,
    readonly mayBeRevisit: boolean,
    readonly waitTimeoutMs: number,
    readonly left: LeaveSignal,
  ) {}

  get signal(): AbortSignal {
    return this.left.signal;
  }
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
