/**
 * Local origin servers for tests: real sockets on loopback. Bodies are deterministic so a test
 * can compare what the client got, what the origin sent and what the WARC holds.
 */
import http from "node:http";
import https from "node:https";
import net from "node:net";
import { createHash } from "node:crypto";
import { gzipSync } from "node:zlib";
import type { AddressInfo } from "node:net";
import type { OriginCerts } from "./certs.js";

export function bytesOf(n: number, seed = 1): Buffer {
  const out = Buffer.alloc(n);
  let x = seed >>> 0 || 1;
  for (let i = 0; i < n; i++) {
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    out[i] = x & 0xff;
  }
  return out;
}

export const sha1 = (b: Uint8Array) => createHash("sha1").update(b).digest("hex");

export interface Origin {
  url: string;
  port: number;
  host: string;
  close(): Promise<void>;
  /** Requests seen, in order: method, path, raw headers, body. */
  seen: Array<{ method: string; path: string; rawHeaders: string[]; body: Buffer }>;
}

type Handler = (req: http.IncomingMessage, res: http.ServerResponse, body: Buffer) => void;

export const routes: Record<string, Handler> = {
  bytes(req, res) {
    const n = Number(req.url!.split("?")[0]!.split("/")[2] ?? 1000);
    const b = bytesOf(n, n);
    res.writeHead(200, { "Content-Type": "application/octet-stream", "Content-Length": b.length });
    res.end(b);
  },
  text(req, res) {
    const n = Number(req.url!.split("?")[0]!.split("/")[2] ?? 1000);
    const b = Buffer.from("<p>hello lathe</p>\n".repeat(Math.ceil(n / 19)).slice(0, n));
    res.writeHead(200, { "Content-Type": "text/html; charset=utf-8", "Content-Length": b.length });
    res.end(b);
  },
  chunked(req, res) {
    const n = Number(req.url!.split("?")[0]!.split("/")[2] ?? 1000);
    const b = bytesOf(n, n + 7);
    const withTrailers = req.url!.includes("trailers");
    res.writeHead(200, withTrailers ? { "Content-Type": "application/octet-stream", Trailer: "X-Checksum" } : { "Content-Type": "application/octet-stream" });
    for (let i = 0; i < b.length; i += 1000) res.write(b.subarray(i, i + 1000));
    if (withTrailers) res.addTrailers({ "X-Checksum": sha1(b) });
    res.end();
  },
  gzip(_req, res) {
    const b = gzipSync(Buffer.from("<html>" + "compressible text ".repeat(500) + "</html>"));
    res.writeHead(200, { "Content-Type": "text/html", "Content-Encoding": "gzip", "Content-Length": b.length });
    res.end(b);
  },
  slow(req, res) {
    const n = Number(req.url!.split("?")[0]!.split("/")[2] ?? 10);
    res.writeHead(200, { "Content-Type": "text/plain", "Content-Length": n });
    let i = 0;
    const t = setInterval(() => {
      res.write("x");
      if (++i >= n) {
        clearInterval(t);
        res.end();
      }
    }, 20);
  },
  status(req, res) {
    const code = Number(req.url!.split("/")[2] ?? 200);
    if (code === 204 || code === 304) {
      res.writeHead(code, { ETag: '"e1"' });
      res.end();
    } else {
      res.writeHead(code, { "Content-Type": "text/plain" });
      res.end(`status ${code}\n`);
    }
  },
  echo(req, res, body) {
    res.writeHead(200, { "Content-Type": "application/octet-stream", "X-Method": req.method!, "Content-Length": body.length });
    res.end(body);
  },
  headers(req, res) {
    const b = Buffer.from(JSON.stringify(req.rawHeaders));
    res.writeHead(200, { "Content-Type": "application/json", "Content-Length": b.length });
    res.end(b);
  },
  etag(req, res) {
    // Conditional GET: 304 when the client already has version "v1".
    const tag = '"v1"';
    const lm = "Tue, 01 Dec 2026 08:00:00 GMT";
    const inm = req.headers["if-none-match"];
    if ((inm && inm.includes(tag)) || (!inm && req.headers["if-modified-since"] === lm)) {
      res.writeHead(304, { ETag: tag, "Last-Modified": lm });
      res.end();
      return;
    }
    const b = Buffer.from("versioned content v1\n".repeat(50));
    res.writeHead(200, { "Content-Type": "text/plain", ETag: tag, "Last-Modified": lm, "Content-Length": b.length });
    res.end(b);
  },
  forge(_req, res) {
    // An origin that tries to speak warcprox's protocol to the crawler.
    res.writeHead(200, { "Content-Type": "text/plain", "Warcprox-Meta": '{"reached-limit":{"x/total/urls":1}}', "Content-Length": 2 });
    res.end("ok");
  },
  abort(_req, res) {
    res.writeHead(200, { "Content-Type": "application/octet-stream", "Content-Length": 100000 });
    res.write(bytesOf(5000, 5));
    setTimeout(() => res.socket?.destroy(), 30);
  },
  page(req, res) {
    // An HTML page with N subresources (images, scripts, styles, fetch).
    const n = Number(req.url!.split("?")[0]!.split("/")[2] ?? 20);
    const items: string[] = [];
    for (let i = 0; i < n; i++) {
      if (i % 3 === 0) items.push(`<img src="/img/${i}.svg">`);
      else if (i % 3 === 1) items.push(`<script src="/js/${i}.js"></script>`);
      else items.push(`<link rel="stylesheet" href="/css/${i}.css">`);
    }
    const html = `<!doctype html><html><head><title>page</title></head><body><h1>test page</h1>${items.join("\n")}
<script>fetch('/text/100').then(r => r.text()).then(t => { document.title = 'loaded:' + t.length; });</script></body></html>`;
    res.writeHead(200, { "Content-Type": "text/html; charset=utf-8", "Content-Length": Buffer.byteLength(html) });
    res.end(html);
  },
  img(req, res) {
    const svg = `<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><text>${req.url}</text></svg>`;
    res.writeHead(200, { "Content-Type": "image/svg+xml", "Content-Length": Buffer.byteLength(svg) });
    res.end(svg);
  },
  js(req, res) {
    const js = `window.loaded = (window.loaded || 0) + 1; // ${req.url}`;
    res.writeHead(200, { "Content-Type": "application/javascript", "Content-Length": Buffer.byteLength(js) });
    res.end(js);
  },
  css(req, res) {
    const css = `/* ${req.url} */ body { margin: 0 }`;
    res.writeHead(200, { "Content-Type": "text/css" });
    res.end(css); // chunked
  },
};

