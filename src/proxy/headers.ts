/**
 * Header handling between client and origin. Names, case, order and duplicates are kept
 * (raw header arrays throughout); only hop-by-hop fields (RFC 9110 §7.6.1) and lathe's own
 * control headers are removed. No Via is added (decisions.md §1).
 */

const HOP_BY_HOP = new Set([
  "connection",
  "keep-alive",
  "proxy-connection",
  "proxy-authorization",
  "proxy-authenticate",
  "te",
  "trailer",
  "upgrade",
]);

/** Headers lathe consumes itself and never forwards or records. */
const LATHE_OWN = new Set(["warcprox-meta"]);

/** No field names: what connectionTokens returns for most messages, and fieldsObject's default skip. */
const NO_NAMES: ReadonlySet<string> = new Set();

/**
 * The field names a message's Connection / Proxy-Connection fields list, lower-cased, except the
 * hop-by-hop names dropped anyway: the usual `Connection: keep-alive` then costs no Set (#25).
 */
function connectionTokens(raw: string[]): ReadonlySet<string> {
  let tokens: Set<string> | null = null;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!;
    // Lengths first: lower-casing every name of every message is a runtime call each (#25).
    if (name.length !== 10 && name.length !== 16) continue;
    const n = name.toLowerCase();
    if (n !== "connection" && n !== "proxy-connection") continue;
    const value = raw[i + 1]!;
    // One token (the usual case) needs no split.
    if (!value.includes(",")) tokens = withToken(tokens, value);
    else for (const t of value.split(",")) tokens = withToken(tokens, t);
  }
  return tokens ?? NO_NAMES;
}

function withToken(tokens: Set<string> | null, raw: string): Set<string> | null {
  const token = raw.trim().toLowerCase();
  if (HOP_BY_HOP.has(token)) return tokens;
  return (tokens ?? new Set<string>()).add(token);
}

/** Bit `n` set for each length `n` of `names` (all shorter than 32). */
function lengthMask(names: Iterable<string>): number {
  let mask = 0;
  for (const n of names) mask |= 1 << n.length;
  return mask;
}

/** Lengths of the request field names forwardRequestHeaders drops or looks at. */
const REQUEST_SPECIAL_LENGTHS = lengthMask([...HOP_BY_HOP, ...LATHE_OWN, "host", "transfer-encoding", "content-length"]);

/** Lengths of the names a response loses whatever its Connection field says. */
const RESPONSE_DROPPED_LENGTHS = lengthMask([...HOP_BY_HOP, "transfer-encoding", ...LATHE_OWN]);

/**
 * Whether `name` must be lower-cased to be judged: a name as long as none of the `mask` names
 * (and no Connection token to match) is kept as it is. Lower-casing each name of each message was
 * a runtime call and a new string each (#25).
 */
function needsLook(name: string, mask: number, named: ReadonlySet<string>): boolean {
  return named.size > 0 || (name.length < 32 && ((mask >>> name.length) & 1) === 1);
}

export interface ForwardOptions {
  /** `host[:port]` of the request target, which replaces a differing Host (RFC 9112 §3.2.2). */
  authority: string;
  /** Keep Upgrade and `Connection: upgrade` (WebSocket pass-through). */
  upgrade?: boolean;
  /** Methods whose body Node would frame as chunked when the client sent no framing. */
  method: string;
  /**
   * The client sends a body without Content-Length (h2: its DATA frames frame it). Node then
   * frames it chunked upstream; without this, no framing means no body (HTTP/1.1).
   */
  unframedBody?: boolean;
}

const NODE_CHUNKS_BY_DEFAULT = (m: string) => !["GET", "HEAD", "DELETE", "OPTIONS", "TRACE", "CONNECT"].includes(m);

/** The values of a field (`name` lower-case) in a raw `[name, value, …]` list, in order. */
export function headerValues(raw: string[], name: string): string[] {
  const out: string[] = [];
  for (let i = 0; i < raw.length; i += 2) if (raw[i]!.length === name.length && raw[i]!.toLowerCase() === name) out.push(raw[i + 1]!);
  return out;
}

/** Fields an HTTP/2 message must not carry (RFC 9113 §8.2.2). */
export const H2_CONNECTION_SPECIFIC = new Set(["connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade"]);

/**
 * A raw `[name, value, …]` list as the object Node's http2 and `writeEarlyHints` take: names
 * lower-cased, a repeated name's values in an array in order, names in `skip` left out.
 */
export function fieldsObject(raw: string[], skip: ReadonlySet<string> = NO_NAMES): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!.toLowerCase();
    if (skip.has(name)) continue;
    const prev = out[name];
    out[name] = prev === undefined ? raw[i + 1]! : [...(Array.isArray(prev) ? prev : [prev]), raw[i + 1]!];
  }
  return out;
}

/** The request header array sent upstream, from the client's raw headers. */
export function forwardRequestHeaders(raw: string[], o: ForwardOptions): string[] {
  const named = connectionTokens(raw);
  const out: string[] = [];
  let hasHost = false;
  let framed = false;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!;
    const value = raw[i + 1]!;
    if (!needsLook(name, REQUEST_SPECIAL_LENGTHS, named)) {
      out.push(name, value);
      continue;
    }
    const lower = name.toLowerCase();
    if (LATHE_OWN.has(lower)) continue;
    if (o.upgrade && (lower === "upgrade" || lower === "connection")) {
      out.push(name, value);
      continue;
    }
    if (HOP_BY_HOP.has(lower) || (named.has(lower) && lower !== "transfer-encoding" && lower !== "content-length")) continue;
    if (lower === "host") {
      if (hasHost) continue;
      hasHost = true;
      out.push(name, value.toLowerCase() === o.authority.toLowerCase() ? value : o.authority);
      continue;
    }
    // Transfer-Encoding and Content-Length are kept: Node then frames the body the same way.
    if (lower === "transfer-encoding" || lower === "content-length") framed = true;
    out.push(name, value);
  }
  if (!hasHost) out.unshift("Host", o.authority);
  if (!framed && !o.unframedBody && NODE_CHUNKS_BY_DEFAULT(o.method.toUpperCase())) {
    // The client sent no body. Node would otherwise add `Transfer-Encoding: chunked` and a
    // last-chunk; an explicit zero length says the same thing without inventing framing.
    out.push("Content-Length", "0");
  }
  return out;
}

/** The response header array sent to the client, from the origin's raw headers. */
export function forwardResponseHeaders(raw: string[]): string[] {
  const named = connectionTokens(raw);
  const out: string[] = [];
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!;
    if (needsLook(name, RESPONSE_DROPPED_LENGTHS, named) && droppedFromResponse(name.toLowerCase(), named)) continue;
    out.push(name, raw[i + 1]!);
  }
  return out;
}

function droppedFromResponse(lower: string, named: ReadonlySet<string>): boolean {
  // Transfer-Encoding goes too: Node frames the body toward the client itself. An origin's
  // own Warcprox-Meta is kept in the WARC but never reaches the crawler (it could forge a 420).
  return HOP_BY_HOP.has(lower) || lower === "transfer-encoding" || named.has(lower) || LATHE_OWN.has(lower);
}
