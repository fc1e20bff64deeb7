/**
 * An admitted exchange of a collection with politeness on (issue #27): politeness/ decides
 * (User-Agent rule, robots.txt, the host's turn) before anything goes upstream; the exchange
 * then goes on in forward.ts through a client leg that releases the turn when the fetch is over
 * and tells the gate the origin's status (5xx and 429 back off).
 */
import type { Admitted } from "../warcprox/limits.js";
import type { GateOutcome, Ticket } from "../politeness/hostGate.js";
import { sendRuleAnswer } from "./answers.js";
import type { ClientLeg, RequestHead, ResponseHead } from "./clientLeg.js";
import type { ProxyContext } from "./context.js";
import { forwardExchange } from "./forward.js";
import { headerValues } from "./headers.js";
import type { RequestPolicy } from "./requestPolicy.js";
import { fetchRobots } from "./robotsFetch.js";
import { authorityOf, targetUri } from "./target.js";

export function politeExchange(ctx: ProxyContext, client: ClientLeg, policy: RequestPolicy, admitted: Admitted): void {
  const left = new AbortController();
  client.onClose(() => left.abort(new Error("the client went away")));
  const t = client.head.target;
  ctx.politeness
    .admit({
      policy: policy.collection.politeness,
      target: { scheme: t.scheme, host: t.host, authority: authorityOf(t), path: t.path },
      uri: targetUri(t),
      rawHeaders: client.head.rawHeaders,
      signal: left.signal,
      fetchRobots: (url, headers) => fetchRobots(ctx, client, policy, url, headers),
    })
    .then(
      (a) => {
        if (!a.ok) {
          admitted.release(null);
          client.discardBody();
          return sendRuleAnswer(client, a.answer);
        }
        if (client.gone) {
          a.ticket.release({});
          return admitted.release(null);
        }
        forwardExchange(ctx, new PoliteLeg(client, Object.assign({}, client.head, { rawHeaders: a.rawHeaders }), a.ticket), policy, admitted);
      },
      // Only a client that left rejects: nobody to answer.
      () => admitted.release(null),
    );
}

/** The client leg, with the headers politeness rewrote, releasing the host's turn when the exchange ends. */
class PoliteLeg implements ClientLeg {
  readonly #inner: ClientLeg;
  readonly #ticket: Ticket;
  readonly head: RequestHead;
  #outcome: GateOutcome = {};

  constructor(inner: ClientLeg, head: RequestHead, ticket: Ticket) {
    this.#inner = inner;
    this.head = head;
    this.#ticket = ticket;
    inner.onClose(() => this.#release());
  }

  #release(): void {
    this.#ticket.release(this.#outcome);
  }

  get protocol() {
    return this.#inner.protocol;
  }
  get body() {
    return this.#inner.body;
  }
  get socket() {
    return this.#inner.socket;
  }
  get hasBody() {
    return this.#inner.hasBody;
  }
  get headSent() {
    return this.#inner.headSent;
  }
  get gone() {
    return this.#inner.gone;
  }
  get needsDrain() {
    return this.#inner.needsDrain;
  }
  sendHead(head: ResponseHead): void {
    this.#outcome = { status: head.status, retryAfter: headerValues(head.headers, "retry-after")[0] };
    this.#inner.sendHead(head);
  }
  sendInterim(status: number, headers: string[]): void {
    this.#inner.sendInterim(status, headers);
  }
  write(chunk: Buffer): boolean {
    return this.#inner.write(chunk);
  }
  onDrain(cb: () => void): void {
    this.#inner.onDrain(cb);
  }
  end(last?: Buffer): void {
    this.#release();
    this.#inner.end(last);
  }
  destroy(): void {
    this.#release();
    this.#inner.destroy();
  }
  onClose(cb: (delivered: boolean) => void): void {
    this.#inner.onClose(cb);
  }
  answer(head: ResponseHead, body: Buffer | undefined, o?: { close?: boolean }): void {
    this.#release();
    this.#inner.answer(head, body, o);
  }
  discardBody(): void {
    this.#inner.discardBody();
  }
}