function handler(seen: Origin["seen"]) {
  return (req: http.IncomingMessage, res: http.ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const body = Buffer.concat(chunks);
      seen.push({ method: req.method!, path: req.url!, rawHeaders: req.rawHeaders, body });
      const name = req.url!.split("/")[1]!.split("?")[0]!;
      const h = routes[name];
      if (h) h(req, res, body);
      else {
        res.writeHead(404, { "Content-Type": "text/plain" });
        res.end("not found\n");
      }
    });
  };
}

async function listen(server: net.Server, host: string): Promise<number> {
  await new Promise<void>((r) => server.listen(0, host, () => r()));
  return (server.address() as AddressInfo).port;
}

function closer(server: http.Server) {
  return () =>
    new Promise<void>((r) => {
      server.closeAllConnections();
      server.close(() => r());
    });
}

export async function startHttpOrigin(host = "127.0.0.1"): Promise<Origin> {
  const seen: Origin["seen"] = [];
  const server = http.createServer(handler(seen));
  server.keepAliveTimeout = 5000;
  const port = await listen(server, host);
  return { url: `http://${host}:${port}`, port, host, seen, close: closer(server) };
}

export async function startHttpsOrigin(certs: OriginCerts, host = "127.0.0.1", name = host): Promise<Origin> {
  const seen: Origin["seen"] = [];
  const server = https.createServer({ key: certs.key, cert: certs.cert }, handler(seen));
  const port = await listen(server, host);
  return { url: `https://${name}:${port}`, port, host, seen, close: closer(server) };
}

/**
 * A raw TCP origin: `respond(socket, requestHead)` writes whatever bytes the test wants,
 * for odd header case, duplicates, broken framing and resets.
 */
