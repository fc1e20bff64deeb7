/**
 * urlcanon's `semantic` canonicalizer and its `surt()` / `ssurt()` forms (iipc/urlcanon
 * `python/urlcanon`, the library warcprox uses for `blocks`, `tally-domains` and limit domains;
 * warcprox-compat.md §1, §2, §5). These are NOT the CDX keys of src/index/surt.ts: urlcanon keeps
 * the scheme (`http://(com,example,)/fuh/`), puts the port inside the parentheses
 * (`http://(com,example:8080,)/`), keeps `www` and the trailing slash, and sorts the query as whole
 * `&`-parts.
 *
 * Like the reference, everything works on the UTF-8 bytes of the URL, held here in "binary
 * strings" (one char per byte, 0–255), so that lower-casing and percent-encoding act on bytes.
 * After canonicalization every byte ≥ 0x7F is percent-encoded, so the outputs are ASCII.
 *
 * The byte, percent-encoding and host steps it shares with the CDX keys live in src/url/; the
 * steps here that look like src/index/surt.ts's but differ say how.
 *
 * Pure: no I/O.
 */
import { domainToASCII } from "node:url";
import { fromBinary, lowerAscii, toBinary } from "../url/binary.js";
import { dottedQuad, reversedLabels } from "../url/host.js";
import { GOOGLE_ESCAPES, percentDecodeRepeatedly, percentEncode } from "../url/percent.js";

/** The fields of a parsed URL, as the reference keeps them (every one a binary string). */
export interface ParsedUrl {
  leadingJunk: string;
  scheme: string;
  colonAfterScheme: string;
  slashes: string;
  username: string;
  colonBeforePassword: string;
  password: string;
  atSign: string;
  host: string;
  colonBeforePort: string;
  port: string;
  path: string;
  questionMark: string;
  query: string;
  hashSign: string;
  fragment: string;
  trailingJunk: string;
  /** Numeric IPv4 value of the host, or null. */
  ip4: number | null;
  /** Normalized IPv6 text (without brackets), or null. */
  ip6: string | null;
}

/** WHATWG special schemes and their default ports (the CDX keys elide only http's and https's). */
const SPECIAL_SCHEMES: Record<string, string | null> = {
  ftp: "21",
  gopher: "70",
  http: "80",
  https: "443",
  ws: "80",
  wss: "443",
  file: null,
};
const isSpecial = (scheme: string) => Object.prototype.hasOwnProperty.call(SPECIAL_SCHEMES, scheme);

// ---------------------------------------------------------------------------------------------
// Parsing (urlcanon/parse.py).

