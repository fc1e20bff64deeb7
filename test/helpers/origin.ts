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
