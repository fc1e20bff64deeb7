/** HTTP/2 clients through lathe: a CONNECT tunnel, TLS with ALPN, an h2 session over it. */
import http2 from "node:http2";
import net from "node:net";
import tls from "node:tls";
import type { TestLathe } from "./lathe.js";

/** CONNECT through lathe, then TLS offering `alpn`; resolves with the TLS socket. */
export function tunnel(lathe: TestLathe, port: number, alpn: string[], connectHeaders = ""): Promise<tls.TLSSocket> {
  return new Promise((resolve, reject) => {
    const s = net.connect(lathe.address.port, "127.0.0.1");
    s.once("error", reject);
    s.write(`CONNECT 127.0.0.1:${port} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n${connectHeaders}\r\n`);
    s.once("data", (d) => {
      if (!/^HTTP\/1\.1 200/.test(d.toString())) return reject(new Error(d.toString()));
      const t = tls.connect({ socket: s, host: "127.0.0.1", ca: lathe.ca.caCertPem, ALPNProtocols: alpn }, () => resolve(t));
      t.once("error", reject);
    });
  });
}

export interface H2Answer {
  status: number;
  headers: http2.IncomingHttpHeaders;
  body: Buffer;
}

export function h2request(session: http2.ClientHttp2Session, headers: http2.OutgoingHttpHeaders, body?: Buffer): Promise<H2Answer> {
  return new Promise((resolve, reject) => {
    const r = session.request(headers, { endStream: body === undefined });
    const chunks: Buffer[] = [];
    let head: http2.IncomingHttpHeaders = {};
    r.on("response", (h) => (head = h));
    r.on("data", (c: Buffer) => chunks.push(c));
    r.on("end", () => resolve({ status: Number(head[":status"]), headers: head, body: Buffer.concat(chunks) }));
    r.on("error", reject);
    if (body !== undefined) r.end(body);
  });
}

/** An h2 session through a tunnel; `connectHeaders` are extra CONNECT lines ("Name: value\r\n"). */
export async function h2session(lathe: TestLathe, origin: { port: number }, connectHeaders = ""): Promise<http2.ClientHttp2Session> {
  const t = await tunnel(lathe, origin.port, ["h2", "http/1.1"], connectHeaders);
  if (t.alpnProtocol !== "h2") throw new Error(`lathe chose ${t.alpnProtocol} inside the tunnel, not h2`);
  return http2.connect(`https://127.0.0.1:${origin.port}`, { createConnection: () => t });
}

