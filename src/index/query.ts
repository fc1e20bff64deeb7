/**
 * CDX queries with pywb's parameters (issue "CDXJ index"): `url`, `matchType`, `from`, `to`,
 * `limit`, `sort`, `closest`, `output`, `fl`, `filter`, `related`. The key range of a query comes
 * from pywb's `calc_search_range`; each sorted source is searched for it (binary search), and the
 * sources are merged as they stream, so a query reads about as many lines as it returns.
 */
import { surt } from "./surt.js";
import type { LineSource } from "./sortedFile.js";

export type MatchType = "exact" | "prefix" | "host" | "domain";
export type CdxOutput = "cdxj" | "json" | "text";

export interface CdxFilter {
  invert: boolean;
  mode: "regex" | "exact" | "contains";
  /** "" = the whole line. */
  field: string;
  expr: string;
  regex: RegExp | null;
}

export interface CdxQuery {
  url: string;
  matchType: MatchType;
  from: string | null;
  to: string | null;
  limit: number | null;
  sort: "asc" | "reverse" | "closest";
  closest: string | null;
  output: CdxOutput;
  fl: string[] | null;
  filters: CdxFilter[];
  related: boolean;
  collection: string | null;
}

/** A bad parameter: the route answers 400 naming it. */
export class CdxQueryError extends Error {
  readonly param: string;
  constructor(param: string, message: string) {
    super(message);
    this.param = param;
  }
}

const KNOWN = new Set(["url", "matchType", "from", "to", "limit", "sort", "closest", "output", "fl", "filter", "related", "collection"]);
const MATCH_TYPES = new Set(["exact", "prefix", "host", "domain"]);
const OUTPUTS = new Set(["cdxj", "json", "text"]);
/** pywb's alternative field names (CDXObject.CDX_ALT_FIELDS). */
const ALIASES: Record<string, string> = { original: "url", mimetype: "mime", statuscode: "status" };
const CDX11_FIELDS = ["urlkey", "timestamp", "url", "mime", "status", "digest", "redirect", "robotflags", "length", "offset", "filename"];

const single = (q: URLSearchParams, name: string): string | null => {
  const all = q.getAll(name);
  if (all.length > 1) throw new CdxQueryError(name, `${name} is given ${all.length} times; give it once`);
  return all.length ? all[0]! : null;
};

function timestampParam(q: URLSearchParams, name: string): string | null {
  const v = single(q, name);
  if (v === null || v === "") return null;
  if (!/^\d{1,14}$/.test(v)) throw new CdxQueryError(name, `${name} must be a timestamp of 1 to 14 digits (YYYYMMDDhhmmss or a prefix of it), got ${JSON.stringify(v)}`);
  return v;
}

/** pywb `pad_timestamp`: the missing digits from `pad`. */
const padTs = (ts: string, pad: string): string => ts + pad.slice(ts.length);
const PAD_DOWN = "10000101000000";
const PAD_UP = "29991231235959";

