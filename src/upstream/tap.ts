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
  return tap;
}