const TAB_NL = /[\t\n\r]/g;
const URL_RE = /^(?:([a-zA-Z][^:]*)(:))?([^?#]*)(?:(\?)([^#]*))?(?:(#)([\s\S]*))?$/;
const SPECIAL_PATHISH_RE = /^([/\\\r\n\t]*)([^/\\]*)([/\\][\s\S]*)?$/;
const NONSPECIAL_PATHISH_RE = /^([\r\n\t]*(?:\/[\r\n\t]*){2})([^/]*)(\/[\s\S]*)?$/;
const FILE_PATHISH_RE = /^([\r\n\t]*(?:[/\\][\r\n\t]*){2})([^/\\]*)([/\\][\s\S]*)?$/;
const AUTHORITY_RE = /^(?:([^:]*)(?:(:)([\s\S]*))?(@))?(\[[^\]]*\]|[^:]*)(?:(:)([\s\S]*))?$/;

function emptyUrl(): ParsedUrl {
  return {
    leadingJunk: "", scheme: "", colonAfterScheme: "", slashes: "", username: "", colonBeforePassword: "",
    password: "", atSign: "", host: "", colonBeforePort: "", port: "", path: "", questionMark: "", query: "",
    hashSign: "", fragment: "", trailingJunk: "", ip4: null, ip6: null,
  };
}

function parsePathish(u: ParsedUrl, pathish: string): void {
  const cleanScheme = lowerAscii(u.scheme.replace(TAB_NL, ""));
  if (cleanScheme === "file") {
    const m = FILE_PATHISH_RE.exec(pathish);
    if (m) {
      u.slashes = m[1] ?? "";
      u.host = m[2] ?? "";
      u.path = m[3] ?? "";
    } else {
      u.path = pathish;
    }
    return;
  }
  const m = (isSpecial(cleanScheme) ? SPECIAL_PATHISH_RE : NONSPECIAL_PATHISH_RE).exec(pathish);
  if (!m) {
    u.path = pathish;
    return;
  }
  u.slashes = m[1] ?? "";
  u.path = m[3] ?? "";
  const a = AUTHORITY_RE.exec(m[2] ?? "")!;
  u.username = a[1] ?? "";
  u.colonBeforePassword = a[2] ?? "";
  u.password = a[3] ?? "";
  u.atSign = a[4] ?? "";
  u.host = a[5] ?? "";
  [u.ip4, u.ip6] = parseIpv4or6(u.host);
  u.colonBeforePort = a[6] ?? "";
  u.port = a[7] ?? "";
}

/** `urlcanon.parse_url`: never fails. */
export function parseUrl(url: string): ParsedUrl {
  const u = emptyUrl();
  let s = toBinary(url);
  const lead = /^[\x00-\x20]*/.exec(s)![0];
  u.leadingJunk = lead;
  s = s.slice(lead.length);
  const trail = /[\x00-\x20]*$/.exec(s)![0];
  u.trailingJunk = trail;
  s = s.slice(0, s.length - trail.length);
  const m = URL_RE.exec(s)!;
  u.scheme = m[1] ?? "";
  u.colonAfterScheme = m[2] ?? "";
  u.questionMark = m[4] ?? "";
  u.query = m[5] ?? "";
  u.hashSign = m[6] ?? "";
  u.fragment = m[7] ?? "";
  if (m[3]) parsePathish(u, m[3]);
  return u;
}

/** One WHATWG-style IPv4 number part, or null. */
function parseIpv4Part(s: string): number | null {
  if (s.length >= 2 && (s.startsWith("0x") || s.startsWith("0X"))) {
    if (s.length === 2) return 0;
    return /^[0-9a-fA-F]+$/.test(s.slice(2)) ? parseInt(s.slice(2), 16) : null;
  }
  if (s.length >= 2 && s.startsWith("0")) return /^[0-7]+$/.test(s.slice(1)) ? parseInt(s.slice(1), 8) : null;
  if (s.length === 0) return 0;
  return /^[0-9]+$/.test(s) ? parseInt(s, 10) : null;
}

/**
 * `urlcanon.parse_ipv4`: the numeric value of an IPv4 host in any WHATWG form, or null. Not the
 * CDX key's inet_aton (src/index/surt.ts): hex parts count here, and an all-digit host ≥ 2³²
 * stays a name instead of wrapping.
 */
export function parseIpv4(host: string): number | null {
  const parts = host.split(".");
  if (parts[parts.length - 1] === "") parts.pop();
  if (parts.length < 1 || parts.length > 4) return null;
  const n = parts.map(parseIpv4Part);
  if (n.some((x) => x === null)) return null;
  const v = n as number[];
  let ip: number;
  if (v.length === 1) ip = v[0]!;
  else if (v.length === 2) {
    if (v[1]! >= 2 ** 24) return null;
    ip = v[0]! * 2 ** 24 + v[1]!;
  } else if (v.length === 3) {
    if (v[1]! >= 2 ** 8 || v[2]! >= 2 ** 16) return null;
    ip = v[0]! * 2 ** 24 + v[1]! * 2 ** 16 + v[2]!;
  } else {
    if (v[1]! >= 256 || v[2]! >= 256 || v[3]! >= 256) return null;
    ip = v[0]! * 2 ** 24 + v[1]! * 2 ** 16 + v[2]! * 2 ** 8 + v[3]!;
  }
  return ip < 2 ** 32 ? ip : null;
}

function parseIpv6(text: string): string | null {
  if (!/^[0-9a-fA-F:.]+$/.test(text)) return null;
  try {
    const h = new URL(`http://[${text}]/`).hostname;
    return h.slice(1, -1);
  } catch {
    return null;
  }
}

/** `urlcanon.parse_ipv4or6`. */
export function parseIpv4or6(host: string): [number | null, string | null] {
  if (host.startsWith("[") && host.endsWith("]") && host.length >= 2) return [null, parseIpv6(host.slice(1, -1))];
  return [parseIpv4(host), null];
}
const isIp = (host: string) => {
  const [a, b] = parseIpv4or6(host);
  return a !== null || b !== null;
};

// ---------------------------------------------------------------------------------------------
// Canonicalization steps (urlcanon/canon.py), in `semantic` order.

function removeTabsAndNewlines(u: ParsedUrl): void {
  for (const k of [
    "leadingJunk", "scheme", "colonAfterScheme", "slashes", "username", "colonBeforePassword", "password", "atSign",
    "host", "colonBeforePort", "port", "path", "questionMark", "query", "hashSign", "fragment", "trailingJunk",
  ] as const) {
    u[k] = u[k].replace(TAB_NL, "");
  }
}

const authority = (u: ParsedUrl) => u.username + u.colonBeforePassword + u.password + u.atSign + u.host + u.colonBeforePort + u.port;

function defaultSchemeHttp(u: ParsedUrl): void {
  if (!u.scheme) {
    u.scheme = "http";
    u.colonAfterScheme = ":";
    if (u.path) parsePathish(u, u.path);
  }
}

function elideDefaultPort(u: ParsedUrl): void {
  if (isSpecial(u.scheme) && u.port === SPECIAL_SCHEMES[u.scheme]) {
    u.colonBeforePort = "";
    u.port = "";
  }
}

function cleanUpUserinfo(u: ParsedUrl): void {
  if (!u.password) {
    u.colonBeforePassword = "";
    if (!u.username) u.atSign = "";
  }
}

function twoSlashes(u: ParsedUrl): void {
  if (u.slashes || authority(u) || u.scheme === "file") u.slashes = "//";
}

function pctDecodeRepeatedlyExceptQuery(u: ParsedUrl): void {
  u.scheme = percentDecodeRepeatedly(u.scheme);
  u.username = percentDecodeRepeatedly(u.username);
  u.password = percentDecodeRepeatedly(u.password);
  u.host = percentDecodeRepeatedly(u.host);
  u.port = percentDecodeRepeatedly(u.port);
  u.path = percentDecodeRepeatedly(u.path);
  u.fragment = percentDecodeRepeatedly(u.fragment);
}

function reparseHost(u: ParsedUrl): void {
  [u.ip4, u.ip6] = parseIpv4or6(u.host);
}

function normalizeIpAddress(u: ParsedUrl): void {
  if (u.ip4 !== null) u.host = dottedQuad(u.ip4);
  else if (u.ip6 !== null) u.host = `[${u.ip6}]`;
}

/** Every run of dots collapses (`a...b` → `a.b`); Python surt's one `replace("..", ".")` pass does not. */
function fixHostDots(u: ParsedUrl): void {
  if (u.host) u.host = u.host.replace(/^\.+/, "").replace(/\.+$/, "").replace(/\.{2,}/g, ".");
}

function strictUtf8(b: string): string | null {
  try {
    return new TextDecoder("utf-8", { fatal: true }).decode(Buffer.from(b, "latin1"));
  } catch {
    return null;
  }
}

/**
 * IDNA for hosts of special schemes (`punycode_special_host`: IDNA 2008 with UTS #46 mapping,
 * falling back to IDNA 2003 per label; left alone when both fail). ASCII hosts come out
 * lower-cased; Node's WHATWG `domainToASCII` (UTS #46, non-transitional) stands in for the
 * Python `idna` package for the others. (The CDX keys use IDNA 2003 instead, Python's `idna`
 * codec, src/index/surt.ts: `straße.de` is `xn--strae-oqa.de` here and `strasse.de` there.)
 */
function punycodeHost(host: string): string {
  const text = strictUtf8(host);
  if (text === null) return host; // not UTF-8: both reference paths fail, host kept as is
  const labelsOk = (labels: string[]) => labels.every((l) => l.length > 0 && l.length < 64);
  if (/^[\x00-\x7f]*$/.test(text)) return labelsOk(text.split(".")) ? lowerAscii(text) : text;
  const whole = domainToASCII(text);
  if (whole) return whole;
  const out: string[] = [];
  for (const label of text.split(/[.\u3002\uff0e\uff61]/)) {
    if (/^[\x00-\x7f]*$/.test(label)) out.push(lowerAscii(label));
    else {
      const a = domainToASCII(label);
      if (!a || a.includes(".")) return host;
      out.push(a);
    }
  }
  return labelsOk(out) ? out.join(".") : host;
}

function punycodeSpecialHost(u: ParsedUrl): void {
  if (u.host && isSpecial(u.scheme)) u.host = punycodeHost(u.host);
}

function removeUserinfo(u: ParsedUrl): void {
  u.username = "";
  u.colonBeforePassword = "";
  u.password = "";
  u.atSign = "";
}

const LESS_DUMB_USERINFO_ENCODE = /[\x00-\x20\x7f-\xff#%:@]/g;
const LESS_DUMB_PATH_ENCODE = /[\x00-\x20\x7f-\xff#%?]/g;
const LESS_DUMB_QUERY_ENCODE = /[\x00-\x20\x7f-\xff#%&=]/g;

function lessDumbPctEncode(u: ParsedUrl): void {
  u.scheme = percentEncode(u.scheme, GOOGLE_ESCAPES);
  u.username = percentEncode(u.username, LESS_DUMB_USERINFO_ENCODE);
  u.password = percentEncode(u.password, LESS_DUMB_USERINFO_ENCODE);
  u.host = percentEncode(u.host, GOOGLE_ESCAPES);
  u.port = percentEncode(u.port, GOOGLE_ESCAPES);
  u.path = percentEncode(u.path, LESS_DUMB_PATH_ENCODE);
  u.fragment = percentEncode(u.fragment, GOOGLE_ESCAPES);
}

function lessDumbPctRecodeQuery(u: ParsedUrl): void {
  if (!u.query) return;
  u.query = u.query
    .split("&")
    .map((part) => {
      const eq = part.indexOf("=");
      const tokens = eq < 0 ? [part] : [part.slice(0, eq), part.slice(eq + 1)];
      return tokens.map((t) => percentEncode(percentDecodeRepeatedly(t), LESS_DUMB_QUERY_ENCODE)).join("=");
    })
    .join("&");
}

function fixBackslashes(u: ParsedUrl): void {
  if (isSpecial(u.scheme)) {
    u.slashes = "/".repeat(u.slashes.length);
    u.path = u.path.replace(/\\/g, "/");
  }
}

function leadingSlash(u: ParsedUrl): void {
  if (isSpecial(u.scheme) && !u.path.startsWith("/")) u.path = "/" + u.path;
}

const PATH_DOTS = /^(?:\.|%2e)(\.|%2e)?$/i;

/**
 * `resolve_path_dots`: `.` segments dropped, `..` drops the previous one (never the root). Python
 * surt's normalizePath differs: it keeps a `..` at the root and drops empty segments on the way.
 */
export function resolvePathDots(path: string, special: boolean): string {
  if (!(path.startsWith("/") || (special && path.startsWith("\\")))) return path;
  const sepRe = special ? /[/\\]/ : /\//;
  const old: string[] = [];
  let seg = "";
  for (const ch of path) {
    if (sepRe.test(ch)) {
      if (old.length > 0 || seg !== "") old.push(seg);
      old.push(ch);
      seg = "";
    } else seg += ch;
  }
  old.push(seg);
  // `old` = [sep, seg, sep, seg, …] (the path starts with a separator).
  const out: string[] = [];
  for (let i = 0; i < old.length; i++) {
    const m = i % 2 === 1 ? PATH_DOTS.exec(old[i]!) : null;
    if (m) {
      if (m[1] !== undefined) {
        if (out.length > 1) out.pop();
        if (out.length > 1) out.pop();
      }
      i++; // skip the following separator
    } else out.push(old[i]!);
  }
  return out.join("");
}

function normalizePathDots(u: ParsedUrl): void {
  u.path = resolvePathDots(u.path, isSpecial(u.scheme));
}

function collapseConsecutiveSlashes(u: ParsedUrl): void {
  if (isSpecial(u.scheme)) u.path = u.path.replace(/\/\/+/g, "/");
}

function emptyPathToSlash(u: ParsedUrl): void {
  if (!u.path && authority(u) && isSpecial(u.scheme)) u.path = "/";
}

/**
 * Byte-order sort of the whole `&`-separated parts (Python `sorted` on bytes); Python surt sorts
 * (name, value) pairs instead, so `a-b=2&a=3` here is `a=3&a-b=2` in a CDX key.
 */
function alphaReorderQuery(u: ParsedUrl): void {
  if (u.query) u.query = u.query.split("&").sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)).join("&");
}

function removeFragment(u: ParsedUrl): void {
  u.hashSign = "";
  u.fragment = "";
}

/** `urlcanon.semantic_precise` (keeps the fragment). */
export function semanticPrecise(url: string | ParsedUrl): ParsedUrl {
  const u = typeof url === "string" ? parseUrl(url) : { ...url };
  u.leadingJunk = "";
  u.trailingJunk = "";
  defaultSchemeHttp(u);
  removeTabsAndNewlines(u);
  u.scheme = lowerAscii(u.scheme);
  elideDefaultPort(u);
  cleanUpUserinfo(u);
  twoSlashes(u);
  pctDecodeRepeatedlyExceptQuery(u);
  reparseHost(u);
  normalizeIpAddress(u);
  fixHostDots(u);
  punycodeSpecialHost(u);
  removeUserinfo(u);
  lessDumbPctEncode(u);
  lessDumbPctRecodeQuery(u);
  fixBackslashes(u);
  leadingSlash(u);
  normalizePathDots(u);
  collapseConsecutiveSlashes(u);
  emptyPathToSlash(u);
  alphaReorderQuery(u);
  return u;
}

/** `urlcanon.semantic`: semantic_precise, then the fragment removed. */
export function semantic(url: string | ParsedUrl): ParsedUrl {
  const u = semanticPrecise(url);
  removeFragment(u);
  return u;
}

// ---------------------------------------------------------------------------------------------
// Output forms.

/** The URL text (`ParsedUrl.__bytes__`). */
export function formatUrl(u: ParsedUrl): string {
  return fromBinary(
    u.leadingJunk + u.scheme + u.colonAfterScheme + u.slashes + authority(u) + u.path + u.questionMark + u.query +
      u.hashSign + u.fragment + u.trailingJunk,
  );
}

/** `urlcanon.reverse_host`: `x,y.b.c` → `c,b,x.y,` (a label's comma becomes a dot; Python surt keeps it). */
export function reverseHost(host: string, trailingComma = true): string {
  const parts = reversedLabels(host).map((p) => p.replace(/,/g, "."));
  if (trailingComma) parts.push("");
  return parts.join(",");
}

/** `urlcanon.ssurt_host`: reversed unless an IP address (an IPv4 value 0 counts as a name: reference quirk). */
export function ssurtHost(host: string, trailingComma = true): string {
  if (!host || host.startsWith("[") || parseIpv4(host)) return host;
  return reverseHost(host, trailingComma);
}

/** `ParsedUrl.surt()`: `http://(com,example,)/fuh/`, port inside: `http://(com,example:8080,)/`. */
export function surtOf(u: ParsedUrl): string {
  let r = u.leadingJunk + u.scheme + u.colonAfterScheme + u.slashes;
  if (u.host) r += "(" + ssurtHost(u.host, false) + u.colonBeforePort + u.port + ",)";
  r += u.path + u.questionMark + u.query + u.hashSign + u.fragment + u.trailingJunk;
  return fromBinary(r);
}

/** `ParsedUrl.ssurt()`: `com,example,//http:/path`, with a port `com,example,//8080:http:/path`. */
export function ssurtOf(u: ParsedUrl): string {
  return fromBinary(
    u.leadingJunk + ssurtHost(u.host) + u.slashes + u.port + u.colonBeforePort + u.scheme + u.atSign + u.username +
      u.colonBeforePassword + u.password + u.colonAfterScheme + u.path + u.questionMark + u.query + u.hashSign +
      u.fragment + u.trailingJunk,
  );
}

/** `urlcanon.normalize_host`: what `semantic` does to a host (for rule domains and tally domains). */
export function normalizeHost(host: string): string {
  const u = emptyUrl();
  u.scheme = "http";
  u.host = percentDecodeRepeatedly(toBinary(host));
  reparseHost(u);
  normalizeIpAddress(u);
  fixHostDots(u);
  punycodeSpecialHost(u);
  return fromBinary(percentEncode(u.host, GOOGLE_ESCAPES));
}

/**
 * `urlcanon.host_matches_domain` (no normalization: pass normalized values): equal, or a
 * subdomain; an IP address only matches itself.
 */
export function hostMatchesDomain(host: string, domain: string): boolean {
  if (domain === host) return true;
  if (isIp(domain) || isIp(host)) return false;
  return reverseHost(host).startsWith(reverseHost(domain));
}

/** The semantically canonicalized host of `url` (ASCII). */
export function semanticHost(url: string): string {
  return fromBinary(semantic(url).host);
}
