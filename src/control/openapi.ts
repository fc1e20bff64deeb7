/**
 * The REST control API's route table and the OpenAPI 3.1 document built from it. The router in
 * api.ts dispatches on this same table, so the document cannot drift from what the server
 * answers: a route exists if and only if it is listed here. Pure.
 */
import { json, ref, schemas, STR } from "./openapiSchemas.js";

export type HttpMethod = "GET" | "POST" | "PATCH" | "DELETE";

type Json = Record<string, unknown>;

export interface QueryParam {
  name: string;
  required: boolean;
  description: string;
  schema: Json;
}

export type RouteBody =
  /** `application/json`, at most JSON_BODY_LIMIT bytes; `optional`: no body means `{}`. */
  | { kind: "json"; schema: Json; optional: boolean; description: string }
  /** Any media type, streamed to the facade as it arrives. */
  | { kind: "raw"; description: string };

export interface RouteResponse {
  description: string;
  /** media type → schema (JSON schema, or {} for opaque text) */
  content?: Record<string, Json>;
  headers?: Record<string, Json>;
}

export interface RouteDef {
  /** The OpenAPI operationId and the key of its handler in api.ts. */
  id: string;
  method: HttpMethod;
  /** OpenAPI path template (`{name}` segments match one percent-decoded path segment). */
  path: string;
  summary: string;
  description?: string;
  tags: string[];
  /** When a token is configured, this route requires it. */
  auth: boolean;
  pathParams?: Array<{ name: string; description: string; schema: Json }>;
  query?: QueryParam[];
  headers?: Array<{ name: string; required: boolean; description: string; schema?: Json; content?: Record<string, Json> }>;
  body?: RouteBody;
  /** Success answers. */
  responses: Record<number, RouteResponse>;
  /** Error statuses this route can answer besides those every route can (400, 403, 500, and 401 with a token). */
  errors: number[];
}

/** JSON request bodies above this many bytes get 413. */
export const JSON_BODY_LIMIT = 1024 * 1024;


/** The index the start-up banner points to (`/api/v1/`); `/api/v1` answers the same. */
function apiIndexRoute(id: string, path: string): RouteDef {
  return {
    id,
    method: "GET",
    path,
    summary: path.endsWith("/") ? "The routes of this API" : "The routes of this API (as /api/v1/)",
    description: "Method, path and summary of every operation in /openapi.json, and a link to it.",
    tags: ["status"],
    auth: true,
    responses: { 200: { description: "The routes.", content: json(ref("ApiIndex")) } },
    errors: [],
  };
}

const NAME_PARAM = { name: "name", description: "Collection name.", schema: STR };

/** `GET …/wacz`: a WACZ streamed with its length; made before the answer starts, so every failure is an error answer. */
function waczRoute(id: string, path: string, summary: string, description: string, param: NonNullable<RouteDef["pathParams"]>[number]): RouteDef {
  return {
    id,
    method: "GET",
    path,
    summary,
    description:
      description +
      " The WACZ (1.1.1) holds the WARC files as they are (stored), lathe's CDXJ index of them (compressed: `indexes/index.cdx.gz` and `index.idx`), `pages/pages.jsonl` and `datapackage.json` with every file's SHA-256. It is indexed before the answer starts (which takes a while for a large collection); then it streams, memory flat whatever its size.",
    tags: ["wacz"],
    auth: true,
    pathParams: [param],
    responses: {
      200: {
        description: "The WACZ (`application/wacz`), as an attachment.",
        content: { "application/wacz": { schema: { type: "string", contentMediaType: "application/wacz" } } },
        headers: { "Content-Length": { schema: { type: "integer", minimum: 0 } }, "Content-Disposition": { schema: STR } },
      },
    },
    errors: [404, 409, 422],
  };
}
const ID_PARAM = { name: "id", description: "Session id (also its proxy username).", schema: STR };

