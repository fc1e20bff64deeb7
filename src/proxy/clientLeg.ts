/**
 * The client side of one exchange, whatever protocol carried it: the request as received (head
 * and body stream) and a sink for the response. The exchange (exchange.ts, forward.ts) only
 * speaks to this interface, so an HTTP/1.1 request and an HTTP/2 stream feed the same policy,
 * capture, dedup and archive code (the shape of mitmproxy's HTTP layer: one flow, a connection
 * class per protocol version). http1Client.ts is the HTTP/1.1 implementation.
 */
import type { Socket } from "node:net";
import type { Readable } from "node:stream";
import { plainAnswer } from "./respond.js";
import type { Target } from "./target.js";

/** A request head as the client sent it. */
export interface RequestHead {
  method: string;
  /** Where it goes: from its tunnel (CONNECT target) or its absolute-form URL. */
  target: Target;
  /** Header fields as received, `[name, value, name, value, …]`: case, order and duplicates kept. */
  rawHeaders: string[];
}

/** A response head to send to the client: header fields as a flat `[name, value, …]` list. */
export interface ResponseHead {
  status: number;
  /** HTTP/1.1 reason phrase; undefined = the standard one. */
  reason?: string | undefined;
  headers: string[];
}

export interface ClientLeg {
  readonly head: RequestHead;
  /** The client's protocol: "http/1.1" (also for HTTP/1.0) or "h2". */
  readonly protocol: string;
  /** The request body as it arrives; already ended when the request has none. */
  readonly body: Readable;
  /** The client connection (sessions and tunnels are marked on it). */
  readonly socket: Socket;
  /** True when the request declares a body (Content-Length > 0 or chunked; any DATA in h2). */
  readonly hasBody: boolean;

  /** True once a response head was sent (lathe can no longer answer with an error of its own). */
  readonly headSent: boolean;
  /** True once the response can take no more bytes (delivered, cut, or the client went away). */
  readonly gone: boolean;
  /**
   * Send the origin's response head as it came (no Date added). Throws when the head cannot be
   * sent as given (a character the protocol refuses): the caller decides what to send instead.
   */
  sendHead(head: ResponseHead): void;
  /** Forward an interim response before the final head (103 Early Hints); throws when the protocol refuses its fields. */
  sendInterim(status: number, headers: string[]): void;
  /** Write body bytes; false = wait for `onDrain` before writing more. */
  write(chunk: Buffer): boolean;
  onDrain(cb: () => void): void;
  /** True while written bytes wait for the client (resume reading upstream only on drain). */
  readonly needsDrain: boolean;
  /** End the response, with its last bytes if any. */
  end(last?: Buffer): void;
  /** Cut the response off: the client sees an incomplete response, never a complete wrong one. */
  destroy(): void;
  /** Called once when the client side closes; `delivered` = the whole response was written. */
  onClose(cb: (delivered: boolean) => void): void;
  /**
   * An answer of lathe's own (errors, refusals, rule answers): the whole response at once, with
   * a Date. `close` asks that the client connection be closed after it, where the protocol has
   * one to close (HTTP/1.1); an h2 stream ends alone.
   */
  answer(head: ResponseHead, body: Buffer | undefined, o?: { close?: boolean }): void;
  /** Consume and drop the request body (an answer that does not need it). */
  discardBody(): void;
}

/** `Content-Type: text/plain` answer from lathe itself: never cached, says what to do. */
export function answerPlain(client: ClientLeg, status: number, message: string, extra: string[] = [], o: { close?: boolean } = {}): void {
  if (client.headSent) {
    client.destroy();
    return;
  }
  const { headers, body } = plainAnswer(message, extra);
  client.answer({ status, headers }, body, o);
}
