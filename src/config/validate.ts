import { ProxyError } from "../core/errors.js";
import { type Config, type ConfigInput, DEFAULTS } from "./schema.js";
import { parseCidr } from "../core/cidr.js";
import { POLITENESS_DEFAULTS, applyPoliteness } from "./politeness.js";

const TEMPLATE_FIELDS = new Set([
  "prefix", "timestamp17", "timestamp14", "serial", "hostname", "shorthostname", "pid", "port", "randomtoken",
]);

/** Safe as part of a file name: no path separators, no leading dot, no control characters. */
export const SAFE_PREFIX = /^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/;

type Rule = (v: unknown, path: string) => void;

const fail = (path: string, why: string): never => {
  throw new ProxyError("ERR_CONFIG", `config ${path}: ${why}`);
};
const int = (min: number, max = Number.MAX_SAFE_INTEGER): Rule => (v, p) => {
  if (typeof v !== "number" || !Number.isInteger(v) || v < min || v > max) {
    fail(p, `must be an integer between ${min} and ${max}, got ${JSON.stringify(v)}`);
  }
};
const bool: Rule = (v, p) => {
  if (typeof v !== "boolean") fail(p, `must be true or false, got ${JSON.stringify(v)}`);
};
const str: Rule = (v, p) => {
  if (typeof v !== "string") fail(p, `must be a string, got ${JSON.stringify(v)}`);
  if (/[\r\n]/.test(v as string)) fail(p, "must not contain CR or LF");
};
const nonEmpty: Rule = (v, p) => {
  str(v, p);
  if (v === "") fail(p, "must not be empty");
};
const oneOf = (...allowed: string[]): Rule => (v, p) => {
  if (typeof v !== "string" || !allowed.includes(v)) {
    fail(p, `must be one of ${allowed.map((a) => JSON.stringify(a)).join(", ")}, got ${JSON.stringify(v)}`);
  }
};
const nullableStr: Rule = (v, p) => {
  if (v !== null) nonEmpty(v, p);
};
const strList: Rule = (v, p) => {
  if (!Array.isArray(v)) fail(p, "must be an array of strings");
  (v as unknown[]).forEach((x, i) => nonEmpty(x, `${p}[${i}]`));
};
const cidrList: Rule = (v, p) => {
  if (!Array.isArray(v)) fail(p, 'must be an array of addresses or CIDR blocks, e.g. ["10.0.0.0/8", "::1/128"]');
  (v as unknown[]).forEach((x, i) => {
    if (typeof x !== "string" || !parseCidr(x)) fail(`${p}[${i}]`, `must be an IP address or CIDR block such as "192.168.0.0/16", got ${JSON.stringify(x)}`);
  });
};
const fieldMap: Rule = (v, p) => {
  if (!v || typeof v !== "object" || Array.isArray(v)) fail(p, "must be an object of name: value strings");
  for (const [k, x] of Object.entries(v as object)) {
    if (!/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(k)) fail(`${p}.${k}`, "field name must be an HTTP token");
    str(x, `${p}.${k}`);
  }
};
const prefix: Rule = (v, p) => {
  if (typeof v !== "string" || !SAFE_PREFIX.test(v)) {
    fail(p, `must be a safe file name part (letters, digits, '.', '_', '-'; not starting with '.' or '-'), got ${JSON.stringify(v)}`);
  }
};
const template: Rule = (v, p) => {
  nonEmpty(v, p);
  const s = v as string;
  if (/[/\\]/.test(s)) fail(p, "must not contain a path separator");
  const names = [...s.matchAll(/\{([^}]*)\}/g)].map((m) => m[1]!);
  for (const n of names) if (!TEMPLATE_FIELDS.has(n)) fail(p, `unknown field {${n}}; known: ${[...TEMPLATE_FIELDS].map((f) => `{${f}}`).join(" ")}`);
  if (!names.includes("serial")) fail(p, "must contain {serial}, so that file names never collide");
};

