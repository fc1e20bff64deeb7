/**
 * The upstream side of one exchange, whatever protocol carries it: the request goes out (head,
 * then body with back-pressure), a response head and body stream come back, and the leg feeds
 * the exchange's captures with the messages as they went over the wire. http1Upstream.ts is the
 * HTTP/1.1 implementation (Node's agent, bytes from the socket tap).
 */
import type { Readable } from "node:stream";

/** The origin's response as it arrives. */
export interface UpstreamResponse {
  status: number;
  /** The reason phrase as received (HTTP/1.1), else undefined. */
  reason: string | undefined;
  /** Header fields as received, `[name, value, …]`. */
  rawHeaders: string[];
  /** The body; pause/resume give back-pressure to the origin. */
  body: Readable;
  /** True once the body ended where its framing said (not cut off). */
  readonly complete: boolean;
}

export interface UpstreamRequest {
  /** Request body bytes; false = wait for `onDrain`. */
  write(chunk: Buffer): boolean;
  end(): void;
  onDrain(cb: () => void): void;
  /** An interim (1xx) response arrived before the final one: its status and raw fields. */
  onInterim(cb: (status: number, rawHeaders: string[]) => void): void;
  /** The response head arrived (once). */
  onResponse(cb: (res: UpstreamResponse) => void): void;
  /** A failure: before the response head, or while its body arrives. */
  onError(cb: (e: unknown) => void): void;
  /** Stop: nothing more is sent or read; `onError` hears `e` if given. */
  destroy(e?: Error): void;
  /** Stop feeding the captures (the exchange is over, or cut; later bytes are not its own). */
  stopCapture(): void;
  /** Silence on the connection for this long while a response is expected or arriving calls `cb`. */
  setIdleTimeout(ms: number, cb: () => void): void;
  /** True when the request went out on a kept-alive connection used before (the keep-alive race). */
  readonly reusedConnection: boolean;
}
