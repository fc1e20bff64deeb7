/**
 * The handlers of the routes in openapi.ts's table, by operationId: each translates one request
 * to the ControlFacade and its answer back. Every route has a handler and every handler a route
 * (checked when this module loads).
 */
import type { CollectionInput } from "../archive/collections.js";
import { errorMessage } from "../core/errors.js";
import { ApiError, badRequest } from "./apiErrors.js";
import { apiIndexOf } from "./apiIndex.js";
import type { SessionInfo, WaczDownload } from "./facade.js";
import { METRICS_CONTENT_TYPE } from "./metrics.js";
import { ROUTES } from "./openapi.js";
import { bodyStream } from "./requestBody.js";
import type { Handler, HandlerContext, Reply } from "./routeTypes.js";

const withoutPassword = (s: SessionInfo): SessionInfo => {
  const { password: _password, ...rest } = s;
  return rest;
};

/** The header's value as UTF-8 (Node hands header bytes over as latin1). */
const utf8Header = (v: string): string => Buffer.from(v, "latin1").toString("utf8");

/** The body of `POST /api/v1/sessions`, checked: only `collection` (a name) and `port` (0–65535). */
function sessionInput(b: Record<string, unknown>): { collection?: string; port?: number } {
  for (const k of Object.keys(b)) if (k !== "collection" && k !== "port") throw badRequest(k, "unknown field; known: collection, port");
  if (b.collection !== undefined && typeof b.collection !== "string") throw badRequest("collection", `must be a collection name, got ${JSON.stringify(b.collection)}`);
  if (b.port !== undefined && (typeof b.port !== "number" || !Number.isInteger(b.port) || b.port < 0 || b.port > 65535)) {
    throw badRequest("port", `must be an integer from 0 to 65535, got ${JSON.stringify(b.port)}`);
  }
  const input: { collection?: string; port?: number } = {};
  if (b.collection !== undefined) input.collection = b.collection as string;
  if (b.port !== undefined) input.port = b.port as number;
  return input;
}

/** A resource is named either by `uri`, or by `kind` and `page` together. */
function resourceName(q: URLSearchParams): { uri?: string; kind?: string; page?: string } {
  const uri = q.get("uri") ?? undefined;
  const kind = q.get("kind") ?? undefined;
  const page = q.get("page") ?? undefined;
  if (uri !== undefined && (kind !== undefined || page !== undefined)) throw badRequest(kind !== undefined ? "kind" : "page", "give either uri, or kind and page, not both");
  if (uri === undefined) {
    if (kind === undefined && page === undefined) throw badRequest("uri", "required: give uri, or kind and page");
    if (kind === undefined) throw badRequest("kind", "required with page");
    if (page === undefined) throw badRequest("page", "required with kind");
  }
  return { uri, kind, page };
}

/** The Lathe-Context header, parsed; undefined when absent. */
function latheContext(raw: string | undefined): unknown {
  if (raw === undefined) return undefined;
  try {
    return JSON.parse(utf8Header(raw));
  } catch (e) {
    throw badRequest("Lathe-Context", `invalid JSON: ${errorMessage(e)}`);
  }
}

/**
 * A WACZ as a streamed answer. While it is being made (indexing a large collection takes a
 * while) a client that goes away stops the work; nothing is answered then, nor logged.
 */
async function waczReply(c: HandlerContext, make: (signal: AbortSignal) => Promise<WaczDownload>): Promise<Reply> {
  const stop = new AbortController();
  c.res.once("close", () => stop.abort());
  let w: WaczDownload;
  try {
    w = await make(stop.signal);
  } catch (e) {
    if (stop.signal.aborted) return { status: 499 }; // not sent: the connection is gone
    throw e;
  }
  const p = w.prepared;
  return {
    status: 200,
    contentType: "application/wacz",
    headers: { "content-disposition": `attachment; filename="${w.filename.replace(/[^A-Za-z0-9._-]/g, "_")}"` },
    stream: { length: p.size, write: (sink) => p.write(sink), dispose: () => p.dispose() },
  };
}