const BUCKET_NAME = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;
const buckets: Rule = (v, p) => {
  if (!Array.isArray(v) || v.length === 0) fail(p, 'must be a non-empty array of {"name": ..., "mode": "rw" | "ro"}');
  const seen = new Set<string>();
  (v as unknown[]).forEach((b, i) => {
    const bp = `${p}[${i}]`;
    if (!b || typeof b !== "object" || Array.isArray(b)) fail(bp, 'must be {"name": ..., "mode": "rw" | "ro"}');
    const { name, mode, ...rest } = b as Record<string, unknown>;
    if (Object.keys(rest).length) fail(`${bp}.${Object.keys(rest)[0]}`, "unknown key; known: name, mode");
    if (typeof name !== "string" || !BUCKET_NAME.test(name)) fail(`${bp}.name`, `must match ${BUCKET_NAME}, got ${JSON.stringify(name)}`);
    if (mode !== "rw" && mode !== "ro") fail(`${bp}.mode`, `must be "rw" or "ro", got ${JSON.stringify(mode)}`);
    if (seen.has(name as string)) fail(`${bp}.name`, `bucket ${JSON.stringify(name)} is listed twice`);
    seen.add(name as string);
  });
};
const minBytes: Rule = (v, p) => {
  if (!v || typeof v !== "object" || Array.isArray(v)) fail(p, 'must be {"text": N, "binary": N}');
  const { text, binary, ...rest } = v as Record<string, unknown>;
  if (Object.keys(rest).length) fail(`${p}.${Object.keys(rest)[0]}`, "unknown key; known: text, binary");
  int(1)(text, `${p}.text`);
  int(1)(binary, `${p}.binary`);
};
const statuses: Rule = (v, p) => {
  if (!Array.isArray(v) || v.length === 0) fail(p, 'must be a non-empty array such as ["2xx"] or ["200", "203"]');
  (v as unknown[]).forEach((x, i) => {
    if (typeof x !== "string" || !/^[1-5](\d\d|xx)$/.test(x)) fail(`${p}[${i}]`, `must be a status code ("200") or class ("2xx"), got ${JSON.stringify(x)}`);
  });
};

/** One key of the politeness section, checked by the rules collections use too. */
const politenessKey = (key: string): Rule => (v, p) => {
  if (key === "userAgent" && (!v || typeof v !== "object" || !("requireContact" in v) || !("suffix" in v))) fail(p, 'must be {"requireContact": bool, "suffix": string}');
  applyPoliteness(POLITENESS_DEFAULTS, { [key]: v }, p.slice(0, p.lastIndexOf(".")), fail);
};
const politenessRules = Object.fromEntries(Object.keys(POLITENESS_DEFAULTS).map((k) => [k, politenessKey(k)])) as { [K in keyof Config["politeness"]]: Rule };

const RULES: { [S in keyof Config]: { [K in keyof Config[S]]: Rule } } = {
  proxy: {
    host: nonEmpty,
    port: int(0, 65535),
    maxHeaderBytes: int(1024),
    headersTimeoutMs: int(1),
    keepAliveTimeoutMs: int(1),
    tlsHandshakeTimeoutMs: int(1),
    auth: oneOf("optional", "required"),
    defaultUser: nullableStr,
    defaultPassword: nullableStr,
    allowClients: cidrList,
    http2: bool,
  },
  upstream: {
    connectTimeoutMs: int(1),
    headTimeoutMs: int(1),
    idleTimeoutMs: int(1),
    rejectInvalidCerts: bool,
    caFile: nullableStr,
    maxHeaderBytes: int(1024),
    lenientParsing: bool,
    allowHosts: strList,
    denyHosts: strList,
    maxSocketsPerHost: int(1),
    denyAddresses: cidrList,
    http2: bool,
  },
  capture: {
    spoolMemoryBytes: int(0),
    spoolDir: nullableStr,
    maxBodyBytes: int(0),
    maxDurationMs: int(0),
    retryMaxBytes: int(0),
    retryMaxMs: int(0),
  },
  warc: {
    dir: nonEmpty,
    prefix,
    filenameTemplate: template,
    version: oneOf("1.0", "1.1"),
    compression: oneOf("gzip", "none", "hybrid"),
    gzip: bool,
    hybridMinPayloadBytes: int(0),
    gzipLevel: int(0, 9),
    gzipSkipLength: bool,
    maxFileBytes: int(1024),
    idleRolloverMs: int(0),
    digest: oneOf("sha1", "sha256"),
    chunked: oneOf("dechunk", "wire-exact"),
    durability: oneOf("rollover", "strict"),
  },
  warcinfo: {
    operator: str,
    description: str,
    isPartOf: str,
    robots: str,
    httpHeaderUserAgent: str,
    httpHeaderFrom: str,
    extra: fieldMap,
  },
  certs: {
    dir: nonEmpty,
    leafCacheSize: int(1),
  },
  control: {
    host: nonEmpty,
    port: int(-1, 65535),
    token: nullableStr,
  },
  dedup: {
    policy: oneOf("off", "digest", "url", "url-preferred"),
    dbPath: nullableStr,
    buckets,
    minBytes,
    statuses,
    inflightWaitMs: int(0),
    serverNotModified: bool,
  },
  log: {
    level: oneOf("debug", "info", "warn", "error"),
    json: bool,
    crawlLogDir: (v, p) => {
      if (v !== null) str(v, p);
    },
  },
  shared: {
    postgresql: nullableStr,
    instanceId: nullableStr,
    heartbeatMs: int(100, 3_600_000),
    outboxMaxBytes: int(0),
  },
  politeness: politenessRules,
};

