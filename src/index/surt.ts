/**
 * SURT index keys (issue "CDXJ index"; cdxj-and-surt.md §1): the key webrecorder's cdxj-indexer
 * writes for a capture, i.e. `surt.surt(url)` of the Python `surt` 0.3.1 package with default
 * options. Replay tools compute their lookup keys with that same code, so every quirk is kept
 * (decimal all-digit hosts, `?&x=1` after a session id, `..` kept at the root): a "nicer" key
 * would never be found.
 *
 * The reference works on the UTF-8 bytes of the URL. Here the bytes are held in a "binary
 * string" (one char per byte, 0–255) so the reference's byte regexes apply unchanged; every byte
 * ≥ 0x80 is percent-encoded by the time the key is assembled, so keys are ASCII.
 *
 * Pure: no I/O. (The reference sends numeric hosts such as `127.1` through the resolver; glibc
 * answers those with inet_aton, which is what is done here.)
 *
 * The byte, percent-encoding and host steps it shares with warcprox's urlcanon rules live in
 * src/url/; the steps that stay here are where Python `surt` differs from urlcanon (each says how).
 */
import { fromBinary, lowerAscii, toBinary } from "../url/binary.js";
import { dottedQuad, joinReversedLabels } from "../url/host.js";
import { GOOGLE_ESCAPES, percentDecodeRepeatedly, percentEncode } from "../url/percent.js";

/** The key of `url`: `-` when there is none, the URL itself when the reference would fail. */
export function surt(url: string | null | undefined): string {
  if (!url) return "-";
  const plain = plainHttpKey(url);
  if (plain !== null) return plain;
  if (url.startsWith("filedesc")) return url;
  try {
    return surtBytes(toBinary(url));
  } catch {
    // cdxj-indexer's get_url_key: any exception from surt gives the raw URL as the key.
    return url;
  }
}

/** A parsed URL (the reference's `handyurl`): every part a binary string, null when absent. */
interface Url {
  scheme: string;
  host: string | null;
  port: number | null;
  path: string | null;
  query: string | null;
}

class SurtError extends Error {}

function surtBytes(raw: string): string {
  const u = parse(raw);
  canonicalizeGoogle(u);
  canonicalizeIA(u);
  return format(u);
}

// ---------------------------------------------------------------------------------------------
// Fast path: most URLs a crawl meets are "plain", and for those parse and the first pass give
// back the URL's own parts; only the second pass and the output (shared below) change anything.

/**
 * The key of a plain URL, else null (the full algorithm then decides). Plain: `http://` or
 * `https://` in lower case; a host of ASCII letters, digits, `-` and `.` without an empty label
 * (all digits and dots only as a canonical dotted quad, which the IPv4 step gives back as is); a
 * port 1–65535 without leading zero; then, up to any `#`, printable ASCII (nothing to strip) whose
 * escapes all come back from decoding and escaping as they were (isKeptEscape), with a path that
 * has no empty, `.` or `..` segment (nothing to normalize; decoded bytes are never `/` or `.`).
 */
