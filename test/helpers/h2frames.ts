/** Raw HTTP/2 frames (RFC 9113 §4.1), for peers that misbehave on purpose. */

export const PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");

/** An h2 frame: 9-byte header (length, type, flags, stream id) and payload. */
export function frame(type: number, flags: number, stream: number, payload: Buffer): Buffer {
  const h = Buffer.alloc(9);
  h.writeUIntBE(payload.length, 0, 3);
  h[3] = type;
  h[4] = flags;
  h.writeUInt32BE(stream, 5);
  return Buffer.concat([h, payload]);
}

export function frames(b: Buffer): Array<{ type: number; stream: number; payload: Buffer }> {
  const out: Array<{ type: number; stream: number; payload: Buffer }> = [];
  for (let i = 0; i + 9 <= b.length; ) {
    const len = b.readUIntBE(i, 3);
    out.push({ type: b[i + 3]!, stream: b.readUInt32BE(i + 5) & 0x7fffffff, payload: b.subarray(i + 9, i + 9 + len) });
    i += 9 + len;
  }
  return out;
}


/**
 * A TLS origin that speaks raw h2 (ALPN h2): it answers SETTINGS, and to each HEADERS frame it
 * calls `onRequest(streamId, write)`, so a test can send what no well-behaved server library
 * would (PUSH_PROMISE to a client that disabled push).
 */
export async function startRawH2Origin(key: string, cert: string, onRequest: (stream: number, write: (b: Buffer) => void) => void): Promise<{ url: string; port: number; close(): Promise<void> }> {
  const tls = await import("node:tls");
  const sockets = new Set<import("node:tls").TLSSocket>();
  const server = tls.createServer({ key, cert, ALPNProtocols: ["h2"] }, (s) => {
    sockets.add(s);
    s.on("close", () => sockets.delete(s));
    s.on("error", () => undefined);
    let buf = Buffer.alloc(0);
    let prefaced = false;
    s.write(frame(0x4, 0, 0, Buffer.alloc(0)));
    s.on("data", (d: Buffer) => {
      buf = Buffer.concat([buf, d]);
      if (!prefaced) {
        if (buf.length < PREFACE.length) return;
        buf = buf.subarray(PREFACE.length);
        prefaced = true;
      }
      for (;;) {
        if (buf.length < 9) return;
        const len = buf.readUIntBE(0, 3);
        if (buf.length < 9 + len) return;
        const type = buf[3]!;
        const flags = buf[4]!;
        const stream = buf.readUInt32BE(5) & 0x7fffffff;
        buf = buf.subarray(9 + len);
        if (type === 0x4 && !(flags & 0x1)) s.write(frame(0x4, 0x1, 0, Buffer.alloc(0)));
        if (type === 0x1) onRequest(stream, (b) => s.write(b));
      }
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const port = (server.address() as import("node:net").AddressInfo).port;
  return {
    url: `https://127.0.0.1:${port}`,
    port,
    close: () => {
      for (const s of sockets) s.destroy();
      return new Promise((r) => server.close(() => r()));
    },
  };
}
