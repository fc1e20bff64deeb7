/** The control API's node:http server: timeouts, malformed requests, listening and a graceful close. */
import http, { type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { Duplex } from "node:stream";
import type { Logger } from "../core/log.js";
import { sendError } from "./reply.js";

/** A server that answers every request with `handle`; a throw becomes the JSON error answer. */
export function createHttpServer(log: Logger, handle: (req: IncomingMessage, res: ServerResponse) => Promise<void>): http.Server {
  const server = http.createServer({ requestTimeout: 0, headersTimeout: 60_000, keepAliveTimeout: 5_000 }, (req, res) => {
    const started = performance.now();
    const where = `${req.method} ${(req.url ?? "").split("?")[0]}`;
    res.once("finish", () => log.debug("control.request", { request: where, status: res.statusCode, ms: Math.round(performance.now() - started) }));
    handle(req, res).catch((e: unknown) => sendError(log, req, res, e, where));
  });
  // Uploads may be long (video); an idle socket is dropped after two minutes.
  server.setTimeout(120_000);
  server.on("clientError", answerClientError);
  return server;
}

/** A request node:http could not parse gets a JSON 400 (431 for oversized headers), then the connection closes. */
function answerClientError(err: Error, socket: Duplex): void {
  const code = (err as NodeJS.ErrnoException).code ?? "";
  if (socket.writable && code !== "ECONNRESET") {
    const tooLarge = code === "HPE_HEADER_OVERFLOW";
    const body = JSON.stringify({ error: { code: "ERR_BAD_REQUEST", message: tooLarge ? "request headers too large" : `malformed HTTP request: ${err.message}` } }) + "\n";
    socket.end(`HTTP/1.1 ${tooLarge ? "431 Request Header Fields Too Large" : "400 Bad Request"}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
  } else {
    socket.destroy();
  }
}

export function listenOn(server: http.Server, port: number, host: string): Promise<AddressInfo> {
  return new Promise((resolve, reject) => {
    const onError = (e: Error) => reject(e);
    server.once("error", onError);
    server.listen(port, host, () => {
      server.off("error", onError);
      resolve(server.address() as AddressInfo);
    });
  });
}

/** Stop accepting, let requests in flight finish for up to `graceMs`, then cut the rest. */
export function closeGracefully(server: http.Server, graceMs: number): Promise<void> {
  return new Promise((resolve) => {
    if (!server.listening) return resolve();
    const t = setTimeout(() => server.closeAllConnections(), graceMs);
    t.unref();
    server.close(() => {
      clearTimeout(t);
      resolve();
    });
    server.closeIdleConnections();
  });
}