/**
 * Merge layers over the defaults (later layers win) and validate every key.
 * Unknown keys are errors: a typo must not silently fall back to a default.
 */
export function resolveConfig(...layers: unknown[]): Config {
  const out = structuredClone(DEFAULTS) as unknown as Record<string, Record<string, unknown>>;
  for (const layer of layers) {
    if (layer === undefined) continue;
    if (!layer || typeof layer !== "object" || Array.isArray(layer)) fail("(root)", "must be a JSON object");
    for (const [section, values] of Object.entries(layer as Record<string, unknown>)) {
      if (section === "$comment") continue;
      const rules = (RULES as Record<string, Record<string, Rule>>)[section];
      if (!rules) fail(section, `unknown section; known: ${Object.keys(RULES).join(", ")}`);
      if (!values || typeof values !== "object" || Array.isArray(values)) fail(section, "must be an object");
      for (const [key, v] of Object.entries(values as Record<string, unknown>)) {
        if (key === "$comment") continue;
        const rule = rules![key];
        if (!rule) fail(`${section}.${key}`, `unknown key; known in ${section}: ${Object.keys(rules!).join(", ")}`);
        rule!(v, `${section}.${key}`);
        out[section]![key] = v;
      }
      if (section === "warc") compressionAlias(values as Record<string, unknown>, out.warc!);
    }
  }
  out.warc!.gzip = out.warc!.compression !== "none";
  return out as unknown as Config;
}

/**
 * `warc.gzip` is the older switch: a layer that sets only it sets `compression` (true = gzip,
 * false = none); one that sets both must make them agree.
 */
function compressionAlias(layer: Record<string, unknown>, warc: Record<string, unknown>): void {
  if (layer.gzip === undefined) return;
  if (layer.compression === undefined) warc.compression = layer.gzip ? "gzip" : "none";
  else if ((layer.compression === "none") === layer.gzip) fail("warc.gzip", `contradicts warc.compression ${JSON.stringify(layer.compression)} (gzip is its older alias: true = "gzip", false = "none")`);
}

/** Is `host` (a listening address) reachable from this machine only? */
export function isLoopbackHost(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, "").toLowerCase();
  return /^127\.\d+\.\d+\.\d+$/.test(h) || /^::ffff:127\./.test(h) || h === "::1" || h === "localhost";
}

/**
 * lathe is not an open proxy (README "Security"): on an address other hosts can reach, every
 * client must authenticate (`proxy.auth: "required"`) or come from `proxy.allowClients`.
 */
export function assertNotOpenProxy(config: Config): void {
  const p = config.proxy;
  if (isLoopbackHost(p.host) || p.auth === "required" || p.allowClients.length > 0) return;
  throw new ProxyError(
    "ERR_CONFIG",
    `proxy.host ${p.host} is not a loopback address, so lathe would be an open proxy: set proxy.auth to "required" (clients authenticate with Proxy-Authorization; set proxy.defaultUser/defaultPassword for the default collection) or list the clients allowed in proxy.allowClients (CIDR blocks, e.g. ["192.168.1.0/24"]), or bind to 127.0.0.1`,
  );
}

export type { ConfigInput };