export function parseCdxQuery(q: URLSearchParams): CdxQuery {
  for (const k of new Set(q.keys())) if (!KNOWN.has(k)) throw new CdxQueryError(k, `unknown parameter ${k}; known: ${[...KNOWN].join(", ")}`);
  let url = single(q, "url");
  if (url === null || url.trim() === "") throw new CdxQueryError("url", "url is required");
  let matchType = single(q, "matchType");
  if (matchType !== null && !MATCH_TYPES.has(matchType)) throw new CdxQueryError("matchType", `matchType must be one of exact, prefix, host, domain; got ${JSON.stringify(matchType)}`);
  // pywb's wildcards: `example.com/path*` is a prefix query, `*.example.com` a domain query.
  if (matchType === null && url.length > 1 && url.endsWith("*")) {
    url = url.slice(0, -1);
    matchType = "prefix";
  } else if (matchType === null && url.startsWith("*.")) {
    url = url.slice(2);
    matchType = "domain";
  }
  const from = timestampParam(q, "from");
  const to = timestampParam(q, "to");
  const limitText = single(q, "limit");
  let limit: number | null = null;
  if (limitText !== null) {
    if (!/^\d{1,9}$/.test(limitText) || Number(limitText) < 1) throw new CdxQueryError("limit", `limit must be a positive integer, got ${JSON.stringify(limitText)}`);
    limit = Number(limitText);
  }
  const sortText = single(q, "sort");
  if (sortText !== null && sortText !== "reverse" && sortText !== "closest") throw new CdxQueryError("sort", `sort must be reverse or closest, got ${JSON.stringify(sortText)}`);
  const closestText = single(q, "closest");
  let closest: string | null = null;
  if (closestText !== null) {
    if (!/^\d{1,14}$/.test(closestText)) throw new CdxQueryError("closest", `closest must be a timestamp of 1 to 14 digits, got ${JSON.stringify(closestText)}`);
    closest = padTs(closestText, PAD_DOWN);
  }
  if (sortText === "closest") {
    if (closest === null) throw new CdxQueryError("closest", "sort=closest needs closest=<timestamp>");
    if ((matchType ?? "exact") !== "exact") throw new CdxQueryError("sort", "sort=closest works with matchType=exact only");
  }
  const output = single(q, "output") ?? "cdxj";
  if (!OUTPUTS.has(output)) throw new CdxQueryError("output", `output must be cdxj, json or text; got ${JSON.stringify(output)}`);
  const flText = single(q, "fl");
  let fl: string[] | null = null;
  if (flText !== null) {
    fl = flText.split(",").map((f) => f.trim());
    for (const f of fl) if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(f)) throw new CdxQueryError("fl", `fl must be comma-separated field names, got ${JSON.stringify(f)}`);
    fl = fl.map((f) => ALIASES[f] ?? f);
  }
  const filters = q.getAll("filter").map(parseFilter);
  const relatedText = single(q, "related");
  if (relatedText !== null && relatedText !== "true" && relatedText !== "false") throw new CdxQueryError("related", `related must be true or false, got ${JSON.stringify(relatedText)}`);
  const collection = single(q, "collection");
  if (collection !== null && !/^[a-z0-9][a-z0-9._-]{0,63}$/.test(collection)) throw new CdxQueryError("collection", `not a collection name: ${JSON.stringify(collection)}`);
  return {
    url,
    matchType: (matchType ?? "exact") as MatchType,
    from: from === null ? null : padTs(from, PAD_DOWN),
    to: to === null ? null : padTs(to, PAD_UP),
    limit,
    sort: sortText === "reverse" ? "reverse" : sortText === "closest" ? "closest" : "asc",
    closest,
    output: output as CdxOutput,
    fl,
    filters,
    related: relatedText === "true",
    collection,
  };
}

/** pywb's CDXFilter: `[!][=|~]field:expr`; without a prefix, expr is a regex matched at the start. */
export function parseFilter(text: string): CdxFilter {
  let s = text;
  const invert = s.startsWith("!");
  if (invert) s = s.slice(1);
  let mode: CdxFilter["mode"] = "regex";
  if (s.startsWith("=")) {
    mode = "exact";
    s = s.slice(1);
  } else if (s.startsWith("~")) {
    mode = "contains";
    s = s.slice(1);
  }
  const colon = s.indexOf(":");
  let field = "";
  if (colon >= 0) {
    field = s.slice(0, colon);
    s = s.slice(colon + 1);
    field = ALIASES[field] ?? field;
  }
  let regex: RegExp | null = null;
  if (mode === "regex") {
    try {
      regex = new RegExp(s, "y");
    } catch (e) {
      throw new CdxQueryError("filter", `filter ${JSON.stringify(text)}: not a regular expression (${(e as Error).message})`);
    }
  }
  return { invert, mode, field, expr: s, regex };
}

/** A parsed index line. */
export interface CdxLine {
  line: string;
  key: string;
  timestamp: string;
  json: Record<string, unknown>;
}

export function parseLine(line: string): CdxLine {
  const a = line.indexOf(" ");
  const b = line.indexOf(" ", a + 1);
  let json: Record<string, unknown> = {};
  try {
    json = JSON.parse(line.slice(b + 1)) as Record<string, unknown>;
  } catch {
    // A line that is not CDXJ keeps its key and timestamp only.
  }
  return { line, key: line.slice(0, a), timestamp: line.slice(a + 1, b), json };
}

function fieldOf(l: CdxLine, name: string): string | undefined {
  if (name === "urlkey") return l.key;
  if (name === "timestamp") return l.timestamp;
  const v = l.json[name];
  if (v === undefined || v === null) return undefined;
  return typeof v === "string" ? v : JSON.stringify(v);
}

function passes(l: CdxLine, f: CdxFilter): boolean {
  const v = f.field === "" ? l.line : (fieldOf(l, f.field) ?? "");
  let m: boolean;
  if (f.mode === "exact") m = v === f.expr;
  else if (f.mode === "contains") m = v.includes(f.expr);
  else {
    f.regex!.lastIndex = 0;
    m = f.regex!.test(v);
  }
  return m !== f.invert;
}

