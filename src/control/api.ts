/**
 * The REST control API (decisions.md §5) on node:http: collections, sessions, associated
 * resources, status, Prometheus metrics, the CA certificate and the OpenAPI document. It only
 * translates HTTP to the ControlFacade and back; the route table in openapi.ts drives both the
 * router and the document, so the two cannot disagree.
 *
 * Access: with a token configured every route except `GET /ca.pem` and `GET /openapi.json`
 * requires `Authorization: Bearer <token>` (compared in constant time). Cross-site browser
 * requests are refused always, and without a token a Host that is not an IP address or
 * `localhost` is refused (DNS rebinding), so a web page cannot drive an unprotected API.
 */
import { createHash, timingSafeEqual } from "node:crypto";
import http, { type IncomingMessage, type ServerResponse } from "node:http";
import { isIP, type AddressInfo } from "node:net";
import { PassThrough } from "node:stream";
import type { Logger } from "../core/log.js";
import { errorMessage } from "../core/errors.js";
import type { CollectionInput } from "../archive/collections.js";
import type { ControlFacade, SessionInfo } from "./facade.js";
import { ApiError, badRequest, toApiError } from "./apiErrors.js";
import { METRICS_CONTENT_TYPE } from "./metrics.js";
import { JSON_BODY_LIMIT, ROUTES, buildOpenApi, type ExtraRouteDoc, type HttpMethod, type RouteDef } from "./openapi.js";

export interface RequestContext {
  req: IncomingMessage;
  res: ServerResponse;
  /** Percent-decoded path parameters. */
  params: Record<string, string>;
  query: URLSearchParams;
}

/** A route the caller adds (e.g. `/cdx`, the live page `/`): documented in /openapi.json, answered by `handle`. */
export interface ExtraRoute extends ExtraRouteDoc {
  /** Writes the whole answer itself; a throw becomes the usual JSON error (if nothing was sent yet). */
  handle(ctx: RequestContext): Promise<void> | void;
}

export interface ControlServerOptions {
  /** Bearer token; null = none required (the caller allows that on loopback only). */
  token: string | null;
  log: Logger;
  extraRoutes?: readonly ExtraRoute[];
}

export interface ControlServer {
  server: http.Server;
  listen(port: number, host: string): Promise<AddressInfo>;
  /** Stop accepting, let requests in flight finish for up to `graceMs`, then cut the rest. */
  close(graceMs?: number): Promise<void>;
  /** The OpenAPI document this server serves. */
  openapi: Record<string, unknown>;
}

interface Reply {
  status: number;
  json?: unknown;
  text?: string;
  contentType?: string;
  headers?: Record<string, string>;
}

interface HandlerContext extends RequestContext {
  /** The parsed JSON body, for routes that take one. */
  body: unknown;
}

type Handler = (facade: ControlFacade, c: HandlerContext) => Promise<Reply> | Reply;

const withoutPassword = (s: SessionInfo): SessionInfo => {
  const { password: _password, ...rest } = s;
  return rest;
};

const isObject = (v: unknown): v is Record<string, unknown> => !!v && typeof v === "object" && !Array.isArray(v);

/** The header's value as UTF-8 (Node hands header bytes over as latin1). */
const utf8Header = (v: string): string => Buffer.from(v, "latin1").toString("utf8");

