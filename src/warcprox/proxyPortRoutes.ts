/**
 * What warcprox answers on its proxy port besides proxying (warcprox-compat.md §4, §5): its status
 * document, which brozzler reads, and lathe's extension that shows one stats bucket.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Socket } from "node:net";
import { errorMessage } from "../core/errors.js";
import type { StatsStore } from "./statsStore.js";

export interface WarcproxRoutesContext {
  stats: StatsStore;
  /** The `GET /status` document for a request that arrived on `socket`. */
  status(socket: Socket): Promise<Record<string, unknown>>;
}

/** Answers `GET /status` and `GET /lathe/stats/{bucket}`; false for any other request. */
export function answerWarcproxRoute(ctx: WarcproxRoutesContext, req: IncomingMessage, res: ServerResponse): boolean {
  if (req.method !== "GET") return false;
  if (req.url === "/status") {
    req.resume();
    ctx.status(req.socket).then(
      (doc) => sendJson(res, 200, JSON.stringify(doc, null, 2)),
      (e) => sendJson(res, 500, JSON.stringify({ error: errorMessage(e) })),
    );
    return true;
  }
  if (req.url?.startsWith("/lathe/stats/")) {
    // 404 {} for a bucket that does not exist (yet).
    req.resume();
    let name = "";
    try {
      name = decodeURIComponent(req.url.slice("/lathe/stats/".length));
    } catch {
      name = "";
    }
    ctx.stats.bucket(name).then(
      (b) => sendJson(res, b ? 200 : 404, JSON.stringify(b ?? {})),
      // The fleet's store is away: say so rather than show a figure that may be wrong.
      (e) => sendJson(res, 503, JSON.stringify({ error: errorMessage(e) })),
    );
    return true;
  }
  return false;
}

function sendJson(res: ServerResponse, status: number, json: string): void {
  const body = Buffer.from(json + "\n");
  res.writeHead(status, ["Content-Type", "application/json", "Content-Length", String(body.length)]);
  res.end(body);
}