/** The routes, in document order. */
export const ROUTES: readonly RouteDef[] = [
  apiIndexRoute("getApiIndex", "/api/v1/"),
  apiIndexRoute("getApiIndexWithoutSlash", "/api/v1"),
  {
    id: "listCollections",
    method: "GET",
    path: "/api/v1/collections",
    summary: "List collections",
    tags: ["collections"],
    auth: true,
    responses: { 200: { description: "All collections, by name.", content: json(ref("CollectionList")) } },
    errors: [],
  },
  {
    id: "createCollection",
    method: "POST",
    path: "/api/v1/collections",
    summary: "Create a collection",
    tags: ["collections"],
    auth: true,
    body: { kind: "json", schema: ref("CollectionCreate"), optional: false, description: "The new collection." },
    responses: { 201: { description: "Created.", content: json(ref("Collection")), headers: { Location: { schema: STR } } } },
    errors: [413, 415],
  },
  {
    id: "getCollection",
    method: "GET",
    path: "/api/v1/collections/{name}",
    summary: "Read a collection",
    tags: ["collections"],
    auth: true,
    pathParams: [NAME_PARAM],
    responses: { 200: { description: "The collection.", content: json(ref("Collection")) } },
    errors: [404],
  },
  {
    id: "updateCollection",
    method: "PATCH",
    path: "/api/v1/collections/{name}",
    summary: "Change a collection",
    description: "Merges the given fields; a change of metadata closes the collection's current WARC file so the next one starts with a truthful warcinfo.",
    tags: ["collections"],
    auth: true,
    pathParams: [NAME_PARAM],
    body: { kind: "json", schema: ref("CollectionInput"), optional: false, description: "Fields to change." },
    responses: { 200: { description: "The collection as it is now.", content: json(ref("Collection")) } },
    errors: [404, 413, 415, 503],
  },
  {
    id: "deleteCollection",
    method: "DELETE",
    path: "/api/v1/collections/{name}",
    summary: "Delete a collection",
    description: "Its WARC files stay. `default` cannot be deleted, nor a collection with open sessions (400).",
    tags: ["collections"],
    auth: true,
    pathParams: [NAME_PARAM],
    responses: { 204: { description: "Deleted." } },
    errors: [404, 503],
  },
  waczRoute(
    "getCollectionWacz",
    "/api/v1/collections/{name}/wacz",
    "A collection as a WACZ",
    "Its closed WARC files (`.open` files still being written are left out; 409 when none is closed yet). Pages: those a crawler declared (screenshots, page info), else the top-level navigations to `text/html` 200 answers, else every `text/html` 200 answer.",
    NAME_PARAM,
  ),
  {
    id: "openSession",
    method: "POST",
    path: "/api/v1/sessions",
    summary: "Open a recording session",
    tags: ["sessions"],
    auth: true,
    body: { kind: "json", schema: ref("SessionOpen"), optional: true, description: "No body = `{}`: the default collection on an ephemeral port." },
    responses: { 201: { description: "Opened; `password` is given only here.", content: json(ref("SessionCreated")), headers: { Location: { schema: STR } } } },
    errors: [404, 413, 415, 503],
  },
  {
    id: "listSessions",
    method: "GET",
    path: "/api/v1/sessions",
    summary: "List open sessions",
    tags: ["sessions"],
    auth: true,
    responses: { 200: { description: "Open sessions.", content: json(ref("SessionList")) } },
    errors: [],
  },
  {
    id: "getSession",
    method: "GET",
    path: "/api/v1/sessions/{id}",
    summary: "Read a session",
    tags: ["sessions"],
    auth: true,
    pathParams: [ID_PARAM],
    responses: { 200: { description: "The session with its counts so far.", content: json(ref("SessionInfo")) } },
    errors: [404],
  },
  {
    id: "closeSession",
    method: "POST",
    path: "/api/v1/sessions/{id}/close",
    summary: "Close a session",
    description: "Waits for its captures in flight, closes its port and its collection's current files (so its records are in closed, indexed files) and answers its summary. No request body.",
    tags: ["sessions"],
    auth: true,
    pathParams: [ID_PARAM],
    responses: { 200: { description: "The session's summary.", content: json(ref("SessionSummary")) } },
    errors: [404, 503],
  },
  waczRoute(
    "getSessionWacz",
    "/api/v1/sessions/{id}/wacz",
    "A closed session as a WACZ",
    "The WARC files holding its records (whole: other captures of its collection written at the same time are in them too); pages captured while it was open. A session still open → 409 (close it first); sessions are remembered across restarts.",
    ID_PARAM,
  ),
  {
    id: "writeResource",
    method: "POST",
    path: "/api/v1/resources",
    summary: "Write an associated resource",
    description:
      "The body is the resource's bytes (streamed; any size), its Content-Type the record's. Name it either by `uri` (any non-http(s) URI, e.g. `urn:view:https://example.com/`) or by `kind` and `page` (→ `urn:<kind>:<page>`). The record is linked to the page's capture as tls-and-resources.md B.2 says.",
    tags: ["resources"],
    auth: true,
    query: [
      { name: "collection", required: false, description: "Collection to write into; defaults to `default`.", schema: STR },
      { name: "uri", required: false, description: "The record's WARC-Target-URI (not http/https). Exclusive with kind/page.", schema: STR },
      { name: "kind", required: false, description: "`view`, `thumbnail`, `fullPage`, `fullPageFinal`, `text`, `textFinal`, `pageinfo`, `video:NNNNN`, `annotation:<id>` or any `[A-Za-z][A-Za-z0-9-]{0,31}`; with `page`.", schema: STR },
      { name: "page", required: false, description: "The page's URL; with `kind`.", schema: STR },
    ],
    headers: [
      { name: "Content-Type", required: true, description: "The resource's media type (written as the record's Content-Type).", schema: STR },
      { name: "Lathe-Context", required: false, description: "JSON: how the resource was made. Invalid JSON → 400 naming Lathe-Context. Non-ASCII text is read as UTF-8.", content: json(ref("LatheContext")) },
    ],
    body: { kind: "raw", description: "The resource's bytes, verbatim." },
    responses: { 201: { description: "Written and on disk.", content: json(ref("WrittenResource")) } },
    errors: [404, 503],
  },
  {
    id: "getStatus",
    method: "GET",
    path: "/api/v1/status",
    summary: "Status and statistics",
    tags: ["status"],
    auth: true,
    responses: { 200: { description: "Status per collection, session and bucket.", content: json(ref("Status")) } },
    errors: [],
  },
  {
    id: "getPoliteness",
    method: "GET",
    path: "/api/v1/politeness",
    summary: "Politeness state per host",
    description: "Requests at and waiting for each host, its current gap and back-off, robots.txt copies, refusals by rule, and each collection's politeness policy (issue #27). State is this instance's: a fleet's instances do not coordinate their hosts.",
    tags: ["status"],
    auth: true,
    responses: { 200: { description: "The busiest 100 hosts first, and totals over all.", content: json(ref("PolitenessState")) } },
    errors: [],
  },
  {
    id: "getFleet",
    method: "GET",
    path: "/api/v1/fleet",
    summary: "The live instances of the fleet",
    description: "The instances sharing this one's PostgreSQL store (shared.postgresql), least loaded first: a crawler can take the first. An instance is listed from its first heartbeat until it stops or misses 3. Without PostgreSQL, this instance alone (`shared: false`). 503 while the store is unreachable.",
    tags: ["status"],
    auth: true,
    responses: { 200: { description: "The live instances.", content: json(ref("Fleet")) } },
    errors: [503],
  },
  {
    id: "getMetrics",
    method: "GET",
    path: "/metrics",
    summary: "Prometheus metrics",
    tags: ["status"],
    auth: true,
    responses: { 200: { description: "Text exposition format 0.0.4.", content: { "text/plain; version=0.0.4": { schema: STR } } } },
    errors: [],
  },
  {
    id: "getCaPem",
    method: "GET",
    path: "/ca.pem",
    summary: "The CA certificate (PEM)",
    description: "What clients must trust for HTTPS through lathe. Public: no token needed.",
    tags: ["status"],
    auth: false,
    responses: { 200: { description: "The certificate.", content: { "application/x-pem-file": { schema: STR } } } },
    errors: [],
  },
  {
    id: "getOpenApi",
    method: "GET",
    path: "/openapi.json",
    summary: "This document",
    description: "Public: no token needed.",
    tags: ["status"],
    auth: false,
    responses: { 200: { description: "OpenAPI 3.1 document.", content: json({ type: "object" }) } },
    errors: [],
  },
];