const HANDLERS: Record<string, Handler> = {
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
    const b = c.body as Record<string, unknown>;
    for (const k of Object.keys(b)) if (k !== "collection" && k !== "port") throw badRequest(k, "unknown field; known: collection, port");
    if (b.collection !== undefined && typeof b.collection !== "string") throw badRequest("collection", `must be a collection name, got ${JSON.stringify(b.collection)}`);
    if (b.port !== undefined && (typeof b.port !== "number" || !Number.isInteger(b.port) || b.port < 0 || b.port > 65535)) {
      throw badRequest("port", `must be an integer from 0 to 65535, got ${JSON.stringify(b.port)}`);
    }
    const input: { collection?: string; port?: number } = {};
    if (b.collection !== undefined) input.collection = b.collection as string;
    if (b.port !== undefined) input.port = b.port as number;
    const s = await f.openSession(input);
    return { status: 201, json: s, headers: { location: `/api/v1/sessions/${encodeURIComponent(s.id)}` } };
  },
  listSessions: (f) => ({ status: 200, json: { sessions: f.listSessions().map(withoutPassword) } }),
  getSession: (f, c) => {
    const s = f.getSession(c.params.id!);
    if (!s) throw new ApiError("ERR_NOT_FOUND", `no session ${JSON.stringify(c.params.id)}`);
    return { status: 200, json: withoutPassword(s) };
  },
  closeSession: async (f, c) => ({ status: 200, json: await f.closeSession(c.params.id!) }),
  writeResource: async (f, c) => {
    const q = c.query;
    const uri = q.get("uri") ?? undefined;
    const kind = q.get("kind") ?? undefined;
    const page = q.get("page") ?? undefined;
    if (uri !== undefined && (kind !== undefined || page !== undefined)) throw badRequest(kind !== undefined ? "kind" : "page", "give either uri, or kind and page, not both");
    if (uri === undefined) {
      if (kind === undefined && page === undefined) throw badRequest("uri", "required: give uri, or kind and page");
      if (kind === undefined) throw badRequest("kind", "required with page");
      if (page === undefined) throw badRequest("page", "required with kind");
    }
    const contentType = c.req.headers["content-type"];
    if (!contentType) throw badRequest("Content-Type", "the resource's Content-Type header is required");
    let context: unknown;
    const raw = c.req.headers["lathe-context"];
    if (raw !== undefined) {
      try {
        context = JSON.parse(utf8Header(raw as string));
      } catch (e) {
        throw badRequest("Lathe-Context", `invalid JSON: ${errorMessage(e)}`);
      }
    }
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
  getStatus: (f) => ({ status: 200, json: f.status() }),
  getMetrics: (f) => ({ status: 200, text: f.metrics(), contentType: METRICS_CONTENT_TYPE }),
  getCaPem: (f) => ({ status: 200, text: f.caPem(), contentType: "application/x-pem-file" }),
  getOpenApi: () => {
    throw new Error("served by the router");
  },
};

for (const r of ROUTES) if (!HANDLERS[r.id]) throw new Error(`route ${r.id} has no handler`);
for (const id of Object.keys(HANDLERS)) if (!ROUTES.some((r) => r.id === id)) throw new Error(`handler ${id} has no route`);

interface CompiledRoute {
  method: HttpMethod;
  segments: Array<{ literal: string } | { param: string }>;
  auth: boolean;
  def: RouteDef | null;
  extra: ExtraRoute | null;
}

function compile(path: string): CompiledRoute["segments"] {
  return path
    .split("/")
    .slice(1)
    .map((s) => (/^\{[A-Za-z_][A-Za-z0-9_]*\}$/.test(s) ? { param: s.slice(1, -1) } : { literal: s }));
}

/** The path parameters (still percent-encoded) if `parts` matches; null otherwise. */
function matchPath(route: CompiledRoute, parts: string[]): Record<string, string> | null {
  if (parts.length !== route.segments.length) return null;
  const params: Record<string, string> = {};
  for (let i = 0; i < parts.length; i++) {
    const seg = route.segments[i]!;
    const part = parts[i]!;
    if ("literal" in seg) {
      if (seg.literal !== part) return null;
    } else {
      if (part === "") return null;
      params[seg.param] = part;
    }
  }
  return params;
}

function decodeParams(raw: Record<string, string>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(raw)) {
    try {
      out[k] = decodeURIComponent(v);
    } catch {
      throw badRequest(k, "invalid percent-encoding in the path");
    }
  }
  return out;
}

function mediaType(v: string | undefined): string {
  return (v ?? "").split(";")[0]!.trim().toLowerCase();
}

function hasBody(req: IncomingMessage): boolean {
  const cl = req.headers["content-length"];
  if (cl !== undefined) return cl.trim() !== "0";
  return req.headers["transfer-encoding"] !== undefined;
}

/** Read a JSON body of at most JSON_BODY_LIMIT bytes. `optional`: no body → {}. */
async function readJson(req: IncomingMessage, optional: boolean): Promise<unknown> {
  if (!hasBody(req)) {
    if (optional) return {};
    throw badRequest("(body)", "a JSON object is required");
  }
  if (mediaType(req.headers["content-type"]) !== "application/json") {
    throw new ApiError("ERR_UNSUPPORTED_MEDIA_TYPE", `the request body must be application/json, got ${JSON.stringify(req.headers["content-type"] ?? "(none)")}`);
  }
  const declared = Number(req.headers["content-length"] ?? NaN);
  if (declared > JSON_BODY_LIMIT) throw new ApiError("ERR_PAYLOAD_TOO_LARGE", `JSON bodies are limited to ${JSON_BODY_LIMIT} bytes; this one declares ${declared}`);
  // Events rather than for-await: leaving a for-await early would destroy the request, and with
  // it the socket the error answer has to go out on.
  const data = await new Promise<Buffer>((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const done = (e: Error | null) => {
      req.off("data", onData);
      req.off("end", onEnd);
      req.off("error", onError);
      if (e) reject(e);
      else resolve(Buffer.concat(chunks));
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > JSON_BODY_LIMIT) done(new ApiError("ERR_PAYLOAD_TOO_LARGE", `JSON bodies are limited to ${JSON_BODY_LIMIT} bytes`));
      else chunks.push(chunk);
    };
    const onEnd = () => done(null);
    const onError = (e: Error) => done(e);
    req.on("data", onData);
    req.on("end", onEnd);
    req.on("error", onError);
  });
  if (data.length === 0) {
    if (optional) return {};
    throw badRequest("(body)", "a JSON object is required");
  }
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(data);
  } catch {
    throw badRequest("(body)", "is not valid UTF-8");
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (e) {
    throw badRequest("(body)", `invalid JSON: ${errorMessage(e)}`);
  }
  if (!isObject(value)) throw badRequest("(body)", "must be a JSON object");
  return value;
}