function plainHttpKey(url: string): string | null {
  const scheme = url.startsWith("http://") ? "http" : url.startsWith("https://") ? "https" : null;
  if (scheme === null) return null;
  const hostStart = scheme.length + 3;
  const n = url.length;
  let i = hostStart;
  let named = false; // a letter or `-`: not an IPv4 form
  for (; i < n; i++) {
    const c = url.charCodeAt(i);
    if ((c >= 0x61 && c <= 0x7a) || (c >= 0x41 && c <= 0x5a) || c === 0x2d) named = true;
    else if (!((c >= 0x30 && c <= 0x39) || c === 0x2e)) break;
  }
  const host = url.slice(hostStart, i);
  if (host === "" || host.startsWith(".") || host.endsWith(".") || host.includes("..")) return null;
  if (!named && !RE_CANONICAL_QUAD.test(host)) return null;
  let port: number | null = null;
  if (url.charCodeAt(i) === 0x3a) {
    // 1 to 5 digits, no leading zero (read here, not with a regex on a slice).
    const first = url.charCodeAt(i + 1);
    if (!(first >= 0x31 && first <= 0x39)) return null;
    let p = first - 0x30;
    let j = i + 2;
    for (; j < i + 6 && j < n; j++) {
      const c = url.charCodeAt(j);
      if (c < 0x30 || c > 0x39) break;
      p = p * 10 + (c - 0x30);
    }
    if (p > 65535) return null;
    port = p;
    i = j;
  }
  // The netloc ends at `/`, `?`, `#` or the end; `user@`, `[v6]`, `_`, `%`… are not plain.
  let query = -1;
  let end = i;
  for (; end < n; end++) {
    const c = url.charCodeAt(end);
    if (c === 0x23) break; // the fragment is dropped, whatever it holds
    if (end === i && c !== 0x2f && c !== 0x3f) return null;
    if (c < 0x21 || c > 0x7e) return null;
    if (c === 0x25) {
      if (!isKeptEscape(url, end)) return null;
      end += 2;
    } else if (c === 0x3f && query < 0) query = end;
  }
  const path = url.slice(i, query < 0 ? end : query) || "/";
  if (path.includes("//") || RE_DOT_SEGMENT.test(path)) return null;
  const u: Url = { scheme, host: lowerAscii(host), port, path, query: query < 0 ? null : url.slice(query + 1, end) || null };
  canonicalizeIA(u);
  return format(u);
}

const RE_DOT_SEGMENT = /\/\.\.?(?:\/|$)/;

/**
 * `%XX` at `at` stands for a byte the first pass escapes again (a control, space, `#`, beyond
 * ASCII): decoding and escaping give it back, upper-cased, and the second pass lower-cases path
 * and query anyway. Other escapes (`%2F`, `%41`, `%25`…) decode to something else: not plain.
 */
function isKeptEscape(url: string, at: number): boolean {
  const hex = url.slice(at + 1, at + 3);
  if (!/^[0-9a-fA-F]{2}$/.test(hex)) return false;
  const byte = parseInt(hex, 16);
  return byte <= 0x20 || byte >= 0x7f || byte === 0x23;
}

/** `a.b.c.d`, each 0–255 without leading zero: what attemptIPFormats gives back unchanged. */
const RE_CANONICAL_QUAD = /^(?:(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\.){3}(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])$/;

// ---------------------------------------------------------------------------------------------
// A. Parse (handyurl.parse on top of Python's urlsplit and its netloc properties).

const RE_HAS_SCHEME = /^[a-zA-Z][a-zA-Z0-9+\-.]*:/;
const RE_MULTIPLE_PROTOCOLS = /^(https?:\/\/)+/;

