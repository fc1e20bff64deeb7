/**
 * `limits` and `soft-limits` of `Warcprox-Meta` (warcprox-compat.md §2), enforced exactly: a
 * limit of N on a `urls` counter lets exactly N counted captures through.
 *
 * Every proxied request and every WRITE_RECORD goes through `admit` (limits or not), because
 * every in-flight capture may count in its buckets: with C = committed count and R = in-flight
 * admitted captures that may still count for that counter, C ≥ N → answer; C + R < N → admit and
 * reserve; otherwise wait for reservations to settle and re-check. `wire_bytes` limits answer
 * when the committed count ≥ N (bytes are unknown beforehand).
 *
 * Key grammar (`_enforce_limit`): `<bucket>/<sub>/<counter>`, split at the last two `/`; a bucket
 * with exactly one `:` is the domain form `<bucket>:<domain>` (domain via urlcanon
 * `normalize_host`, which is also how the key is printed). A limit whose bucket is not among this
 * request's buckets is ignored; a limit ≤ 0 never fires. Hard limits first, then soft, each in
 * object order; the first that fires answers.
 */
import type { WarcproxMeta } from "./warcproxMeta.js";
import { normalizeHost } from "./urlcanon.js";
import { StatsRegistry, emptyBucket, type BucketStats, type CaptureOutcome, type StatsCounter, type StatsSub } from "./stats.js";

/** A rule answer (420, 430, 403): status line, headers in this order, body. */
export interface RuleAnswer {
  status: number;
  reason: string;
  headers: Array<[string, string]>;
  body: string;
}

/** Compact JSON with non-ASCII (and DEL) escaped as `\uXXXX`, like Python `json.dumps(…, separators=(",", ":"))`. */
export function asciiJson(v: unknown): string {
  return escapeNonAscii(JSON.stringify(v) ?? "null");
}

/** JSON as Python's `json.dumps(v)` prints it: `{"k": "v", "n": [1, 2]}`, ASCII-escaped. */
export function pythonJson(v: unknown): string {
  if (v === null || typeof v !== "object") return asciiJson(v);
  if (Array.isArray(v)) return "[" + v.map(pythonJson).join(", ") + "]";
  const entries = Object.entries(v as Record<string, unknown>).filter(([, x]) => x !== undefined);
  return "{" + entries.map(([k, x]) => `${asciiJson(k)}: ${pythonJson(x)}`).join(", ") + "}";
}

function escapeNonAscii(s: string): string {
  return s.replace(/[\u007f-\uffff]/g, (c) => "\\u" + c.charCodeAt(0).toString(16).padStart(4, "0"));
}

/** Build a rule answer with §2's three headers in order (Content-Type, Connection, Content-Length, Warcprox-Meta). */
export function ruleAnswer(status: number, reason: string, warcproxMeta: unknown, body: string): RuleAnswer {
  return plainAnswer(status, reason, body, ["Warcprox-Meta", asciiJson(warcproxMeta)]);
}

/** A text/plain answer that closes the connection, with one header of its own last. */
function plainAnswer(status: number, reason: string, body: string, last: [string, string]): RuleAnswer {
  return {
    status,
    reason,
    headers: [["Content-Type", "text/plain;charset=utf-8"], ["Connection", "close"], ["Content-Length", String(Buffer.byteLength(body, "utf8"))], last],
    body,
  };
}

/** A parsed limit key. */
export interface LimitKey {
  /** The stats bucket it reads (domain part normalized). */
  bucket: string;
  sub: StatsSub;
  counter: StatsCounter;
  /** The key as printed in answers (domain part normalized). */
  key: string;
}