/** A route added by the caller (e.g. `/cdx`, the live page `/`), documented like the others. */
export interface ExtraRouteDoc {
  method: HttpMethod;
  path: string;
  auth: boolean;
  /** The OpenAPI operation object (operationId, summary, parameters, responses…); security and common errors are added. */
  operation: Json;
}

const STATUS_TEXT: Record<number, string> = {
  400: "Bad input: invalid JSON, an unknown or ill-typed field, an unknown query parameter; `field` names it.",
  401: "Missing or wrong bearer token.",
  403: "Refused: a cross-site browser request, or an operation the server denies.",
  404: "No such collection or session.",
  409: "Not possible in the present state: e.g. a session still open, or no closed WARC file yet.",
  413: `JSON body larger than ${JSON_BODY_LIMIT} bytes.`,
  415: "Request body is not application/json.",
  422: "A WARC file to package is damaged or is not a WARC; the message names the file and offset.",
  500: "Internal error.",
  503: "WARC files cannot be written, or the shared store is unreachable, right now; retry later.",
};

function errorResponse(status: number): Json {
  const r: Json = { description: STATUS_TEXT[status] ?? "Error.", content: json(ref("Error")) };
  if (status === 401) r.headers = { "WWW-Authenticate": { schema: { type: "string", const: "Bearer" } } };
  if (status === 503) r.headers = { "Retry-After": { schema: STR } };
  return r;
}