/**
 * The request body as a stream of its own: the facade may stop reading (or destroy its stream)
 * without destroying the request, so an error answer can still be sent. Back-pressure passes
 * through; a client that aborts the upload errors the stream.
 */
function bodyStream(req: IncomingMessage): PassThrough {
  const out = new PassThrough();
  req.pipe(out);
  req.once("error", (e) => out.destroy(e));
  req.once("close", () => {
    if (!req.complete) out.destroy(new ApiError("ERR_BAD_REQUEST", "the client aborted the upload"));
  });
  out.once("close", () => req.unpipe(out));
  return out;
}

function checkQuery(def: RouteDef, query: URLSearchParams): void {
  const known = new Map((def.query ?? []).map((q) => [q.name, q]));
  const seen = new Set<string>();
  for (const k of query.keys()) {
    if (!known.has(k)) throw badRequest(k, known.size ? `unknown query parameter; known: ${[...known.keys()].join(", ")}` : "unknown query parameter; this route takes none");
    if (seen.has(k)) throw badRequest(k, "given more than once");
    seen.add(k);
  }
  for (const q of known.values()) if (q.required && !seen.has(q.name)) throw badRequest(q.name, "required query parameter");
}

/** Loopback and IP-literal Host values are safe from DNS rebinding; names other than localhost are not. */
function rebindingSafeHost(host: string | undefined): boolean {
  if (host === undefined) return true;
  let name = host.trim().toLowerCase();
  if (name.startsWith("[")) return name.includes("]") && isIP(name.slice(1, name.indexOf("]"))) === 6;
  name = name.replace(/:\d*$/, "");
  return name === "localhost" || name.endsWith(".localhost") || isIP(name) === 4;
}

function crossSite(req: IncomingMessage): string | null {
  const site = req.headers["sec-fetch-site"];
  if (site === "cross-site" || site === "same-site") return `a ${site} browser request`;
  const origin = req.headers.origin;
  if (origin !== undefined) {
    let host: string;
    try {
      host = new URL(origin).host;
    } catch {
      return `a browser request from origin ${JSON.stringify(origin)}`;
    }
    if (host !== (req.headers.host ?? "").toLowerCase()) return `a browser request from origin ${origin}`;
  }
  return null;
}