/** Parse `<bucket>/<sub>/<counter>` (the header parser has already checked the grammar); null if malformed. */
export function parseLimitKey(raw: string): LimitKey | null {
  const i2 = raw.lastIndexOf("/");
  const i1 = i2 > 0 ? raw.lastIndexOf("/", i2 - 1) : -1;
  if (i1 <= 0) return null;
  let bucket = raw.slice(0, i1);
  const sub = raw.slice(i1 + 1, i2);
  const counter = raw.slice(i2 + 1);
  if (sub !== "total" && sub !== "new" && sub !== "revisit") return null;
  if (counter !== "urls" && counter !== "wire_bytes") return null;
  const fields = bucket.split(":");
  if (fields.length === 2) bucket = `${fields[0]}:${normalizeHost(fields[1]!)}`;
  return { bucket, sub, counter, key: `${bucket}/${sub}/${counter}` };
}

export interface AdmitOptions {
  /** Whether this capture may be counted in `new` (default: unless `warc-prefix` is `-`). */
  mayBeNew?: boolean;
  /** Whether this capture may be counted in `revisit` (default: unless `warc-prefix` is `-`; false for WRITE_RECORD). */
  mayBeRevisit?: boolean;
  /**
   * How long to wait for in-flight reservations to settle (default 60 s). When it expires the
   * undecided limit answers (it has C + R ≥ N, so it is reached unless in-flight captures fail).
   */
  waitTimeoutMs?: number;
  /** Abort the wait (client gone): the promise rejects with the signal's reason. */
  signal?: AbortSignal;
}

export interface Admitted {
  ok: true;
  /** The stats buckets this capture counts in (§5). */
  buckets: string[];
  /**
   * Call exactly once when the capture's outcome is final: with the outcome for a completed
   * capture (counted), or with null/undefined when it is not counted (DNS/connect failure, 400,
   * aborted before a response…). Later calls are ignored.
   */
  release(outcome?: CaptureOutcome | null): void;
}

export interface Refused {
  ok: false;
  answer: RuleAnswer;
  /** Which limit answered; null when the limits could not be checked (the shared store is away: 503). */
  limit: { key: string; value: number; soft: boolean } | null;
}

export type AdmitResult = Admitted | Refused;

/** A limit that applies to this request. */
export interface ActiveLimit {
  k: LimitKey;
  value: number;
  soft: boolean;
}

export type Verdict = { kind: "admit" } | { kind: "answer"; limit: ActiveLimit } | { kind: "wait"; limit: ActiveLimit };

/** What an in-flight capture may still add to (see AdmitOptions). */
export interface AdmissionScope {
  mayBeNew: boolean;
  mayBeRevisit: boolean;
}

/** The counts a verdict reads: C (committed) and R (in-flight reservations) of §2. */
export interface LimitCounts {
  value(bucket: string, sub: StatsSub, counter: StatsCounter): number;
  reserved(bucket: string, sub: StatsSub): number;
}

export const DEFAULT_WAIT_MS = 60_000;

/** The scope of a capture with this header, unless the caller says otherwise. */
export function admissionScope(meta: WarcproxMeta | null, opts: AdmitOptions): AdmissionScope {
  return { mayBeNew: opts.mayBeNew ?? !meta?.noArchive, mayBeRevisit: opts.mayBeRevisit ?? !meta?.noArchive };
}

/**
 * The verdict on `limits` (in enforcement order) given the counts: C ≥ N answers; C + R < N
 * passes; otherwise wait, or answer when `pessimistic` (the wait timed out).
 */
export function judge(limits: readonly ActiveLimit[], scope: AdmissionScope, counts: LimitCounts, pessimistic: boolean): Verdict {
  for (const l of limits) {
    const { bucket, sub, counter } = l.k;
    const c = counts.value(bucket, sub, counter);
    if (c >= l.value) return { kind: "answer", limit: l };
    if (counter === "wire_bytes") continue;
    const contributes = sub === "total" || (sub === "new" ? scope.mayBeNew : scope.mayBeRevisit);
    if (!contributes) continue;
    if (c + counts.reserved(bucket, sub) < l.value) continue;
    return pessimistic ? { kind: "answer", limit: l } : { kind: "wait", limit: l };
  }
  return { kind: "admit" };
}

/**
 * Decide whether a capture of `url` may go ahead (hard limits, then soft). On `ok: true` the
 * capture holds a reservation in every one of its buckets until `release` is called.
 */