/** Error statuses a route may answer with, given whether a token is configured. */
export function errorStatuses(route: Pick<RouteDef, "auth" | "errors">, tokenConfigured: boolean): number[] {
  const out = new Set([400, 403, 500, ...route.errors]);
  if (route.auth && tokenConfigured) out.add(401);
  return [...out].sort((a, b) => a - b);
}

function operationOf(r: RouteDef, tokenConfigured: boolean): Json {
  const parameters: Json[] = [];
  for (const p of r.pathParams ?? []) parameters.push({ name: p.name, in: "path", required: true, description: p.description, schema: p.schema });
  for (const q of r.query ?? []) parameters.push({ name: q.name, in: "query", required: q.required, description: q.description, schema: q.schema });
  for (const h of r.headers ?? []) {
    if (h.name.toLowerCase() === "content-type") continue; // OpenAPI: described by requestBody
    parameters.push({ name: h.name, in: "header", required: h.required, description: h.description, ...(h.schema ? { schema: h.schema } : {}), ...(h.content ? { content: h.content } : {}) });
  }
  const responses: Json = {};
  for (const [status, resp] of Object.entries(r.responses)) {
    responses[status] = { description: resp.description, ...(resp.content ? { content: resp.content } : {}), ...(resp.headers ? { headers: resp.headers } : {}) };
  }
  for (const s of errorStatuses(r, tokenConfigured)) responses[String(s)] = errorResponse(s);
  const op: Json = { operationId: r.id, summary: r.summary, tags: r.tags };
  if (r.description) op.description = r.description;
  if (parameters.length) op.parameters = parameters;
  if (r.body?.kind === "json") {
    op.requestBody = { required: !r.body.optional, description: r.body.description, content: json(r.body.schema) };
  } else if (r.body?.kind === "raw") {
    op.requestBody = { required: true, description: r.body.description, content: { "*/*": {} } };
  }
  op.responses = responses;
  if (tokenConfigured && !r.auth) op.security = [];
  return op;
}

export interface OpenApiOptions {
  version: string;
  /** Whether a bearer token is configured: the document then declares the scheme and the 401s. */
  tokenConfigured: boolean;
  extra?: readonly ExtraRouteDoc[];
}

export function buildOpenApi(opts: OpenApiOptions): Json {
  const paths: Record<string, Json> = {};
  const add = (path: string, method: HttpMethod, op: Json) => {
    const item = (paths[path] ??= {});
    const m = method.toLowerCase();
    if (item[m]) throw new Error(`route ${method} ${path} is defined twice`);
    item[m] = op;
  };
  for (const r of ROUTES) add(r.path, r.method, operationOf(r, opts.tokenConfigured));
  for (const x of opts.extra ?? []) {
    const responses: Json = { ...((x.operation.responses as Json | undefined) ?? {}) };
    for (const s of errorStatuses({ auth: x.auth, errors: [] }, opts.tokenConfigured)) responses[String(s)] ??= errorResponse(s);
    add(x.path, x.method, { ...x.operation, responses, ...(opts.tokenConfigured && !x.auth ? { security: [] } : {}) });
  }
  const doc: Json = {
    openapi: "3.1.0",
    info: {
      title: "lathe control API",
      version: opts.version,
      description:
        "Collections, recording sessions, associated resources, status and metrics of a lathe recording proxy. JSON over HTTP; every error is `{\"error\": {\"code\", \"message\"}}`. " +
        (opts.tokenConfigured
          ? "A bearer token is configured: send `Authorization: Bearer <token>` on every route except `/ca.pem` and `/openapi.json`."
          : "No token is configured (loopback only): routes need no credentials. Cross-site browser requests are refused.") +
        " An unknown route answers 404, a known path with another method 405 with `Allow`.",
      license: { name: "Apache-2.0", identifier: "Apache-2.0" },
    },
    tags: [{ name: "collections" }, { name: "sessions" }, { name: "wacz" }, { name: "resources" }, { name: "status" }],
    paths,
    components: {
      schemas,
      ...(opts.tokenConfigured ? { securitySchemes: { bearerAuth: { type: "http", scheme: "bearer", description: "control.token or LATHE_CONTROL_TOKEN" } } } : {}),
    },
  };
  if (opts.tokenConfigured) doc.security = [{ bearerAuth: [] }];
  return doc;
}
