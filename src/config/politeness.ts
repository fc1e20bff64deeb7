/**
 * The politeness policy of a collection (issue #27): its shape, its defaults and its validation.
 * It lives here rather than in politeness/ because both the configuration (the default
 * collection's policy) and archive/ (every other collection's) check it, and neither may import
 * a folder to its left; politeness/ applies it.
 */

export type RobotsMode = "ignore" | "obey" | "obey-except-embeds";

export interface PolitenessPolicy {
  /** Off: the request takes the proxy's usual path, untouched (one branch). */
  enabled: boolean;
  /** Requests to one host in flight at once. */
  maxConcurrentPerHost: number;
  /** The minimum gap between the end of one request to a host and the start of the next. */
  delayMs: number;
  /** The gap is this × the last fetch's duration when that is larger (Heritrix's delay factor). */
  delayFactor: number;
  /** The gap (and a robots.txt Crawl-delay) never exceeds this. */
  maxDelayMs: number;
  /** How long a request may wait for its turn; then 503 with Retry-After. */
  maxWaitMs: number;
  /** Requests that may wait for one host; one more gets 503 at once. */
  maxQueuePerHost: number;
  /** The first back-off after a 5xx or 429 without Retry-After; doubles while they continue. */
  backoffMs: number;
  /** No back-off (nor a Retry-After honoured) lasts longer. */
  maxBackoffMs: number;
  robots: RobotsMode;
  userAgent: {
    /** The User-Agent (after the suffix) must name a URL or an e-mail address, else 403. */
    requireContact: boolean;
    /** Appended (after a space) to the crawler's User-Agent unless it holds it already. */
    suffix: string;
  };
}

export const POLITENESS_DEFAULTS: PolitenessPolicy = {
  enabled: false,
  maxConcurrentPerHost: 1,
  delayMs: 0,
  delayFactor: 0,
  maxDelayMs: 30_000,
  maxWaitMs: 60_000,
  maxQueuePerHost: 1000,
  backoffMs: 60_000,
  maxBackoffMs: 600_000,
  robots: "ignore",
  userAgent: { requireContact: false, suffix: "" },
};

const ROBOTS_MODES: readonly string[] = ["ignore", "obey", "obey-except-embeds"];
const INT_KEYS: Record<string, [number, number]> = {
  maxConcurrentPerHost: [1, 1000],
  delayMs: [0, 3_600_000],
  maxDelayMs: [0, 3_600_000],
  maxWaitMs: [0, 3_600_000],
  maxQueuePerHost: [0, 1_000_000],
  backoffMs: [0, 86_400_000],
  maxBackoffMs: [0, 86_400_000],
};

/**
 * `input` (a partial policy) applied over `base`; throws `fail(path, why)`'s error naming the
 * key. Unknown keys are errors: a typo must not silently leave a site unprotected.
 */
export function applyPoliteness(base: PolitenessPolicy, input: unknown, path: string, fail: (path: string, why: string) => never): PolitenessPolicy {
  if (!isObject(input)) fail(path, "must be an object");
  const out: PolitenessPolicy = { ...base, userAgent: { ...base.userAgent } };
  for (const [k, v] of Object.entries(input as Record<string, unknown>)) {
    const p = `${path}.${k}`;
    if (k === "$comment") continue;
    if (k === "enabled") out.enabled = checkBool(v, p, fail);
    else if (k === "delayFactor") {
      if (typeof v !== "number" || !Number.isFinite(v) || v < 0 || v > 1000) fail(p, `must be a number between 0 and 1000, got ${JSON.stringify(v)}`);
      out.delayFactor = v as number;
    } else if (k === "robots") {
      if (typeof v !== "string" || !ROBOTS_MODES.includes(v)) fail(p, `must be one of ${ROBOTS_MODES.map((m) => JSON.stringify(m)).join(", ")}, got ${JSON.stringify(v)}`);
      out.robots = v as RobotsMode;
    } else if (k === "userAgent") out.userAgent = applyUserAgent(out.userAgent, v, p, fail);
    else if (k in INT_KEYS) (out as unknown as Record<string, number>)[k] = checkInt(v, p, INT_KEYS[k]!, fail);
    else fail(p, `unknown key; known: ${Object.keys(POLITENESS_DEFAULTS).join(", ")}`);
  }
  return out;
}

function applyUserAgent(base: PolitenessPolicy["userAgent"], v: unknown, path: string, fail: (path: string, why: string) => never): PolitenessPolicy["userAgent"] {
  if (!isObject(v)) fail(path, 'must be {"requireContact": bool, "suffix": string}');
  const out = { ...base };
  for (const [k, x] of Object.entries(v as Record<string, unknown>)) {
    if (k === "requireContact") out.requireContact = checkBool(x, `${path}.${k}`, fail);
    else if (k === "suffix") {
      // A header value: printable ASCII and spaces only, never CR/LF (header injection).
      if (typeof x !== "string" || !/^[\x20-\x7e]*$/.test(x)) fail(`${path}.${k}`, `must be a string of printable ASCII, got ${JSON.stringify(x)}`);
      out.suffix = (x as string).trim();
    } else fail(`${path}.${k}`, "unknown key; known: requireContact, suffix");
  }
  return out;
}

function isObject(v: unknown): boolean {
  return !!v && typeof v === "object" && !Array.isArray(v);
}

function checkBool(v: unknown, p: string, fail: (path: string, why: string) => never): boolean {
  if (typeof v !== "boolean") fail(p, `must be true or false, got ${JSON.stringify(v)}`);
  return v as boolean;
}

function checkInt(v: unknown, p: string, [min, max]: [number, number], fail: (path: string, why: string) => never): number {
  if (typeof v !== "number" || !Number.isInteger(v) || v < min || v > max) fail(p, `must be an integer between ${min} and ${max}, got ${JSON.stringify(v)}`);
  return v as number;
}