export function admit(stats: StatsRegistry, meta: WarcproxMeta | null, url: string, opts: AdmitOptions = {}): Promise<AdmitResult> {
  const buckets = stats.bucketsOf(meta, url);
  const scope = admissionScope(meta, opts);
  const limits = activeLimits(meta, buckets);

  const evaluate = (pessimistic: boolean): Verdict => judge(limits, scope, stats, pessimistic);

  const conclude = (v: Verdict): AdmitResult => {
    if (v.kind === "answer") return refusal(stats.get(v.limit.k.bucket), v.limit);
    const r = stats.reserve(buckets, scope);
    return { ok: true, buckets, release: (outcome) => r.settle(outcome ?? null) };
  };

  const first = evaluate(false);
  if (first.kind !== "wait") return Promise.resolve(conclude(first));
  if (opts.signal?.aborted) return Promise.reject(opts.signal.reason);

  return new Promise<AdmitResult>((resolve, reject) => {
    let done = false;
    const finish = (fn: () => void) => {
      done = true;
      clearTimeout(timer);
      opts.signal?.removeEventListener("abort", onAbort);
      remove();
      fn();
    };
    const remove = stats.addWaiter(() => {
      if (done) return true;
      const v = evaluate(false);
      if (v.kind === "wait") return false;
      finish(() => resolve(conclude(v)));
      return true;
    });
    const timer = setTimeout(() => {
      if (!done) finish(() => resolve(conclude(evaluate(true))));
    }, opts.waitTimeoutMs ?? DEFAULT_WAIT_MS);
    timer.unref?.();
    const onAbort = () => {
      if (!done) finish(() => reject(opts.signal!.reason));
    };
    opts.signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/** The limits that apply to this request, in enforcement order. */
export function activeLimits(meta: WarcproxMeta | null, buckets: readonly string[]): ActiveLimit[] {
  if (!meta) return [];
  const out: ActiveLimit[] = [];
  for (const [list, soft] of [[meta.limits, false], [meta.softLimits, true]] as const) {
    for (const [raw, value] of list) {
      if (!(typeof value === "number" && value > 0)) continue;
      const k = parseLimitKey(raw);
      if (!k || !buckets.includes(k.bucket)) continue;
      out.push({ k, value, soft });
    }
  }
  return out;
}

/** The 420/430 answer for a limit that is reached. */
export function limitAnswer(bucketStats: BucketStats, key: string, value: number, soft: boolean): RuleAnswer {
  const printed = JSON.stringify(value);
  const meta = soft
    ? { stats: { [bucketStats.bucket]: bucketStats }, "reached-soft-limit": { [key]: value } }
    : { stats: { [bucketStats.bucket]: bucketStats }, "reached-limit": { [key]: value } };
  return ruleAnswer(
    soft ? 430 : 420,
    soft ? "Reached soft limit" : "Reached limit",
    meta,
    `request rejected by warcprox: reached ${soft ? "soft limit" : "limit"} ${key}=${printed}\n`,
  );
}

/** The refusal by limit `l`, whose bucket holds `bucketStats` (null: nothing counted yet). */
export function refusal(bucketStats: BucketStats | null, l: ActiveLimit): Refused {
  const b = bucketStats ?? emptyBucket(l.k.bucket);
  return { ok: false, answer: limitAnswer(b, l.k.key, l.value, l.soft), limit: { key: l.k.key, value: l.value, soft: l.soft } };
}

/** Seconds a client is asked to wait (Retry-After) when the shared store is away. */
export const STORE_AWAY_RETRY_S = 5;

/**
 * The answer to a request with limits while the shared store that counts them is away: refused
 * (503) rather than admitted past a limit that cannot be checked. `reason` names the store.
 */
export function storeUnavailable(reason: string): Refused {
  const body = `lathe refuses this request rather than overshoot its Warcprox-Meta limits, which it cannot check now: ${reason}\n`;
  return { ok: false, answer: plainAnswer(503, "Service Unavailable", body, ["Retry-After", String(STORE_AWAY_RETRY_S)]), limit: null };
}
