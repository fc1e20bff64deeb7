/** Answers of the control API: JSON or text with the common headers, and errors as `{"error": {"code", "message"}}`. */
import type { IncomingMessage, ServerResponse } from "node:http";
import { errorMessage } from "../core/errors.js";
import type { Logger } from "../core/log.js";
import { toApiError } from "./apiErrors.js";
import type { Reply } from "./routeTypes.js";

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