export function createControlServer(facade: ControlFacade, opts: ControlServerOptions): ControlServer {
  const log = opts.log;
  const tokenDigest = opts.token !== null ? createHash("sha256").update(opts.token, "utf8").digest() : null;
  const extras = opts.extraRoutes ?? [];
  const openapi = buildOpenApi({ version: facade.version, tokenConfigured: tokenDigest !== null, extra: extras });
  const openapiText = JSON.stringify(openapi, null, 2) + "\n";
  const routes: CompiledRoute[] = [
    ...ROUTES.map((def) => ({ method: def.method, segments: compile(def.path), auth: def.auth, def, extra: null })),
    ...extras.map((x) => ({ method: x.method, segments: compile(x.path), auth: x.auth, def: null, extra: x })),
  ];

  const authorized = (req: IncomingMessage): "ok" | "missing" | "invalid" => {
    if (!tokenDigest) return "ok";
    const m = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(req.headers.authorization ?? "");
    if (!m) return "missing";
    // Header bytes arrive as latin1 code units: hash the bytes, so a UTF-8 token matches.
    const given = createHash("sha256").update(Buffer.from(m[1]!, "latin1")).digest();
    return timingSafeEqual(given, tokenDigest) ? "ok" : "invalid";
  };

  const send = (req: IncomingMessage, res: ServerResponse, r: Reply): void => {
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
  };

  const sendError = (req: IncomingMessage, res: ServerResponse, e: unknown, where: string): void => {
    const { error, internal } = toApiError(e);
    if (internal) log.error("control.error", { where, code: error.code, error: errorMessage(e), stack: e instanceof Error ? e.stack : undefined });
    if (res.headersSent) {
      res.destroy();
      return;
    }
    send(req, res, { status: error.status, json: error.body(), headers: { ...error.headers } });
  };

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const method = req.method ?? "GET";
    let rawPath = req.url ?? "/";
    if (!rawPath.startsWith("/")) {
      try {
        const u = new URL(rawPath);
        rawPath = u.pathname + u.search;
      } catch {
        rawPath = "/";
      }
    }
    const qi = rawPath.indexOf("?");
    const pathname = qi < 0 ? rawPath : rawPath.slice(0, qi);
    const query = new URLSearchParams(qi < 0 ? "" : rawPath.slice(qi + 1));

    const refused = crossSite(req);
    if (refused) throw new ApiError("ERR_FORBIDDEN", `${refused} is refused: the control API does not serve web pages of other origins`);
    if (!tokenDigest && !rebindingSafeHost(req.headers.host)) {
      throw new ApiError("ERR_FORBIDDEN", `Host ${JSON.stringify(req.headers.host)} is refused without a control token (DNS rebinding); use an IP address or localhost, or configure control.token`);
    }

    const parts = pathname.split("/").slice(1);
    const onPath: Array<{ route: CompiledRoute; params: Record<string, string> }> = [];
    for (const route of routes) {
      const params = matchPath(route, parts);
      if (params) onPath.push({ route, params });
    }
    const hit = onPath.find((m) => m.route.method === method);
    if (!hit || hit.route.auth) {
      const a = authorized(req);
      if (a !== "ok") {
        throw new ApiError("ERR_UNAUTHORIZED", a === "missing" ? "this route requires Authorization: Bearer <control token>" : "wrong bearer token", {
          headers: { "www-authenticate": a === "missing" ? 'Bearer realm="lathe"' : 'Bearer realm="lathe", error="invalid_token"' },
        });
      }
    }
    if (!onPath.length) throw new ApiError("ERR_NOT_FOUND", `no route ${pathname}; see /openapi.json`);
    if (!hit) {
      const allow = [...new Set(onPath.map((m) => m.route.method))].join(", ");
      throw new ApiError("ERR_METHOD_NOT_ALLOWED", `${method} is not allowed on ${pathname}; allowed: ${allow}`, { headers: { allow } });
    }

    const route = hit.route;
    const params = decodeParams(hit.params);
    if (route.extra) {
      await route.extra.handle({ req, res, params, query });
      return;
    }
    const def = route.def!;
    checkQuery(def, query);
    if (def.id === "getOpenApi") {
      send(req, res, { status: 200, text: openapiText, contentType: "application/json; charset=utf-8" });
      return;
    }
    const body = def.body?.kind === "json" ? await readJson(req, def.body.optional) : undefined;
    const reply = await HANDLERS[def.id]!(facade, { req, res, params, query, body });
    send(req, res, reply);
  };

  const server = http.createServer({ requestTimeout: 0, headersTimeout: 60_000, keepAliveTimeout: 5_000 }, (req, res) => {
    const started = performance.now();
    const where = `${req.method} ${(req.url ?? "").split("?")[0]}`;
    res.once("finish", () => log.debug("control.request", { request: where, status: res.statusCode, ms: Math.round(performance.now() - started) }));
    handle(req, res).catch((e: unknown) => sendError(req, res, e, where));
  });
  // Uploads may be long (video); an idle socket is dropped after two minutes.
  server.setTimeout(120_000);
  server.on("clientError", (err, socket) => {
    const code = (err as NodeJS.ErrnoException).code ?? "";
    if (socket.writable && code !== "ECONNRESET") {
      const tooLarge = code === "HPE_HEADER_OVERFLOW";
      const body = JSON.stringify({ error: { code: "ERR_BAD_REQUEST", message: tooLarge ? "request headers too large" : `malformed HTTP request: ${err.message}` } }) + "\n";
      socket.end(`HTTP/1.1 ${tooLarge ? "431 Request Header Fields Too Large" : "400 Bad Request"}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
    } else {
      socket.destroy();
    }
  });

  return {
    server,
    openapi,
    listen(port: number, host: string): Promise<AddressInfo> {
      return new Promise((resolve, reject) => {
        const onError = (e: Error) => reject(e);
        server.once("error", onError);
        server.listen(port, host, () => {
          server.off("error", onError);
          resolve(server.address() as AddressInfo);
        });
      });
    },
    close(graceMs = 2_000): Promise<void> {
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
    },
  };
}
