/** HTTP/2 origins written with node:http2, for the h2 upstream leg (http2.md). */
import http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { gzipSync } from "node:zlib";
import type { OriginCerts } from "./certs.js";
import { bytesOf } from "./origin.js";

export interface H2Origin {
  url: string;
  port: number;
  /** h2 sessions opened by clients so far. */
  sessions: number;
  /** Requests seen: method, path, raw header list (pseudo-headers included), body. */
  seen: Array<{ method: string; path: string; rawHeaders: string[]; body: Buffer }>;
  close(): Promise<void>;
}

export const GZIP_BODY = gzipSync(Buffer.from("<html>" + "compressible h2 text ".repeat(400) + "</html>"));

/**
 * Answers by path: /bytes/N, /gzip, /reset/N (RST_STREAM after N bytes), /goaway/N (GOAWAY, then
 * N bytes), /echo (the request body), /fields (a status without a phrase, duplicate fields).
 */
function respond(stream: http2.ServerHttp2Stream, path: string, body: Buffer): void {
  const n = Number(path.split("?")[0]!.split("/")[2] ?? 0);
  if (path.startsWith("/bytes/")) {
    stream.respond({ ":status": 200, "content-type": "application/octet-stream", "content-length": n });
    stream.end(bytesOf(n, n));
  } else if (path.startsWith("/gzip")) {
    stream.respond({ ":status": 200, "content-type": "text/html", "content-encoding": "gzip" });
    stream.end(GZIP_BODY);
  } else if (path.startsWith("/reset/")) {
    stream.respond({ ":status": 200, "content-type": "application/octet-stream", "content-length": n * 2 });
    stream.write(bytesOf(n, n), () => setTimeout(() => stream.close(http2.constants.NGHTTP2_INTERNAL_ERROR), 50));
  } else if (path.startsWith("/slowgoaway/")) {
    // GOAWAY naming this stream as the last, while later streams wait: they were never processed.
    stream.session?.goaway(http2.constants.NGHTTP2_NO_ERROR, stream.id);
    setTimeout(() => {
      stream.respond({ ":status": 200, "content-type": "application/octet-stream", "content-length": n });
      stream.end(bytesOf(n, n));
    }, 100);
  } else if (path.startsWith("/hold/")) {
    // Answers after 300 ms (so a GOAWAY can overtake it).
    setTimeout(() => {
      if (stream.closed || stream.destroyed) return;
      stream.respond({ ":status": 200, "content-type": "application/octet-stream", "content-length": n });
      stream.end(bytesOf(n, n));
    }, 300);
  } else if (path.startsWith("/goaway/")) {
    // GOAWAY naming this stream as the last one processed: it completes, the next stream goes elsewhere.
    stream.session?.goaway(http2.constants.NGHTTP2_NO_ERROR, stream.id);
    stream.respond({ ":status": 200, "content-type": "application/octet-stream", "content-length": n });
    stream.end(bytesOf(n, n));
  } else if (path.startsWith("/trailers")) {
    // 103 Early Hints, then the response, then trailers after the DATA.
    stream.additionalHeaders({ ":status": 103, link: "</style.css>; rel=preload" });
    stream.respond({ ":status": 200, "content-type": "text/plain" }, { waitForTrailers: true });
    stream.on("wantTrailers", () => stream.sendTrailers({ "x-checksum": "abc123", "x-count": "3" }));
    stream.end("with trailers");
  } else if (path.startsWith("/page/")) {
    stream.respond({ ":status": 200, "content-type": "text/html; charset=utf-8" });
    stream.end(pageHtml(n));
  } else if (path.startsWith("/sub/")) {
    const name = path.split("?")[0]!.slice("/sub/".length);
    const type = name.endsWith(".js") ? "text/javascript" : name.endsWith(".css") ? "text/css" : "image/svg+xml";
    const body = name.endsWith(".js") ? `window.loaded = (window.loaded || 0) + 1; // ${name}` : name.endsWith(".css") ? `.c-${name.length} { color: red }` : `<svg xmlns="http://www.w3.org/2000/svg" width="4" height="4"><title>${name}</title></svg>`;
    stream.respond({ ":status": 200, "content-type": type, "content-length": Buffer.byteLength(body) });
    stream.end(body);
  } else if (path.startsWith("/stream/")) {
    // N bytes made as they are sent (64 KiB at a time, with back-pressure): nothing held whole.
    stream.respond({ ":status": 200, "content-type": "video/mp4", "content-length": n });
    let sent = 0;
    const more = () => {
      while (sent < n) {
        const size = Math.min(65536, n - sent);
        const chunk = streamChunk(sent, size);
        sent += size;
        if (!stream.write(chunk)) return void stream.once("drain", more);
      }
      stream.end();
    };
    more();
  } else if (path.startsWith("/echo")) {
    stream.respond({ ":status": 200, "content-type": "application/octet-stream", "content-length": body.length });
    stream.end(body);
  } else if (path.startsWith("/fields")) {
    stream.respond({ ":status": 299, "x-dup": ["one", "two"], "set-cookie": ["a=1", "b=2"], "content-type": "text/plain" });
    stream.end("fields");
  } else {
    stream.respond({ ":status": 404 });
    stream.end();
  }
}

/** The bytes of /stream/N from `offset`: a pattern anyone can recompute. */
export function streamChunk(offset: number, size: number): Buffer {
  const b = Buffer.allocUnsafe(size);
  for (let i = 0; i < size; i++) b[i] = ((offset + i) * 2654435761) >>> 24;
  return b;
}

/** A page with `n` subresources from the same origin: images, scripts and style sheets in turn. */
export function pageHtml(n: number): string {
  const subs = Array.from({ length: n }, (_, i) =>
    i % 3 === 0 ? `<img src="/sub/${i}.svg">` : i % 3 === 1 ? `<script src="/sub/${i}.js"></script>` : `<link rel="stylesheet" href="/sub/${i}.css">`,
  );
  return `<!doctype html><html><head><title>h2 page</title></head><body>${subs.join("\n")}</body></html>`;
}

export async function startH2Origin(certs: OriginCerts, o: { allowHTTP1: boolean }): Promise<H2Origin> {
  const server = http2.createSecureServer({ key: certs.key, cert: certs.cert, allowHTTP1: o.allowHTTP1 });
  const origin: H2Origin = { url: "", port: 0, sessions: 0, seen: [], close: () => new Promise((r) => server.close(() => r())) };
  const sessions = new Set<http2.ServerHttp2Session>();
  server.on("session", (s) => {
    origin.sessions++;
    sessions.add(s);
    s.on("close", () => sessions.delete(s));
  });
  server.on("stream", (stream, headers, _flags, raw: string[]) => {
    const chunks: Buffer[] = [];
    stream.on("data", (c: Buffer) => chunks.push(c));
    stream.on("error", () => undefined);
    stream.on("end", () => {
      const body = Buffer.concat(chunks);
      const path = String(headers[":path"]);
      origin.seen.push({ method: String(headers[":method"]), path, rawHeaders: raw, body });
      respond(stream, path, body);
    });
  });
  if (o.allowHTTP1) {
    server.on("request", (req, res) => {
      if (req.httpVersionMajor === 2) return;
      res.writeHead(200, { "content-type": "text/plain" });
      res.end("over http/1.1");
    });
  }
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  origin.port = (server.address() as AddressInfo).port;
  origin.url = `https://127.0.0.1:${origin.port}`;
  const close = origin.close;
  origin.close = async () => {
    for (const s of sessions) s.destroy();
    await close();
  };
  return origin;
}