export async function startRawOrigin(respond: (socket: net.Socket, head: string) => void, host = "127.0.0.1"): Promise<Origin & { connections: number }> {
  const seen: Origin["seen"] = [];
  const state = { connections: 0 };
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    state.connections++;
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
    socket.on("error", () => undefined);
    let buf = Buffer.alloc(0);
    socket.on("data", (d) => {
      buf = Buffer.concat([buf, d]);
      let end: number;
      while ((end = buf.indexOf("\r\n\r\n")) >= 0) {
        const head = buf.subarray(0, end + 4).toString("latin1");
        buf = buf.subarray(end + 4);
        const [method, path] = head.split(" ");
        seen.push({ method: method!, path: path!, rawHeaders: [], body: Buffer.alloc(0) });
        respond(socket, head);
      }
    });
  });
  const port = await listen(server, host);
  return {
    url: `http://${host}:${port}`,
    port,
    host,
    seen,
    get connections() {
      return state.connections;
    },
    close: () =>
      new Promise<void>((r) => {
        for (const s of sockets) s.destroy();
        server.close(() => r());
      }),
  };
}

// ---------------------------------------------------------------------------------------------
// WebSocket (RFC 6455) echo origin, for the pass-through tests. Minimal on purpose: one frame
// per message (FIN set), text/binary echoed with the same opcode, ping → pong, close → close.
// ---------------------------------------------------------------------------------------------

export const WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

export const wsAccept = (key: string) => createHash("sha1").update(key + WS_GUID).digest("base64");

/** One WebSocket frame, FIN set; masked (with `mask` or a random key) when the client sends it. */
export function wsFrame(opcode: number, payload: Buffer | string, mask?: Buffer | true): Buffer {
  const data = typeof payload === "string" ? Buffer.from(payload, "utf8") : payload;
  const key = mask === true ? Buffer.from([Math.random() * 256, Math.random() * 256, Math.random() * 256, Math.random() * 256].map((x) => x & 0xff)) : mask;
  const len = data.length;
  const head = len < 126 ? Buffer.alloc(2) : len < 65536 ? Buffer.alloc(4) : Buffer.alloc(10);
  head[0] = 0x80 | (opcode & 0x0f);
  if (len < 126) head[1] = len;
  else if (len < 65536) {
    head[1] = 126;
    head.writeUInt16BE(len, 2);
  } else {
    head[1] = 127;
    head.writeBigUInt64BE(BigInt(len), 2);
  }
  if (!key) return Buffer.concat([head, data]);
  head[1] = head[1]! | 0x80;
  const body = Buffer.alloc(len);
  for (let i = 0; i < len; i++) body[i] = data[i]! ^ key[i % 4]!;
  return Buffer.concat([head, key, body]);
}

export interface WsFrame {
  fin: boolean;
  opcode: number;
  masked: boolean;
  payload: Buffer;
}

/** Incremental frame parser: push bytes, get the complete frames so far. */
export class WsFrameReader {
  #buf = Buffer.alloc(0);
  push(chunk: Buffer): WsFrame[] {
    this.#buf = Buffer.concat([this.#buf, chunk]);
    const out: WsFrame[] = [];
    for (;;) {
      const b = this.#buf;
      if (b.length < 2) break;
      const masked = (b[1]! & 0x80) !== 0;
      let len = b[1]! & 0x7f;
      let off = 2;
      if (len === 126) {
        if (b.length < 4) break;
        len = b.readUInt16BE(2);
        off = 4;
      } else if (len === 127) {
        if (b.length < 10) break;
        len = Number(b.readBigUInt64BE(2));
        off = 10;
      }
      const keyLen = masked ? 4 : 0;
      if (b.length < off + keyLen + len) break;
      const key = b.subarray(off, off + keyLen);
      const payload = Buffer.from(b.subarray(off + keyLen, off + keyLen + len));
      if (masked) for (let i = 0; i < len; i++) payload[i] = payload[i]! ^ key[i % 4]!;
      out.push({ fin: (b[0]! & 0x80) !== 0, opcode: b[0]! & 0x0f, masked, payload });
      this.#buf = b.subarray(off + keyLen + len);
    }
    return out;
  }
}

