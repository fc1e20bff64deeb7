/**
 * The loopback servers of the replay tests (test/helpers/replay.ts): ReplayWeb.page's static app
 * with the archives beside it, served with HTTP Range and every request logged; and tripwires,
 * listeners that note and refuse every connection, standing where nothing should connect.
 */
import http from "node:http";
import net from "node:net";
import { createReadStream, existsSync, statSync } from "node:fs";
import { extname, join, normalize, resolve, sep } from "node:path";
import type { AddressInfo } from "node:net";

const APP_DIR = resolve(new URL("../../node_modules/replaywebpage", import.meta.url).pathname);

export interface ServedRequest {
  method: string;
  path: string;
  range: string | null;
  status: number;
}

export interface ReplayServer {
  /** `http://127.0.0.1:PORT` */
  origin: string;
  port: number;
  /** The URL of a file under the archive directory (`rel` with forward slashes). */
  archiveUrl(rel: string): string;
  requests: ServedRequest[];
  close(): Promise<void>;
}

const TYPES: Record<string, string> = { ".html": "text/html; charset=utf-8", ".js": "application/javascript", ".json": "application/json" };

/** `bytes=a-b`, `bytes=a-`, `bytes=-n` → [start, end] inclusive; null = not satisfiable; undefined = no range. */
export function parseRange(header: string | undefined, size: number): [number, number] | null | undefined {
  if (!header) return undefined;
  const m = /^bytes=(\d*)-(\d*)$/.exec(header.trim());
  if (!m || (m[1] === "" && m[2] === "")) return null;
  if (m[1] === "") {
    const n = Math.min(Number(m[2]), size);
    return n === 0 ? null : [size - n, size - 1];
  }
  const start = Number(m[1]);
  const end = m[2] === "" ? size - 1 : Math.min(Number(m[2]), size - 1);
  return start >= size || end < start ? null : [start, end];
}

/** A path under `root` for a URL path, or null when it would leave `root`. */
function inside(root: string, urlPath: string): string | null {
  const p = normalize(join(root, decodeURIComponent(urlPath)));
  return p === root || p.startsWith(root + sep) ? p : null;
}

function sendFile(req: http.IncomingMessage, res: http.ServerResponse, file: string, type: string): number {
  const size = statSync(file).size;
  const range = parseRange(req.headers.range, size);
  const headers: http.OutgoingHttpHeaders = { "Content-Type": type, "Accept-Ranges": "bytes", "Cache-Control": "no-store" };
  if (range === null) {
    res.writeHead(416, { ...headers, "Content-Range": `bytes */${size}` }).end();
    return 416;
  }
  const [start, end] = range ?? [0, size - 1];
  const status = range ? 206 : 200;
  if (range) headers["Content-Range"] = `bytes ${start}-${end}/${size}`;
  res.writeHead(status, { ...headers, "Content-Length": size === 0 ? 0 : end - start + 1 });
  if (req.method === "HEAD" || size === 0) res.end();
  else createReadStream(file, { start, end }).pipe(res);
  return status;
}

/** Serve ReplayWeb.page at `/` and `archiveDir` at `/archive/`, on loopback. */
export async function startReplayServer(archiveDir: string): Promise<ReplayServer> {
  if (!existsSync(join(APP_DIR, "sw.js"))) throw new Error(`${APP_DIR}/sw.js is missing: the replay tests need the npm package replaywebpage (a devDependency)`);
  const root = resolve(archiveDir);
  const requests: ServedRequest[] = [];
  const server = http.createServer((req, res) => {
    const path = (req.url ?? "/").split("?")[0]!;
    const log = (status: number) => requests.push({ method: req.method!, path, range: req.headers.range ?? null, status });
    const file = path.startsWith("/archive/") ? inside(root, path.slice("/archive/".length)) : inside(APP_DIR, path === "/" ? "index.html" : path);
    if (!file || !existsSync(file) || !statSync(file).isFile() || (req.method !== "GET" && req.method !== "HEAD")) {
      res.writeHead(404, { "Content-Type": "text/plain" }).end("not found\n");
      log(404);
      return;
    }
    const type = path.startsWith("/archive/") ? "application/octet-stream" : (TYPES[extname(file)] ?? "application/octet-stream");
    log(sendFile(req, res, file, type));
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const port = (server.address() as AddressInfo).port;
  const origin = `http://127.0.0.1:${port}`;
  return {
    origin,
    port,
    requests,
    archiveUrl: (rel) => `${origin}/archive/${rel.split("/").map(encodeURIComponent).join("/")}`,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

// ---------------------------------------------------------------------------------------------
// Tripwires: where every connection that should not happen ends, noted.

export interface Tripwire {
  port: number;
  /** One line per connection: its port and its first line (a proxy request) or `<N bytes>`. */
  hits: string[];
  close(): Promise<void>;
}

/** Listen on `port` (0: any); note and refuse every connection. */
export async function startTripwire(port = 0): Promise<Tripwire> {
  const hits: string[] = [];
  const sockets = new Set<net.Socket>();
  const server = net.createServer((s) => {
    sockets.add(s);
    s.on("close", () => sockets.delete(s));
    s.on("error", () => undefined);
    s.once("data", (d: Buffer) => {
      const text = d.toString("latin1");
      const line = /^[A-Z]+ \S+ HTTP\/1\.[01]\r\n/.test(text) ? text.split("\r\n", 1)[0]! : `<${d.length} bytes>`;
      hits.push(`:${tw.port} ${line}`);
      s.end("HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
    });
  });
  await new Promise<void>((r) => server.listen(port, "127.0.0.1", r));
  const tw: Tripwire = {
    port: (server.address() as AddressInfo).port,
    hits,
    close: () =>
      new Promise<void>((r) => {
        for (const s of sockets) s.destroy();
        server.close(() => r());
      }),
  };
  return tw;
}

/** Tripwires on the given (now free) ports, e.g. the recorded origins' after they stopped. */
export async function holdPorts(ports: number[]): Promise<Tripwire[]> {
  return Promise.all(ports.map((p) => startTripwire(p)));
}