export const HANDLERS: Record<string, Handler> = {
  listCollections: (f) => ({ status: 200, json: { collections: f.collections.list() } }),
  createCollection: (f, c) => {
    const created = f.createCollection(c.body as CollectionInput);
    return { status: 201, json: created, headers: { location: `/api/v1/collections/${encodeURIComponent(created.name)}` } };
  },
  getCollection: (f, c) => {
    const coll = f.collections.get(c.params.name!);
    if (!coll) throw new ApiError("ERR_NOT_FOUND", `no collection ${JSON.stringify(c.params.name)}`);
    return { status: 200, json: coll };
  },
  updateCollection: async (f, c) => ({ status: 200, json: await f.updateCollection(c.params.name!, c.body as CollectionInput) }),
  deleteCollection: async (f, c) => {
    await f.deleteCollection(c.params.name!);
    return { status: 204 };
  },
  openSession: async (f, c) => {
    const s = await f.openSession(sessionInput(c.body as Record<string, unknown>));
    return { status: 201, json: s, headers: { location: `/api/v1/sessions/${encodeURIComponent(s.id)}` } };
  },
  listSessions: (f) => ({ status: 200, json: { sessions: f.listSessions().map(withoutPassword) } }),
  getSession: (f, c) => {
    const s = f.getSession(c.params.id!);
    if (!s) throw new ApiError("ERR_NOT_FOUND", `no session ${JSON.stringify(c.params.id)}`);
    return { status: 200, json: withoutPassword(s) };
  },
  closeSession: async (f, c) => ({ status: 200, json: await f.closeSession(c.params.id!) }),
  getCollectionWacz: (f, c) => waczReply(c, (signal) => f.collectionWacz(c.params.name!, signal)),
  getSessionWacz: (f, c) => waczReply(c, (signal) => f.sessionWacz(c.params.id!, signal)),
  writeResource: async (f, c) => {
    const q = c.query;
    const { uri, kind, page } = resourceName(q);
    const contentType = c.req.headers["content-type"];
    if (!contentType) throw badRequest("Content-Type", "the resource's Content-Type header is required");
    const context = latheContext(c.req.headers["lathe-context"] as string | undefined);
    const lengthHeader = c.req.headers["content-length"];
    const written = await f.writeResource({
      collection: q.get("collection") ?? "default",
      ...(uri !== undefined ? { uri } : {}),
      ...(kind !== undefined ? { kind } : {}),
      ...(page !== undefined ? { page } : {}),
      contentType,
      body: bodyStream(c.req),
      ...(lengthHeader !== undefined ? { length: Number(lengthHeader) } : {}),
      ...(context !== undefined ? { context } : {}),
    });
    return { status: 201, json: written };
  },
  getStatus: async (f) => ({ status: 200, json: await f.status() }),
  getFleet: async (f) => ({ status: 200, json: await f.fleet() }),
  getPoliteness: (f) => ({ status: 200, json: f.politeness() }),
  getMetrics: (f) => ({ status: 200, text: f.metrics(), contentType: METRICS_CONTENT_TYPE }),
  getCaPem: (f) => ({ status: 200, text: f.caPem(), contentType: "application/x-pem-file" }),
  getOpenApi: (_f, c) => ({ status: 200, text: c.openapiText, contentType: "application/json; charset=utf-8" }),
  getApiIndex: (_f, c) => ({ status: 200, json: apiIndexOf(c.openapi) }),
  getApiIndexWithoutSlash: (_f, c) => ({ status: 200, json: apiIndexOf(c.openapi) }),
};

for (const r of ROUTES) if (!HANDLERS[r.id]) throw new Error(`route ${r.id} has no handler`);
for (const id of Object.keys(HANDLERS)) if (!ROUTES.some((r) => r.id === id)) throw new Error(`handler ${id} has no route`);