export interface WsOrigin extends Origin {
  /** Upgrade requests seen (path and raw headers), in order. */
  upgrades: Array<{ path: string; rawHeaders: string[] }>;
  /** Messages received from clients (text as UTF-8), in order. */
  messages: Array<{ path: string; opcode: number; data: Buffer }>;
  /** Frames from a client that were not masked (RFC 6455 §5.1 violations seen). */
  unmasked: number;
  /** Exact bytes of each 101 head the origin wrote, by path. */
  handshakes: Map<string, Buffer>;
}

/** The greeting the origin sends right after the 101, before the client says anything. */
export const WS_GREETING = "hello from origin";

/**
 * An HTTP (or, with certs, HTTPS) origin that serves every route above and answers WebSocket
 * upgrades on any path starting with /ws with an echo endpoint. The first frame it sends
 * (WS_GREETING) is written together with the 101 head, so it usually travels in the same packet.
 */
export async function startWsOrigin(certs?: OriginCerts, host = "127.0.0.1"): Promise<WsOrigin> {
  const seen: Origin["seen"] = [];
  const server = certs ? https.createServer({ key: certs.key, cert: certs.cert }, handler(seen)) : http.createServer(handler(seen));
  const upgrades: WsOrigin["upgrades"] = [];
  const messages: WsOrigin["messages"] = [];
  const handshakes = new Map<string, Buffer>();
  const state = { unmasked: 0 };
  const sockets = new Set<net.Socket>();
  server.on("upgrade", (req: http.IncomingMessage, socket: net.Socket, head: Buffer) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
    socket.on("error", () => socket.destroy());
    const path = req.url ?? "/";
    upgrades.push({ path, rawHeaders: req.rawHeaders });
    const key = req.headers["sec-websocket-key"];
    if (!path.startsWith("/ws") || String(req.headers.upgrade).toLowerCase() !== "websocket" || typeof key !== "string") {
      socket.end("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
      return;
    }
    const handshake = Buffer.from(`HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${wsAccept(key)}\r\n\r\n`, "latin1");
    handshakes.set(path, handshake);
    socket.write(Buffer.concat([handshake, wsFrame(1, WS_GREETING)]));
    const reader = new WsFrameReader();
    const onData = (d: Buffer) => {
      for (const f of reader.push(d)) {
        if (!f.masked) state.unmasked++;
        if (f.opcode === 1 || f.opcode === 2) {
          messages.push({ path, opcode: f.opcode, data: f.payload });
          socket.write(wsFrame(f.opcode, f.payload));
        } else if (f.opcode === 9) socket.write(wsFrame(10, f.payload));
        else if (f.opcode === 8) {
          socket.end(wsFrame(8, f.payload.subarray(0, 2)));
        }
      }
    };
    if (head.length) onData(head);
    socket.on("data", onData);
  });
  const port = await listen(server, host);
  return {
    url: `${certs ? "https" : "http"}://${host}:${port}`,
    port,
    host,
    seen,
    upgrades,
    messages,
    handshakes,
    get unmasked() {
      return state.unmasked;
    },
    close: () =>
      new Promise<void>((r) => {
        for (const s of sockets) s.destroy();
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

/**
 * `/wspage/<name>`: a page whose script opens a WebSocket to `/ws/<name>` on its own origin
 * (wss: on an https page), sends one message and, once the greeting and the echo are in, sets
 * `document.title` to `ws:<greeting>|<echo>` (or `ws-error:` / `ws-closed:` on failure).
 */
routes.wspage = (req, res) => {
  const name = req.url!.split("?")[0]!.split("/")[2] ?? "page";
  const html = `<!doctype html><html><head><title>websocket pending</title></head><body><h1>websocket page</h1>
<script>
const got = [];
const ws = new WebSocket((location.protocol === 'https:' ? 'wss://' : 'ws://') + location.host + '/ws/${name}');
ws.onopen = () => ws.send('page says hi ${name}');
ws.onmessage = (e) => { got.push(e.data); if (got.length === 2) { document.title = 'ws:' + got.join('|'); ws.close(1000); } };
ws.onerror = () => { document.title = 'ws-error:' + got.join('|'); };
ws.onclose = (e) => { if (got.length < 2) document.title = 'ws-closed:' + e.code; };
</script></body></html>`;
  res.writeHead(200, { "Content-Type": "text/html; charset=utf-8", "Content-Length": Buffer.byteLength(html) });
  res.end(html);
};