function parse(input: string): Url {
  // bytes.strip() strips ASCII whitespace; TAB, CR and LF inside are deleted too.
  let s = input.replace(/^[ \t\n\r\x0b\x0c]+|[ \t\n\r\x0b\x0c]+$/g, "").replace(/[\t\r\n]/g, "");
  if (s === "") throw new SurtError("empty URL"); // the reference fails on a scheme-less empty URL
  if (!RE_HAS_SCHEME.test(s)) s = "http://" + s;
  // `http://https://x/` → `https://x/`: the last of a run of leading http(s):// prefixes wins.
  s = s.replace(RE_MULTIPLE_PROTOCOLS, "$1");

  const colon = s.indexOf(":");
  const scheme = s.slice(0, colon); // case kept: `Example.COM:8080/Path` → `Example.COM:8080/path`
  let rest = s.slice(colon + 1);
  let netloc = "";
  if (rest.startsWith("//")) {
    const m = /[/?#]/.exec(rest.slice(2));
    const end = m ? m.index + 2 : rest.length;
    netloc = rest.slice(2, end);
    rest = rest.slice(end);
  }
  const hashAt = rest.indexOf("#");
  if (hashAt >= 0) rest = rest.slice(0, hashAt); // the fragment is dropped anyway
  let query: string | null = null;
  const q = rest.indexOf("?");
  if (q >= 0) {
    query = rest.slice(q + 1) || null;
    rest = rest.slice(0, q);
  }
  let path: string | null = rest || null;

  const { hostname, port } = splitNetloc(netloc.replace(/:+$/, ""));
  let host = hostname;
  if (scheme.startsWith("http") && host === null && path !== null) {
    // `http:////www.example.com/`, `http:example.com/a`: the first path segment is the host.
    const p = path.replace(/^\/+/, "");
    const slash = p.indexOf("/");
    host = slash < 0 ? p : p.slice(0, slash);
    path = "/" + (slash < 0 ? "" : p.slice(slash + 1));
  }
  return { scheme, host, port, path, query };
}

/** Python's SplitResult.hostname / .port: userinfo dropped, brackets removed, host lower-cased. */
function splitNetloc(netloc: string): { hostname: string | null; port: number | null } {
  const hostinfo = netloc.slice(netloc.lastIndexOf("@") + 1);
  let hostname: string;
  let portText: string;
  const br = hostinfo.indexOf("[");
  if (br >= 0) {
    const bracketed = hostinfo.slice(br + 1);
    const close = bracketed.indexOf("]");
    hostname = close < 0 ? bracketed : bracketed.slice(0, close);
    const after = close < 0 ? "" : bracketed.slice(close + 1);
    const c = after.indexOf(":");
    portText = c < 0 ? "" : after.slice(c + 1);
  } else {
    const c = hostinfo.indexOf(":");
    hostname = c < 0 ? hostinfo : hostinfo.slice(0, c);
    portText = c < 0 ? "" : hostinfo.slice(c + 1);
  }
  let port: number | null = null;
  if (portText !== "") {
    if (!/^[0-9]+$/.test(portText)) throw new SurtError(`port ${portText}`);
    port = Number(portText);
    if (port > 65535) throw new SurtError(`port ${portText} out of range`);
    if (port === 0) port = null; // `o.port or None`
  }
  return { hostname: hostname === "" ? null : lowerAscii(hostname), port };
}

// ---------------------------------------------------------------------------------------------
// B. First pass (GoogleURLCanonicalizer): decode, IDNA, IPv4 forms, dot segments, escape once.

function canonicalizeGoogle(u: Url): void {
  if (u.query) u.query = escapeOnce(percentDecodeRepeatedly(u.query));
  if (u.host) u.host = canonicalHost(u.host);
  let path = u.path === null ? null : percentDecodeRepeatedly(u.path);
  // Only a URL with a host has a hierarchical path; `urn:`, `mailto:`… keep theirs as it is.
  if (u.host) path = normalizePath(path);
  u.path = path === null ? null : escapeOnce(path);
}

function canonicalHost(host: string): string {
  let h = percentDecodeRepeatedly(host);
  if (/[\x80-\xff]/.test(h)) {
    const text = decodeUtf8Ignore(h);
    const ascii = idnaToAscii(text);
    // IDNA failed: the reference keeps the decoded text, lower-cases and escapes its UTF-8.
    h = ascii ?? toBinary(text.toLowerCase());
  }
  // One non-overlapping pass, as Python's `replace("..", ".")`: `a...b` keeps `a..b` (urlcanon's
  // fix_host_dots collapses every run of dots, so the two cannot share this step).
  h = h.replaceAll("..", ".").replace(/^\.+|\.+$/g, "");
  return attemptIPFormats(h) ?? escapeOnce(lowerAscii(h));
}

/**
 * `/a/./b/../c//d/` → `/a/c/d/` (the reference's normalizePath; a `..` at the root is kept).
 * Not urlcanon's resolvePathDots: that one drops a `..` at the root, knows `%2e`, treats `\\` as a
 * separator and leaves `//` to a later step; keys must be what replay tools compute, quirks included.
 */
function normalizePath(path: string | null): string {
  if (!path) return "/";
  const kept: string[] = [];
  const segs = path.split("/");
  for (let i = 1; i < segs.length; i++) {
    const p = segs[i]!;
    if (p === ".") continue;
    if (p === "..") {
      if (kept.length > 0) kept.pop();
      else kept.push(p);
    } else kept.push(p);
  }
  let out = "/";
  for (let i = 0; i < kept.length - 1; i++) if (kept[i] !== "") out += kept[i] + "/";
  if (kept.length > 0) out += kept[kept.length - 1];
  return out;
}

const RE_OCTAL_IP = /^(0[0-7]*)(\.[0-7]+)?(\.[0-7]+)?(\.[0-7]+)?$/;
const RE_DECIMAL_IP = /^([1-9][0-9]*)(\.[0-9]+)?(\.[0-9]+)?(\.[0-9]+)?$/;

/**
 * Dotted IPv4 for an all-digit host (decimal, low 32 bits) or an inet_aton form; else null.
 * Not urlcanon's WHATWG parse_ipv4: no hex parts (`0x7f.1` stays a name here) and an all-digit
 * host ≥ 2³² wraps instead of staying a name.
 */
function attemptIPFormats(host: string): string | null {
  if (/^[0-9]+$/.test(host)) return dottedQuad(Number(BigInt(host) & 0xffffffffn));
  if (RE_DECIMAL_IP.test(host) || RE_OCTAL_IP.test(host)) {
    const n = inetAton(host);
    return n === null ? null : dottedQuad(n);
  }
  return null;
}

/** glibc inet_aton for digit-and-dot text: parts with a leading 0 are octal; the last fills the rest. */
function inetAton(s: string): number | null {
  const parts = s.split(".");
  if (parts.length > 4) return null;
  const vals: number[] = [];
  for (const p of parts) {
    if (p === "" || (p.length > 1 && p[0] === "0" && /[89]/.test(p))) return null;
    const v = p.length > 1 && p[0] === "0" ? parseInt(p, 8) : Number(p);
    if (!Number.isSafeInteger(v)) return null;
    vals.push(v);
  }
  const last = vals.pop()!;
  if (vals.some((v) => v > 255)) return null;
  const room = 2 ** (8 * (4 - vals.length));
  if (last >= room) return null;
  let n = 0;
  for (const v of vals) n = n * 256 + v;
  return n * room + last;
}

// ---------------------------------------------------------------------------------------------
// C. Second pass (IAURLCanonicalizer).

const RE_WWW = /^www\d*\./;
const RES_PATH_SESSIONID = [
  /^(.*\/)(\((?:[a-z]\([0-9a-z]{24}\))+\)\/)([^?]+\.aspx.*)$/i,
  /^(.*\/)(\([0-9a-z]{24}\)\/)([^?]+\.aspx.*)$/i,
];
const RES_QUERY_SESSIONID = [
  /^(.*)(?:jsessionid=[0-9a-zA-Z]{32})(?:&(.*))?$/i,
  /^(.*)(?:phpsessid=[0-9a-zA-Z]{32})(?:&(.*))?$/i,
  /^(.*)(?:sid=[0-9a-zA-Z]{32})(?:&(.*))?$/i,
  /^(.*)(?:ASPSESSIONID[a-zA-Z]{8}=[a-zA-Z]{24})(?:&(.*))?$/i,
  /^(.*)(?:cfid=[^&]+&cftoken=[^&]+)(?:&(.*))?$/i,
];

function canonicalizeIA(u: Url): void {
  if (u.host) {
    u.host = lowerAscii(u.host);
    if (u.scheme !== "dns") u.host = u.host.replace(RE_WWW, "");
  }
  if (u.port !== null && u.port === defaultPort(u.scheme)) u.port = null;
  let path = u.path;
  if (path) {
    path = lowerAscii(path);
    // Both patterns need a `(`: most paths are spared two backtracking regexes.
    if (path.includes("(")) {
      for (const re of RES_PATH_SESSIONID) {
        const m = re.exec(path);
        if (m) path = m[1]! + m[3]!;
      }
    }
    if (path.length > 1 && path.endsWith("/")) path = path.slice(0, -1);
  }
  u.path = path;
  if (u.query) {
    let q = u.query;
    const lower = lowerAscii(q);
    if (mayHoldSessionId(lower)) {
      for (const re of RES_QUERY_SESSIONID) {
        const m = re.exec(q);
        if (m) q = m[1]! + (m[2] ?? "");
      }
    }
    q = alphaReorderQuery(q === u.query ? lower : lowerAscii(q));
    u.query = q === "" ? null : q;
  }
}

/**
 * Whether a (lower-cased) query may match one of RES_QUERY_SESSIONID: each needs `sessionid`
 * (jsessionid=, ASPSESSIONID…), `sid=` (phpsessid=, sid=) or `cfid=` (matched without case,
 * and only ASCII letters fold).
 */
const mayHoldSessionId = (lower: string): boolean => lower.includes("sessionid") || lower.includes("sid=") || lower.includes("cfid=");

/** Only http and https (case-insensitive), unlike urlcanon's table of special schemes (ftp, ws…). */
function defaultPort(scheme: string): number {
  const s = scheme.toLowerCase();
  return s === "http" ? 80 : s === "https" ? 443 : 0;
}

/**
 * Sort `name=value` parameters as Python sorts their (name, value) tuples: a bare name first.
 * (urlcanon sorts the whole `&`-parts as bytes: `a-b=2` before `a=3`, where this puts `a=3` first.)
 */
export function alphaReorderQuery(q: string): string {
  if (q.length <= 1 || !q.includes("&")) return q; // one parameter: nothing to sort
  const parts = q.split("&").map((a) => {
    const i = a.indexOf("=");
    return i < 0 ? { name: a, value: null } : { name: a.slice(0, i), value: a.slice(i + 1) };
  });
  parts.sort((a, b) => {
    if (a.name !== b.name) return a.name < b.name ? -1 : 1;
    if (a.value === b.value) return 0;
    if (a.value === null) return -1;
    if (b.value === null) return 1;
    return a.value < b.value ? -1 : 1;
  });
  return parts.map((p) => (p.value === null ? p.name : `${p.name}=${p.value}`)).join("&");
}

// ---------------------------------------------------------------------------------------------
// D. Output.

function format(u: Url): string {
  let s: string;
  if (u.host) {
    // A comma inside a label stays a comma (urlcanon's reverseHost makes it a dot).
    s = joinReversedLabels(u.host, ",") + (u.port !== null ? `:${u.port}` : "") + ")";
  } else {
    s = u.scheme + ":"; // no host: `dns:…`, `urn:…`, `mailto:…` keep their scheme
  }
  if (u.path) s += u.path;
  else if (u.query !== null) s += "/";
  if (u.query !== null) s += "?" + u.query;
  return fromBinary(s);
}

// ---------------------------------------------------------------------------------------------
// Escaping and UTF-8 on binary strings (the steps shared with urlcanon are in src/url/).

/** The reference's escapeOnce: `quote(s, safe)`, i.e. the Google escape set (src/url/percent.ts). */
const escapeOnce = (s: string) => percentEncode(s, GOOGLE_ESCAPES);

/**
 * Decode UTF-8 dropping invalid bytes (Python `decode('utf-8', 'ignore')`). urlcanon decodes
 * strictly instead and keeps the host's bytes when they are not UTF-8.
 */
function decodeUtf8Ignore(bin: string): string {
  const b = Buffer.from(bin, "latin1");
  let out = "";
  let i = 0;
  while (i < b.length) {
    const c = b[i]!;
    if (c < 0x80) {
      out += String.fromCharCode(c);
      i++;
      continue;
    }
    const n = c >= 0xc2 && c <= 0xdf ? 1 : c >= 0xe0 && c <= 0xef ? 2 : c >= 0xf0 && c <= 0xf4 ? 3 : -1;
    if (n < 0) {
      i++;
      continue;
    }
    // Second byte bounds exclude overlongs, surrogates and code points beyond U+10FFFF.
    const lo = c === 0xe0 ? 0xa0 : c === 0xf0 ? 0x90 : 0x80;
    const hi = c === 0xed ? 0x9f : c === 0xf4 ? 0x8f : 0xbf;
    let cp = c & (0x3f >> n);
    let k = 1;
    for (; k <= n; k++) {
      const d = b[i + k];
      if (d === undefined || d < (k === 1 ? lo : 0x80) || d > (k === 1 ? hi : 0xbf)) break;
      cp = (cp << 6) | (d & 0x3f);
    }
    if (k <= n) {
      i += k; // the maximal invalid subpart is dropped
      continue;
    }
    out += String.fromCodePoint(cp);
    i += n + 1;
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// IDNA 2003 ToASCII (Python's `str.encode('idna')`), used only for hosts with non-ASCII bytes.
// Not urlcanon's IDNA 2008 / UTS #46 (Node's domainToASCII there): `straße.de` is `strasse.de`
// here and `xn--strae-oqa.de` there.

const IDNA_DOTS = /[.\u3002\uff0e\uff61]/;
/** RFC 3454 table B.1: mapped to nothing by nameprep. */
const NAMEPREP_B1 = /[\u00ad\u034f\u1806\u180b-\u180d\u200b-\u200d\u2060\ufe00-\ufe0f\ufeff]/g;

/** The ASCII form of a host name, or null where Python's idna codec raises. */
export function idnaToAscii(name: string): string | null {
  if (name === "") return "";
  const labels = name.split(IDNA_DOTS);
  let trailingDot = "";
  if (labels.length > 1 && labels[labels.length - 1] === "") {
    labels.pop();
    trailingDot = ".";
  }
  const out: string[] = [];
  for (const label of labels) {
    const a = labelToAscii(label);
    if (a === null) return null;
    out.push(a);
  }
  return out.join(".") + trailingDot;
}

function labelToAscii(label: string): string | null {
  const ok = (s: string) => (s.length > 0 && s.length < 64 ? s : null);
  if (/^[\x00-\x7f]*$/.test(label)) return ok(label);
  // Nameprep, approximately: map-to-nothing, case folding, NFKC (no prohibited/bidi checks).
  const prepped = label.replace(NAMEPREP_B1, "").toLowerCase().replace(/ß/g, "ss").replace(/ς/g, "σ").normalize("NFKC");
  if (/^[\x00-\x7f]*$/.test(prepped)) return ok(prepped);
  if (prepped.toLowerCase().startsWith("xn--")) return null;
  return ok("xn--" + punycodeEncode(prepped));
}

/** RFC 3492 Punycode encoder. */
export function punycodeEncode(input: string): string {
  const base = 36;
  const tMin = 1;
  const tMax = 26;
  const cps = Array.from(input, (c) => c.codePointAt(0)!);
  let out = cps.filter((c) => c < 0x80).map((c) => String.fromCharCode(c)).join("");
  const basic = out.length;
  let h = basic;
  if (basic > 0) out += "-";
  let n = 0x80;
  let delta = 0;
  let bias = 72;
  const digit = (d: number) => String.fromCharCode(d < 26 ? 97 + d : 22 + d);
  const adapt = (d: number, numPoints: number, first: boolean) => {
    d = first ? Math.floor(d / 700) : d >> 1;
    d += Math.floor(d / numPoints);
    let k = 0;
    while (d > ((base - tMin) * tMax) >> 1) {
      d = Math.floor(d / (base - tMin));
      k += base;
    }
    return k + Math.floor(((base - tMin + 1) * d) / (d + 38));
  };
  while (h < cps.length) {
    const m = Math.min(...cps.filter((c) => c >= n));
    delta += (m - n) * (h + 1);
    n = m;
    for (const c of cps) {
      if (c < n) delta++;
      if (c !== n) continue;
      let q = delta;
      for (let k = base; ; k += base) {
        const t = k <= bias ? tMin : k >= bias + tMax ? tMax : k - bias;
        if (q < t) break;
        out += digit(t + ((q - t) % (base - t)));
        q = Math.floor((q - t) / (base - t));
      }
      out += digit(q);
      bias = adapt(delta, h + 1, h === basic);
      delta = 0;
      h++;
    }
    delta++;
    n++;
  }
  return out;
}
