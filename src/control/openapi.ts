/**
 * The REST control API's route table and the OpenAPI 3.1 document built from it. The router in
 * api.ts dispatches on this same table, so the document cannot drift from what the server
 * answers: a route exists if and only if it is listed here. Pure.
 */
import { API_ERROR_STATUS } from "./apiErrors.js";
import { COLLECTION_NAME } from "../archive/collections.js";

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

const ref = (name: string): Json => ({ $ref: `#/components/schemas/${name}` });
const json = (schema: Json): Record<string, Json> => ({ "application/json": { schema } });

const STR = { type: "string" };
const WARCINFO_KEYS = ["operator", "description", "isPartOf", "robots", "httpHeaderUserAgent", "httpHeaderFrom"] as const;

const schemas: Record<string, Json> = {
  Error: {
    type: "object",
    description: "Every error answer. `field` names the input at fault (a JSON path such as `dedup.policy`, a query parameter, or a header) when there is one; `message` then starts with it.",
    required: ["error"],
    additionalProperties: false,
    properties: {
      error: {
        type: "object",
        required: ["code", "message"],
        additionalProperties: false,
        properties: {
          code: { type: "string", enum: Object.keys(API_ERROR_STATUS) },
          message: STR,
          field: STR,
        },
      },
    },
  },
  Warcinfo: {
    type: "object",
    description: "The collection's warcinfo fields (one line each; CR and LF are refused).",
    required: [...WARCINFO_KEYS, "extra"],
    properties: {
      ...Object.fromEntries(WARCINFO_KEYS.map((k) => [k, STR])),
      extra: { type: "object", description: "Further warcinfo fields: HTTP-token names, string values.", additionalProperties: STR },
    },
  },
  DedupBucket: {
    type: "object",
    required: ["name", "mode"],
    additionalProperties: false,
    properties: { name: { type: "string", pattern: "^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$" }, mode: { enum: ["rw", "ro"] } },
  },
  DedupPolicy: { enum: ["off", "digest", "url", "url-preferred"] },
  Collection: {
    type: "object",
    required: ["name", "prefix", "warcinfo", "dedup", "warcVersion", "gzip"],
    properties: {
      name: { type: "string", pattern: COLLECTION_NAME.source },
      prefix: { type: "string", description: "WARC file name prefix of the collection's series; unique among collections." },
      warcinfo: ref("Warcinfo"),
      dedup: {
        type: "object",
        required: ["policy", "buckets"],
        properties: { policy: ref("DedupPolicy"), buckets: { type: "array", items: ref("DedupBucket") } },
      },
      warcVersion: { enum: ["1.0", "1.1"] },
      gzip: { type: "boolean" },
    },
  },
  CollectionInput: {
    type: "object",
    description: "Fields to set; absent fields keep their value (on creation: the default collection's). Unknown fields → 400 naming them. A change starts a new WARC file so every warcinfo tells the truth.",
    additionalProperties: false,
    properties: {
      name: { type: "string", pattern: COLLECTION_NAME.source, description: "Required on creation; cannot be changed." },
      prefix: { type: "string", pattern: "^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$", description: "Defaults to the name on creation." },
      warcinfo: {
        type: "object",
        additionalProperties: false,
        properties: { ...Object.fromEntries(WARCINFO_KEYS.map((k) => [k, STR])), extra: { type: "object", additionalProperties: STR } },
      },
      dedup: {
        type: "object",
        additionalProperties: false,
        properties: { policy: ref("DedupPolicy"), buckets: { type: "array", minItems: 1, items: ref("DedupBucket") } },
      },
      warcVersion: { enum: ["1.0", "1.1"] },
      gzip: { type: "boolean" },
    },
  },
  CollectionCreate: { allOf: [ref("CollectionInput"), { required: ["name"] }] },
  CollectionList: { type: "object", required: ["collections"], properties: { collections: { type: "array", items: ref("Collection") } } },
  SessionOpen: {
    type: "object",
    additionalProperties: false,
    properties: {
      collection: { type: "string", description: "Defaults to `default`." },
      port: { type: "integer", minimum: 0, maximum: 65535, description: "The session's own proxy port on the proxy host; 0 or absent = ephemeral." },
    },
  },
  SessionSummary: {
    type: "object",
    required: ["id", "collection", "createdAt", "closedAt", "captures", "revisits", "failed", "skipped", "bytes", "files"],
    properties: {
      id: STR,
      collection: STR,
      createdAt: { type: "string", format: "date-time" },
      closedAt: { type: ["string", "null"], format: "date-time" },
      captures: { type: "integer", minimum: 0 },
      revisits: { type: "integer", minimum: 0 },
      failed: { type: "integer", minimum: 0 },
      skipped: { type: "integer", minimum: 0 },
      bytes: { type: "integer", minimum: 0, description: "WARC bytes written for the session's captures." },
      files: { type: "array", items: STR, description: "WARC files holding the session's records." },
    },
  },
  SessionInfo: {
    description: "A session and how to route traffic to it: its own proxy port (no credentials needed), or Basic `Proxy-Authorization` with `username`/`password` on the main proxy port.",
    allOf: [
      ref("SessionSummary"),
      {
        type: "object",
        required: ["proxy", "proxyUrl", "username"],
        properties: {
          proxy: { type: "object", required: ["host", "port"], properties: { host: STR, port: { type: "integer", minimum: 0, maximum: 65535 } } },
          proxyUrl: { type: "string", description: "`http://host:port` of the session's own proxy port." },
          username: STR,
          password: { type: "string", description: "Only in the answer that creates the session." },
        },
      },
    ],
  },
  SessionCreated: { allOf: [ref("SessionInfo"), { required: ["password"] }] },
  SessionList: { type: "object", required: ["sessions"], properties: { sessions: { type: "array", items: ref("SessionInfo") } } },
  WrittenResource: {
    type: "object",
    required: ["recordId", "filename", "offset", "length", "uri"],
    properties: {
      recordId: { type: "string", description: "WARC-Record-ID, `<urn:uuid:…>`." },
      filename: STR,
      offset: { type: "integer", minimum: 0 },
      length: { type: "integer", minimum: 0, description: "On-disk length of the record (compressed when gzipped)." },
      uri: { type: "string", description: "The record's WARC-Target-URI." },
    },
  },
  LatheContext: {
    type: "object",
    description: "How the resource was made (tls-and-resources.md B.2); written as the record's WARC-JSON-Metadata in this key order. Unknown keys outside `extra` → 400.",
    required: ["mode"],
    additionalProperties: false,
    properties: {
      kind: { enum: ["screenshot", "text", "pageinfo", "video", "annotation"] },
      variant: STR,
      mode: { enum: ["same-transaction", "parallel", "replay"] },
      capturedAt: { type: "string", format: "date-time" },
      browser: { type: "object", properties: { name: STR, version: STR, userAgent: STR } },
      viewport: { type: "object", properties: { width: { type: "number" }, height: { type: "number" }, deviceScaleFactor: { type: "number" } } },
      page: { type: "object", properties: { url: STR, recordId: { type: "string", description: "Link to this page record explicitly (WARC-Concurrent-To)." } } },
      tool: { type: "string", description: "Crawler name and version." },
      extra: { type: "object", description: "Passed through." },
    },
  },
  Status: { type: "object", description: "Status and statistics per collection, session and bucket.", additionalProperties: true },
  FleetInstance: {
    type: "object",
    required: ["id", "hostname", "pid", "proxy", "control", "version", "startedAt", "heartbeatAt", "load"],
    properties: {
      id: { type: "string", description: "shared.instanceId, or `<hostname>:<proxy port>`." },
      hostname: STR,
      pid: { type: "integer", minimum: 1 },
      proxy: { type: "string", description: "`host:port` of its proxy: point the crawler here." },
      control: { type: ["string", "null"], description: "`http://host:port` of its control API, or null when that is off." },
      version: STR,
      startedAt: { type: "string", format: "date-time" },
      heartbeatAt: { type: "string", format: "date-time", description: "Its last heartbeat (the database server's clock)." },
      load: {
        type: "object",
        required: ["inFlight", "capturesPerSec"],
        properties: { inFlight: { type: "integer", minimum: 0, description: "Exchanges in flight." }, capturesPerSec: { type: "number", minimum: 0, description: "Over its last heartbeat interval." } },
      },
    },
  },
  Fleet: {
    type: "object",
    required: ["shared", "instances"],
    properties: {
      shared: { type: "boolean", description: "false: no shared.postgresql; the fleet is this instance." },
      store: { type: "string", description: "`PostgreSQL host:port/db`, when shared." },
      instances: { type: "array", items: ref("FleetInstance"), description: "Live instances, least loaded first (in flight, then captures per second)." },
    },
  },
  ApiIndex: {
    type: "object",
    description: "Every operation of /openapi.json, in its order, and a link to the document.",
    required: ["title", "version", "openapi", "routes"],
    additionalProperties: false,
    properties: {
      title: STR,
      version: STR,
      openapi: { type: "string", const: "/openapi.json" },
      routes: {
        type: "array",
        items: {
          type: "object",
          required: ["method", "path", "summary"],
          additionalProperties: false,
          properties: { method: { enum: ["GET", "POST", "PATCH", "DELETE"] }, path: STR, summary: STR },
        },
      },
    },
  },
};

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
  413: `JSON body larger than ${JSON_BODY_LIMIT} bytes.`,
  415: "Request body is not application/json.",
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
    tags: [{ name: "collections" }, { name: "sessions" }, { name: "resources" }, { name: "status" }],
    paths,
    components: {
      schemas,
      ...(opts.tokenConfigured ? { securitySchemes: { bearerAuth: { type: "http", scheme: "bearer", description: "control.token or LATHE_CONTROL_TOKEN" } } } : {}),
    },
  };
  if (opts.tokenConfigured) doc.security = [{ bearerAuth: [] }];
  return doc;
}
