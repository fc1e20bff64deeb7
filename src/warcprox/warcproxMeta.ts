/**
 * The `Warcprox-Meta` request header (warcprox-compat.md §1): parsed and validated whole before
 * anything else happens. Pure: no I/O. An invalid header is a 400 naming the field.
 */
import { inflateSync } from "node:zlib";

export type BucketMode = "rw" | "ro";
export type DedupPolicyName = "off" | "digest" | "url" | "url-preferred";

export interface StatsBucket {
  bucket: string;
  tallyDomains: string[];
}

export interface BlockRule {
  /** The rule exactly as sent (for the 403 answer). */
  raw: Record<string, unknown>;
  domain?: string;
  surt?: string;
  ssurt?: string;
  regex?: RegExp;
  substring?: string;
  parentUrlRegex?: RegExp;
  exact?: boolean;
}

export interface MimeTypeFilter {
  type: "REJECT" | "LIMIT";
  regex: RegExp;
}

export interface WarcproxMeta {
  warcPrefix?: string;
  /** Do not archive (`warc-prefix: "-"`). */
  noArchive: boolean;
  dedupBuckets?: Array<{ name: string; mode: BucketMode }>;
  dedupOk: boolean;
  statsBuckets?: StatsBucket[];
  limits: Array<[string, number]>;
  softLimits: Array<[string, number]>;
  blocks?: BlockRule[];
  mimeTypeFilters?: MimeTypeFilter[];
  metadata?: Record<string, unknown>;
  acceptCaptureMetadata: boolean;
  lathe: { dedupPolicy?: DedupPolicyName; collection?: string };
}

