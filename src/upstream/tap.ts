import type { Socket } from "node:net";
import type { TlsInfo } from "../warc/records.js";

/** Receives the exact bytes of one exchange on an upstream socket. */
export interface ExchangeListener {
  onWrite(bytes: Buffer): void;
  onRead(bytes: Buffer): void;
}

/**
 * State lathe keeps on each upstream socket: which exchange its bytes currently belong to
 * (one at a time: Node's agent never pipelines), the TLS facts of the connection, and which
 * output series already got this connection's TLS metadata record.
 */
export interface SocketTap {
  readonly id: number;
  current: ExchangeListener | null;
  tls: TlsInfo | null;
  ip: string | undefined;
  tlsRecordedFor: Set<string>;
}

const TAP = Symbol("lathe.tap");
let nextId = 1;

export function tapOf(socket: Socket): SocketTap | undefined {
  return (socket as unknown as Record<symbol, SocketTap | undefined>)[TAP];
}

/**
 * Install the tap: a `data` listener placed before Node's HTTP parser (so the bytes of a head are
 * seen before the parser emits 'response'), and a wrapped `write` that sees what Node sends.
 * Only sockets lathe creates itself get one; the client-facing socket is never tapped.
 */
export function installTap(socket: Socket): SocketTap {
  const tap: SocketTap = { id: nextId++, current: null, tls: null, ip: undefined, tlsRecordedFor: new Set() };
  (socket as unknown as Record<symbol, SocketTap>)[TAP] = tap;
  socket.prependListener("data", (chunk: Buffer) => tap.current?.onRead(chunk));
  const write = socket.write;
  socket.write = function tappedWrite(this: Socket, chunk: unknown, ...rest: unknown[]): boolean {
    const l = tap.current;
    if (l) {
      const enc = typeof rest[0] === "string" ? (rest[0] as BufferEncoding) : "utf8";
      l.onWrite(typeof chunk === "string" ? Buffer.from(chunk, enc) : Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk as Uint8Array));
    }
    return (write as (...a: unknown[]) => boolean).call(this, chunk, ...rest);
  } as typeof socket.write;
  declareHttpClientFields(socket);
  return tap;
}

/**
 * Node's HTTP client gives each socket it uses a `parser` and an `_httpMessage` (null when idle).
 * Giving them here, before the socket connects, keeps one hidden class for every upstream
 * socket. Without this, a socket adopted by the agent after its handshake (the first contact with
 * an origin that chose http/1.1 over h2: connector.ts, h2Pool.ts) learned its peer address
 * (`_peername`) before them and got a hidden class of its own. Node's HTTP and stream code,
 * optimised on that first socket, then deoptimised ("wrong map") on every later one:
 * https-small's c32 row cost 233–240 µs per exchange instead of 190–220 (#25).
 */
function declareHttpClientFields(socket: Socket): void {
  const s = socket as unknown as { parser: unknown; _httpMessage: unknown };
  s.parser = null;
  s._httpMessage = null;
}
