/** Answers of the control API: JSON or text with the common headers, and errors as `{"error": {"code", "message"}}`. */
import type { IncomingMessage, ServerResponse } from "node:http";
import { errorMessage } from "../core/errors.js";
import type { Logger } from "../core/log.js";
import { toApiError } from "./apiErrors.js";
import type { Reply, ReplyStream } from "./routeTypes.js";

export function send(req: IncomingMessage, res: ServerResponse, r: Reply): void {
  if (res.headersSent || res.destroyed) return;
  const headers: Record<string, string> = { "cache-control": "no-store", "x-content-type-options": "nosniff", ...r.headers };
  let body: string | undefined;
  if (r.json !== undefined) {
    body = JSON.stringify(r.json) + "\n";
    headers["content-type"] = "application/json; charset=utf-8";
  } else if (r.text !== undefined) {
    body = r.text;
    headers["content-type"] = r.contentType ?? "text/plain; charset=utf-8";
  }
  if (body !== undefined) headers["content-length"] = String(Buffer.byteLength(body));
  res.writeHead(r.status, headers);
  res.end(body);
  // A body we did not read (an early error) is discarded, within bounds, so the client still
  // gets its answer and the connection stays usable.
  if (!req.complete && !req.destroyed) {
    req.removeAllListeners("data");
    req.resume();
    const t = setTimeout(() => req.socket.destroy(), 10_000);
    t.unref();
    req.once("end", () => clearTimeout(t));
    req.once("close", () => clearTimeout(t));
  }
}

/** The error as its API answer; an internal one is logged. After the head went out, only the connection can be cut. */
export function sendError(log: Logger, req: IncomingMessage, res: ServerResponse, e: unknown, where: string): void {
  const { error, internal } = toApiError(e);
  if (internal) log.error("control.error", { where, code: error.code, error: errorMessage(e), stack: e instanceof Error ? e.stack : undefined });
  if (res.headersSent) {
    res.destroy();
    return;
  }
  send(req, res, { status: error.status, json: error.body(), headers: { ...error.headers } });
}

/**
 * A streamed answer: the head with its Content-Length, then the body a chunk at a time, each
 * chunk's promise settling once Node has handed it to the socket (so memory is the writer's
 * few chunks, whatever the client's speed). A client that goes away ends the write with an
 * error; a failure after the head went out can only cut the connection (the length then tells
 * the client its copy is short) and the error goes on to be logged.
 */
export async function sendStream(res: ServerResponse, r: Reply & { stream: ReplyStream }): Promise<void> {
  const body = r.stream;
  try {
    if (res.destroyed) return;
    res.writeHead(r.status, {
      "cache-control": "no-store",
      "x-content-type-options": "nosniff",
      "content-type": r.contentType ?? "application/octet-stream",
      "content-length": String(body.length),
      ...r.headers,
    });
    const waiting = new Set<(e: Error) => void>();
    let clientGone = false;
    const gone = () => {
      clientGone = true;
      for (const fail of waiting) fail(new Error("the client closed the connection"));
    };
    res.once("close", gone);
    const sink = (chunk: Buffer) =>
      new Promise<void>((resolve, reject) => {
        if (res.destroyed) return reject(new Error("the client closed the connection"));
        const fail = (e: Error) => {
          waiting.delete(fail);
          reject(e);
        };
        waiting.add(fail);
        res.write(chunk, (err) => {
          waiting.delete(fail);
          if (err) reject(err);
          else resolve();
        });
      });
    try {
      await body.write(sink);
      res.end();
    } catch (e) {
      const theirs = clientGone || res.destroyed;
      res.destroy();
      // Our failure, not the client's leaving: the server's error handler logs it.
      if (!theirs) throw e;
    } finally {
      res.off("close", gone);
    }
  } finally {
    await body.dispose();
  }
}