/** pywb's `calc_search_range`: the half-open key range `[start, end)` of a query. */
export function searchRange(url: string, matchType: MatchType): { key: string; start: string; end: string } {
  const key = surt(url);
  const inc = (x: string) => x.slice(0, -1) + String.fromCharCode(x.charCodeAt(x.length - 1) + 1);
  switch (matchType) {
    case "exact":
      return { key, start: key + " ", end: key + "!" };
    case "prefix": {
      let start = key;
      if (url.endsWith("/") && !start.endsWith("/")) start += "/";
      if (url.endsWith("?") && !start.endsWith("?")) start += "?";
      return { key, start, end: inc(start) };
    }
    case "host": {
      const host = key.split(")/")[0]!;
      return { key, start: host + ")/", end: host + "*" };
    }
    case "domain": {
      const host = key.split(")/")[0]!;
      return { key, start: host.includes(",") ? host + ")/" : host + ",", end: host + "-" };
    }
  }
}

/** Merge ascending (or descending) streams of lines; identical lines once. */
async function* mergeStreams(streams: AsyncIterable<string>[], desc: boolean): AsyncGenerator<string> {
  const its = streams.map((s) => s[Symbol.asyncIterator]());
  const heads: Array<string | null> = await Promise.all(its.map(async (it) => ((await it.next()).value as string | undefined) ?? null));
  let last: string | null = null;
  for (;;) {
    let best = -1;
    for (let i = 0; i < heads.length; i++) {
      const h = heads[i];
      if (h === null || h === undefined) continue;
      if (best < 0 || (desc ? h > heads[best]! : h < heads[best]!)) best = i;
    }
    if (best < 0) return;
    const line = heads[best]!;
    const n = await its[best]!.next();
    heads[best] = n.done ? null : (n.value as string);
    if (line !== last) yield line;
    last = line;
  }
}

const tsSeconds = (ts: string): number => {
  const t = ts.padEnd(14, "0");
  const ms = Date.UTC(+t.slice(0, 4), +t.slice(4, 6) - 1, +t.slice(6, 8), +t.slice(8, 10), +t.slice(10, 12), +t.slice(12, 14));
  return Number.isNaN(ms) ? 0 : ms / 1000;
};

/** The matching lines of a query over sorted sources, in the order and number asked for. */
export async function* runQuery(q: CdxQuery, sources: LineSource[]): AsyncGenerator<CdxLine> {
  const { start, end, key } = searchRange(q.url, q.matchType);
  const keep = (l: CdxLine) => (q.from === null || l.timestamp >= q.from) && (q.to === null || l.timestamp <= q.to) && q.filters.every((f) => passes(l, f));
  let n = 0;
  const limit = q.limit ?? Infinity;
  if (q.sort === "closest") {
    // Lines of one key are in timestamp order: walk out from the closest timestamp both ways.
    const split = `${key} ${q.closest}`;
    const after = mergeStreams(sources.map((s) => s.forward(split, end)), false)[Symbol.asyncIterator]();
    const before = mergeStreams(sources.map((s) => s.backward(start, split)), true)[Symbol.asyncIterator]();
    const target = tsSeconds(q.closest!);
    const nextKept = async (it: AsyncIterator<string>): Promise<CdxLine | null> => {
      for (;;) {
        const r = await it.next();
        if (r.done) return null;
        const l = parseLine(r.value);
        if (keep(l)) return l;
      }
    };
    let a = await nextKept(after);
    let b = await nextKept(before);
    while ((a || b) && n < limit) {
      // Ties go to the earlier capture (pywb sorts by distance, stably, from ascending order).
      const takeB = b !== null && (a === null || Math.abs(target - tsSeconds(b.timestamp)) <= Math.abs(tsSeconds(a.timestamp) - target));
      if (takeB) {
        yield b!;
        b = await nextKept(before);
      } else {
        yield a!;
        a = await nextKept(after);
      }
      n++;
    }
    return;
  }
  const desc = q.sort === "reverse";
  for await (const line of mergeStreams(sources.map((s) => (desc ? s.backward(start, end) : s.forward(start, end))), desc)) {
    if (n >= limit) return;
    const l = parseLine(line);
    if (!keep(l)) continue;
    yield l;
    n++;
  }
}