export class WarcproxMetaError extends Error {
  /** The field to blame, or null when the header as a whole is wrong. */
  readonly field: string | null;
  constructor(field: string | null, detail: string) {
    super(detail);
    this.field = field;
  }
  /** The 400 reason phrase warcprox clients see. */
  get reason(): string {
    return this.field === null
      ? "request rejected by warcprox: invalid Warcprox-Meta header"
      : `request rejected by warcprox: invalid Warcprox-Meta field ${JSON.stringify(this.field).slice(1, -1).replace(/[^\x20-\x7e]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`)}`;
  }
}

const SLASH_REASON = "request rejected by warcprox: slash and backslash are not permitted in warc-prefix";

/** A 400 with warcprox's own reason for a `/` or `\` in warc-prefix. */
export class WarcPrefixSlashError extends WarcproxMetaError {
  override get reason(): string {
    return SLASH_REASON;
  }
}

const KNOWN = new Set([
  "warc-prefix", "dedup-buckets", "dedup-bucket", "captures-bucket", "dedup-ok", "captures-table-extra-fields",
  "stats", "limits", "soft-limits", "blocks", "compressed_blocks", "mime-type-filters", "metadata", "accept", "lathe",
]);

const isObject = (v: unknown): v is Record<string, unknown> => !!v && typeof v === "object" && !Array.isArray(v);

function jsRegex(field: string, src: unknown, anchor: "full" | "start"): RegExp {
  if (typeof src !== "string") throw new WarcproxMetaError(field, `${field}: a regex must be a string`);
  try {
    return new RegExp(anchor === "full" ? `^(?:${src})$` : `^(?:${src})`);
  } catch (e) {
    throw new WarcproxMetaError(field, `${field}: invalid regex ${JSON.stringify(src)}: ${(e as Error).message}`);
  }
}

function limitsOf(field: string, v: unknown): Array<[string, number]> {
  if (!isObject(v)) throw new WarcproxMetaError(field, `${field} must be an object of "bucket/sub/counter": number`);
  return Object.entries(v).map(([k, n]) => {
    const parts = k.split("/");
    if (parts.length < 3 || !parts.slice(0, -2).join("/")) throw new WarcproxMetaError(field, `${field} key ${JSON.stringify(k)} must be <bucket>/<total|new|revisit>/<urls|wire_bytes>`);
    const [sub, counter] = parts.slice(-2);
    if (!["total", "new", "revisit"].includes(sub!)) throw new WarcproxMetaError(field, `${field} key ${JSON.stringify(k)}: unknown sub-counter ${JSON.stringify(sub)} (total, new or revisit)`);
    if (!["urls", "wire_bytes"].includes(counter!)) throw new WarcproxMetaError(field, `${field} key ${JSON.stringify(k)}: unknown counter ${JSON.stringify(counter)} (urls or wire_bytes)`);
    if (typeof n !== "number" || !Number.isFinite(n) || n < 0) throw new WarcproxMetaError(field, `${field} ${JSON.stringify(k)} must be a non-negative number, got ${JSON.stringify(n)}`);
    return [k, n] as [string, number];
  });
}

const RULE_KEYS = new Set(["domain", "surt", "ssurt", "regex", "substring", "parent_url_regex", "exact", "url_match", "value"]);

function blockRules(field: string, v: unknown): BlockRule[] {
  if (!Array.isArray(v)) throw new WarcproxMetaError(field, `${field} must be an array of rules`);
  return v.map((r, i) => {
    if (!isObject(r)) throw new WarcproxMetaError(field, `${field}[${i}] must be an object`);
    for (const k of Object.keys(r)) if (!RULE_KEYS.has(k)) throw new WarcproxMetaError(field, `${field}[${i}]: unknown rule key ${JSON.stringify(k)}`);
    const rule: BlockRule = { raw: r };
    const str = (k: string) => {
      if (typeof r[k] !== "string") throw new WarcproxMetaError(field, `${field}[${i}].${k} must be a string`);
      return r[k] as string;
    };
    if ("domain" in r) rule.domain = str("domain").toLowerCase();
    if ("surt" in r) rule.surt = str("surt");
    if ("ssurt" in r) rule.ssurt = str("ssurt");
    if ("substring" in r) rule.substring = str("substring");
    if ("regex" in r) rule.regex = jsRegex(field, r.regex, "full");
    if ("parent_url_regex" in r) rule.parentUrlRegex = jsRegex(field, r.parent_url_regex, "full");
    if ("exact" in r) {
      if (typeof r.exact !== "boolean") throw new WarcproxMetaError(field, `${field}[${i}].exact must be true or false`);
      rule.exact = r.exact;
    }
    if ("url_match" in r) {
      const value = str("value");
      if (r.url_match === "STRING_MATCH") rule.substring = value;
      else if (r.url_match === "SURT_MATCH") rule.surt = value;
      else if (r.url_match === "REGEX_MATCH") rule.regex = jsRegex(field, value, "full");
      else throw new WarcproxMetaError(field, `${field}[${i}].url_match must be STRING_MATCH, SURT_MATCH or REGEX_MATCH`);
    } else if ("value" in r) {
      throw new WarcproxMetaError(field, `${field}[${i}].value needs url_match`);
    }
    return rule;
  });
}

/** Parse every value of the header (all occurrences); throws WarcproxMetaError. */
export function parseWarcproxMeta(values: string[], ignoredFields: readonly string[] = []): WarcproxMeta | null {
  if (values.length === 0) return null;
  if (values.length > 1) throw new WarcproxMetaError(null, "Warcprox-Meta must be sent once, it was sent " + values.length + " times");
  let j: unknown;
  try {
    j = JSON.parse(values[0]!);
  } catch (e) {
    throw new WarcproxMetaError(null, `Warcprox-Meta is not valid JSON: ${(e as Error).message}`);
  }
  if (!isObject(j)) throw new WarcproxMetaError(null, "Warcprox-Meta must be a JSON object");
  for (const k of Object.keys(j)) {
    if (!KNOWN.has(k) && !ignoredFields.includes(k)) throw new WarcproxMetaError(k, `unknown Warcprox-Meta field ${JSON.stringify(k)}`);
  }
  const m: WarcproxMeta = { noArchive: false, dedupOk: true, limits: [], softLimits: [], acceptCaptureMetadata: false, lathe: {} };

  if ("warc-prefix" in j) {
    const p = j["warc-prefix"];
    if (typeof p !== "string") throw new WarcproxMetaError("warc-prefix", "warc-prefix must be a string");
    if (/[/\\]/.test(p)) throw new WarcPrefixSlashError("warc-prefix", "slash and backslash are not permitted in warc-prefix");
    if (p === "-") m.noArchive = true;
    else if (!/^[\x21-\x7e]{1,200}$/.test(p) || p === "." || p === "..") {
      throw new WarcproxMetaError("warc-prefix", `warc-prefix must be "-" or 1–200 printable ASCII characters without spaces, got ${JSON.stringify(p)}`);
    } else m.warcPrefix = p;
  }

  if ("dedup-buckets" in j && ("dedup-bucket" in j || "captures-bucket" in j)) {
    throw new WarcproxMetaError("dedup-buckets", "dedup-buckets together with the legacy dedup-bucket/captures-bucket is ambiguous");
  }
  if ("dedup-buckets" in j) {
    const b = j["dedup-buckets"];
    if (!isObject(b)) throw new WarcproxMetaError("dedup-buckets", 'dedup-buckets must be an object {"bucket": "rw" | "ro"}');
    m.dedupBuckets = Object.entries(b).map(([name, mode]) => {
      if (mode !== "rw" && mode !== "ro" && mode !== "") throw new WarcproxMetaError("dedup-buckets", `dedup-buckets ${JSON.stringify(name)}: mode must be "rw", "ro" or "", got ${JSON.stringify(mode)}`);
      return { name, mode: mode === "ro" ? "ro" : "rw" };
    });
  }
  for (const legacy of ["dedup-bucket", "captures-bucket"] as const) {
    if (legacy in j) {
      if (typeof j[legacy] !== "string") throw new WarcproxMetaError(legacy, `${legacy} must be a string`);
      m.dedupBuckets = [{ name: j[legacy] as string, mode: "rw" }];
    }
  }
  if ("dedup-ok" in j) {
    if (typeof j["dedup-ok"] !== "boolean") throw new WarcproxMetaError("dedup-ok", "dedup-ok must be true or false");
    m.dedupOk = j["dedup-ok"];
  }
  if ("captures-table-extra-fields" in j && !isObject(j["captures-table-extra-fields"])) {
    throw new WarcproxMetaError("captures-table-extra-fields", "captures-table-extra-fields must be an object");
  }
  if ("stats" in j) {
    const s = j.stats;
    if (!isObject(s) || !Array.isArray(s.buckets)) throw new WarcproxMetaError("stats", 'stats must be {"buckets": [...]}');
    for (const k of Object.keys(s)) if (k !== "buckets") throw new WarcproxMetaError("stats", `stats: unknown key ${JSON.stringify(k)}`);
    m.statsBuckets = s.buckets.map((b, i) => {
      if (typeof b === "string") return { bucket: b, tallyDomains: [] };
      if (isObject(b) && typeof b.bucket === "string") {
        const td = b["tally-domains"] ?? [];
        if (!Array.isArray(td) || td.some((d) => typeof d !== "string")) throw new WarcproxMetaError("stats", `stats.buckets[${i}].tally-domains must be an array of strings`);
        for (const k of Object.keys(b)) if (k !== "bucket" && k !== "tally-domains") throw new WarcproxMetaError("stats", `stats.buckets[${i}]: unknown key ${JSON.stringify(k)}`);
        return { bucket: b.bucket, tallyDomains: (td as string[]).map((d) => d.toLowerCase()) };
      }
      throw new WarcproxMetaError("stats", `stats.buckets[${i}] must be a name or {"bucket": name, "tally-domains": [...]}`);
    });
  }
  if ("limits" in j) m.limits = limitsOf("limits", j.limits);
  if ("soft-limits" in j) m.softLimits = limitsOf("soft-limits", j["soft-limits"]);
  if ("compressed_blocks" in j) {
    const c = j.compressed_blocks;
    if (typeof c !== "string") throw new WarcproxMetaError("compressed_blocks", "compressed_blocks must be a base64 string");
    let rules: unknown;
    try {
      rules = JSON.parse(inflateSync(Buffer.from(c, "base64")).toString("utf8"));
    } catch (e) {
      throw new WarcproxMetaError("compressed_blocks", `compressed_blocks is not base64(zlib(JSON)): ${(e as Error).message}`);
    }
    m.blocks = blockRules("compressed_blocks", rules);
  } else if ("blocks" in j) {
    m.blocks = blockRules("blocks", j.blocks);
  }
  if ("mime-type-filters" in j) {
    const f = j["mime-type-filters"];
    if (!Array.isArray(f)) throw new WarcproxMetaError("mime-type-filters", "mime-type-filters must be an array");
    m.mimeTypeFilters = f.map((x, i) => {
      if (!isObject(x) || (x.type !== "REJECT" && x.type !== "LIMIT")) throw new WarcproxMetaError("mime-type-filters", `mime-type-filters[${i}].type must be REJECT or LIMIT`);
      return { type: x.type, regex: jsRegex("mime-type-filters", x.regex, "start") };
    });
  }
  if ("metadata" in j) {
    if (!isObject(j.metadata)) throw new WarcproxMetaError("metadata", "metadata must be an object");
    m.metadata = j.metadata;
  }
  if ("accept" in j) {
    const a = j.accept;
    if (!Array.isArray(a) || a.some((x) => x !== "capture-metadata")) throw new WarcproxMetaError("accept", 'accept must be an array whose only allowed value is "capture-metadata"');
    m.acceptCaptureMetadata = a.length > 0;
  }
  if ("lathe" in j) {
    const l = j.lathe;
    if (!isObject(l)) throw new WarcproxMetaError("lathe", "lathe must be an object");
    for (const [k, v] of Object.entries(l)) {
      if (k === "dedup-policy") {
        if (!["off", "digest", "url", "url-preferred"].includes(v as string)) throw new WarcproxMetaError("lathe", `lathe.dedup-policy must be off, digest, url or url-preferred, got ${JSON.stringify(v)}`);
        m.lathe.dedupPolicy = v as DedupPolicyName;
      } else if (k === "collection") {
        if (typeof v !== "string" || !/^[a-z0-9][a-z0-9._-]{0,63}$/.test(v)) throw new WarcproxMetaError("lathe", `lathe.collection must be a collection name, got ${JSON.stringify(v)}`);
        m.lathe.collection = v;
      } else {
        throw new WarcproxMetaError("lathe", `lathe: unknown key ${JSON.stringify(k)}`);
      }
    }
  }
  return m;
}
