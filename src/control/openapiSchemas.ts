/**
 * The schemas of the control API's OpenAPI document (`components.schemas`), and the helpers the
 * route table (openapi.ts) uses to point at them. Pure.
 */
import { API_ERROR_STATUS } from "./apiErrors.js";
import { COLLECTION_NAME } from "../archive/collections.js";

type Json = Record<string, unknown>;

export const ref = (name: string): Json => ({ $ref: `#/components/schemas/${name}` });
export const json = (schema: Json): Record<string, Json> => ({ "application/json": { schema } });

export const STR = { type: "string" };
const INT = { type: "integer", minimum: 0 };
const WARCINFO_KEYS = ["operator", "description", "isPartOf", "robots", "httpHeaderUserAgent", "httpHeaderFrom"] as const;

export const schemas: Record<string, Json> = {
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
  Politeness: politenessSchema(true),
  PolitenessInput: politenessSchema(false),
  PolitenessState: {
    type: "object",
    description: "Per-host gates of this instance (not coordinated across a fleet's instances), the busiest 100 hosts first; refusals by rule; each collection's policy.",
    required: ["hosts", "hostsKnown", "active", "queued", "backingOff", "robotsCached", "refused", "embedsExempted", "robotsFetches", "coordinated", "policies"],
    properties: {
      hosts: {
        type: "array",
        items: {
          type: "object",
          properties: {
            host: STR,
            active: INT,
            queued: INT,
            delayMs: { type: "number", description: "The gap the next request keeps after the last one ended." },
            crawlDelayMs: INT,
            backoffMs: { type: "number", description: "ms until the back-off after a 5xx or 429 ends; 0 = none." },
            consecutiveFailures: INT,
            lastStatus: { type: ["integer", "null"] },
            requests: INT,
          },
        },
      },
      refused: { type: "object", properties: { robots: INT, userAgent: INT, queueFull: INT, maxWait: INT } },
      coordinated: { const: false },
      policies: { type: "object", additionalProperties: ref("Politeness") },
    },
    additionalProperties: true,
  },
  Collection: {
    type: "object",
    required: ["name", "prefix", "warcinfo", "dedup", "warcVersion", "compression", "gzip", "politeness"],
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
      compression: ref("Compression"),
      gzip: { type: "boolean", description: "compression is not none (the older switch)." },
      politeness: ref("Politeness"),
    },
  },
  Compression: { enum: ["gzip", "none", "hybrid"], description: "`.warc.gz`; `.warc`; or hybrid: already-compressed payloads (images, video, audio, WOFF, archives, PDF, gzip/br/zstd-encoded bodies) of 64 KiB or more to a `.warc` series beside the `.warc.gz` one." },
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
      compression: ref("Compression"),
      gzip: { type: "boolean", description: "Alias of compression: true = gzip, false = none; must agree with compression when both are sent." },
      politeness: ref("PolitenessInput"),
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

/** A collection's politeness policy (issue #27); `complete`: as answered (every key), else as sent (any subset). */
function politenessSchema(complete: boolean): Record<string, unknown> {
  const ms = (max: number, description: string) => ({ type: "integer", minimum: 0, maximum: max, description });
  const properties = {
    enabled: { type: "boolean", description: "Off: requests go upstream at once, untouched. Off by default; `lathe record` sessions are never held back." },
    maxConcurrentPerHost: { type: "integer", minimum: 1, maximum: 1000, description: "Requests to one host name (lower-cased, no port) at once." },
    delayMs: ms(3_600_000, "The minimum gap between the end of one request to a host and the start of the next."),
    delayFactor: { type: "number", minimum: 0, maximum: 1000, description: "The gap is this × the last fetch's duration when that is larger." },
    maxDelayMs: ms(3_600_000, "Caps the gap, including a robots.txt Crawl-delay."),
    maxWaitMs: ms(3_600_000, "How long a request may wait for its turn; then 503 with Retry-After."),
    maxQueuePerHost: ms(1_000_000, "Requests that may wait for one host; the next gets 503 with Retry-After at once."),
    backoffMs: ms(86_400_000, "The first back-off after a 5xx or 429 without Retry-After; doubles while they continue."),
    maxBackoffMs: ms(86_400_000, "No back-off (nor a Retry-After honoured) lasts longer."),
    robots: { enum: ["ignore", "obey", "obey-except-embeds"], description: "obey-except-embeds: page requisites (Sec-Fetch-Dest image, style, script, font…; else Accept image/* or text/css) go ahead." },
    userAgent: {
      type: "object",
      additionalProperties: false,
      ...(complete ? { required: ["requireContact", "suffix"] } : {}),
      properties: {
        requireContact: { type: "boolean", description: "403 unless the User-Agent (after the suffix) names a URL or an e-mail address." },
        suffix: { type: "string", pattern: "^[\\x20-\\x7e]*$", description: "Appended to the User-Agent (once); the request record holds what was sent." },
      },
    },
  };
  return { type: "object", additionalProperties: false, ...(complete ? { required: Object.keys(properties) } : {}), properties };
}