/**
 * `related=true` (decisions.md §6): lines of records whose WARC-Target-URI is exactly
 * `urn:<type>:<url>` (or `urn:<type>:<id>:<url>`, as videos and annotations are named),
 * `screenshot:<url>` or `thumbnail:<url>`. The `urn:` types present are found by skipping
 * through the `urn:` key range (one search per type), not by reading it.
 */
export async function* relatedLines(urls: string[], sources: LineSource[]): AsyncGenerator<CdxLine> {
  const firstIn = async (from: string, to: string): Promise<string | null> => {
    let best: string | null = null;
    for (const s of sources) {
      for await (const l of s.forward(from, to)) {
        if (best === null || l < best) best = l;
        break;
      }
    }
    return best;
  };
  /** Distinct segments (up to the next `:`) after `prefix` among the keys. */
  const segments = async (prefix: string, max: number): Promise<string[]> => {
    const out: string[] = [];
    let from = prefix;
    const to = prefix.slice(0, -1) + String.fromCharCode(prefix.charCodeAt(prefix.length - 1) + 1);
    while (out.length < max) {
      const l = await firstIn(from, to);
      if (l === null) break;
      const rest = l.slice(prefix.length);
      const c = rest.search(/[: ]/);
      if (c < 0 || rest[c] !== ":") {
        // Not `seg:`; skip past this key.
        from = l.slice(0, l.indexOf(" ")) + "!";
        continue;
      }
      const seg = rest.slice(0, c);
      out.push(seg);
      from = prefix + seg + ";"; // ';' follows ':'
    }
    return out;
  };
  if (urls.length === 0) return;
  const types = new Map<string, string[]>();
  for (const t of await segments("urn:", 256)) types.set(t, (await segments(`urn:${t}:`, 256)).filter((id) => id !== "http" && id !== "https"));
  const seen = new Set<string>();
  for (const url of urls) {
    const wanted = new Set<string>([`screenshot:${url}`, `thumbnail:${url}`]);
    for (const [t, ids] of types) {
      wanted.add(`urn:${t}:${url}`);
      for (const id of ids) wanted.add(`urn:${t}:${id}:${url}`);
    }
    const found: CdxLine[] = [];
    for (const uri of wanted) {
      const { start, end } = searchRange(uri, "exact");
      for await (const line of mergeStreams(sources.map((s) => s.forward(start, end)), false)) {
        if (seen.has(line)) continue;
        const l = parseLine(line);
        // Exact strings only: the key is canonical (case, slashes), the URI must be the very one.
        const u = typeof l.json.url === "string" ? l.json.url : "";
        if (!u.endsWith(url) || !RELATED_PREFIX.test(u.slice(0, u.length - url.length))) continue;
        seen.add(line);
        found.push(l);
      }
    }
    found.sort((x, y) => (x.line < y.line ? -1 : x.line > y.line ? 1 : 0));
    yield* found;
  }
}

/** What may precede the page URL in an associated resource's URI (the type's case as written). */
const RELATED_PREFIX = /^(?:urn:[A-Za-z][A-Za-z0-9-]{0,31}:(?:[A-Za-z0-9._~-]{1,64}:)?|screenshot:|thumbnail:)$/;

/** One answer line (LF included) in the requested output. */
export function formatLine(l: CdxLine, q: Pick<CdxQuery, "output" | "fl">): string {
  if (q.output === "json") {
    const o: Record<string, unknown> = {};
    if (q.fl) {
      for (const f of q.fl) {
        const v = fieldOf(l, f);
        if (v !== undefined) o[f] = v;
      }
    } else Object.assign(o, { urlkey: l.key, timestamp: l.timestamp }, l.json);
    return JSON.stringify(o) + "\n";
  }
  if (q.output === "text") {
    const fields = q.fl ?? CDX11_FIELDS;
    return (
      fields
        .map((f) => {
          const v = f === "digest" && !q.fl ? fieldOf(l, f)?.replace(/^[^:]*:/, "") : fieldOf(l, f);
          return v === undefined || v === "" ? "-" : v.replace(/[ \n\r]/g, (c) => encodeURIComponent(c));
        })
        .join(" ") + "\n"
    );
  }
  if (!q.fl) return l.line + "\n";
  const o: Record<string, unknown> = {};
  for (const f of q.fl) if (f !== "urlkey" && f !== "timestamp" && l.json[f] !== undefined) o[f] = l.json[f];
  return `${l.key} ${l.timestamp} ${JSON.stringify(o)}\n`;
}
