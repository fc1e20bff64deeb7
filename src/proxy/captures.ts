/**
 * The two message captures of one exchange (request and response), fed by the upstream leg with
 * the bytes as they went over the wire (HTTP/1.1: the socket tap), and what the leg learns of
 * the connection they used.
 */
import { MessageCapture, type MessageCaptureOptions } from "../capture/messageCapture.js";
import type { SocketTap } from "../upstream/tap.js";
import type { ProxyContext } from "./context.js";

export interface Captures {
  request: MessageCapture;
  response: MessageCapture;
  /** µs; when the first byte of the request went upstream (the record's WARC-Date). */
  sentAt: bigint | null;
  /** The upstream connection: TLS facts, peer address, which series got its TLS record. */
  tap: SocketTap | null;
  /** The upstream certificate's verdict when the session refuses invalid ones. */
  certError?: string;
  /** Set by the h2 leg: the messages went over HTTP/2 (recorded in their HTTP/1.1 form). */
  h2?: boolean;
  /** Interim (1xx) statuses and trailers the h2 leg received, for the exchange's metadata record. */
  extras?: { interim: number[]; trailers: Array<[string, string]> };
}

/**
 * Fresh captures. `noBody`: the response has none whatever its head says (the answer to a HEAD).
 * `lenient` must match what the messages are finalized with: it changes the stored head of a
 * chunked body.
 */
export function startCaptures(ctx: ProxyContext, o: { noBody: boolean; lenient: boolean }): Captures {
  const { capture, warc } = ctx.config;
  // One clock closure and one spool settings object for both messages (#25).
  const now = () => ctx.clock.nowMicros();
  const spool = spoolOptions(ctx);
  return {
    request: newRequestCapture(ctx, spool, now, false),
    response: new MessageCapture({
      kind: "response",
      digest: warc.digest,
      spool,
      maxBodyBytes: capture.maxBodyBytes,
      noBody: o.noBody,
      lenient: o.lenient,
      now,
    }),
    sentAt: null,
    tap: null,
  };
}

/** The request's capture; `bodyUntilEnd`: its body has no Content-Length (an h2 stream's). */
export function requestCapture(ctx: ProxyContext, o: { bodyUntilEnd?: boolean } = {}): MessageCapture {
  return newRequestCapture(ctx, spoolOptions(ctx), () => ctx.clock.nowMicros(), o.bodyUntilEnd === true);
}

function spoolOptions(ctx: ProxyContext): MessageCaptureOptions["spool"] {
  return { memoryBytes: ctx.config.capture.spoolMemoryBytes, dir: ctx.config.capture.spoolDir };
}

function newRequestCapture(ctx: ProxyContext, spool: MessageCaptureOptions["spool"], now: () => bigint, bodyUntilEnd: boolean): MessageCapture {
  // Spelled out, not `{ ...o }` at the end of the literal: a spread is a runtime call (#25).
  return new MessageCapture({ kind: "request", digest: ctx.config.warc.digest, spool, maxBodyBytes: 0, now, bodyUntilEnd });
}

/** Drop both captures (nothing of this attempt is recorded). */
export function discardCaptures(caps: Captures): void {
  void caps.request.discard();
  void caps.response.discard();
}
