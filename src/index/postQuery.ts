/**
 * The query string a POST/PUT request body contributes to its response's index key
 * (cdxj-and-surt.md §4; cdxj-indexer's `postquery.py` with `--post-append`). Pure.
 *
 * Python semantics are mimicked where they show in the output: `unquote_plus` with U+FFFD for
 * bad UTF-8, `quote_plus`/`urlencode`, `json.loads` and `str()` of its values (`True`, `None`,
 * `1.0`), lengths in code points.
 */

/** Q is cut to this many characters (code points). */
export const MAX_QUERY_LENGTH = 4096;

export interface MethodQuery {
  /** The `requestBody` value: null when the request's Content-Length does not parse. */
  query: string | null;
  /** Appended to the target URI before the SURT: `?__wb_method=POST&a=1` or `&__wb_method=…`. */
  append: string;
}

/**
 * `append_method_query`: the method always goes into the key; a body only for POST/PUT, compared
 * case-sensitively as the reference does (a lower-case `post` keeps its body out of the key).
 */
export function methodQuery(method: string, contentType: string | null, contentLength: string | null, body: Uint8Array, url: string): MethodQuery {
  const query = method === "POST" || method === "PUT" ? queryFromBody(contentType, contentLength, body) : "";
  let append = (url.includes("?") ? "&" : "?") + "__wb_method=" + method;
  if (query) append += "&" + query;
  return { query, append };
}

/** `query_extract`: the body (already de-chunked and decoded) as a query string by its type. */
export function queryFromBody(contentType: string | null, contentLength: string | null, body: Uint8Array): string | null {
  const len = parsePythonInt(contentLength);
  if (len === null) return null; // int() failed on a present Content-Length
  const data = Buffer.from(body.subarray(0, Math.max(0, len)));
  const mime = contentType ?? "";
  let query: string;
  if (mime.startsWith("application/x-www-form-urlencoded")) {
    const text = decodeUtf8Strict(data);
    query = text === null ? binaryQuery(data) : unquotePlus(text);
  } else if (mime.startsWith("multipart/")) {
    const parts = mime.split("boundary=");
    query = parts.length < 2 ? binaryQuery(data) : urlencode(parseMultipart(data, parts[1]!));
  } else if (mime.startsWith("application/json")) {
    query = jsonQuery(data) ?? "";
  } else if (mime.startsWith("text/plain")) {
    query = jsonQuery(data) ?? binaryQuery(data);
  } else {
    query = binaryQuery(data);
  }
  return query ? cutCodePoints(query, MAX_QUERY_LENGTH) : query;
}

/** Python `int(text)` for a header value; absent → 8192 (the reference's default read size). */
function parsePythonInt(v: string | null): number | null {
  if (v === null) return 8192;
  const m = /^\s*([+-]?)(\d+(?:_\d+)*)\s*$/.exec(v);
  if (!m) return null;
  const n = Number(m[2]!.replaceAll("_", ""));
  return m[1] === "-" ? -n : n;
}

function binaryQuery(data: Buffer): string {
  return "__wb_post_data=" + data.toString("base64");
}

function cutCodePoints(s: string, n: number): string {
  if (s.length <= n) return s;
  return Array.from(s).slice(0, n).join("");
}

const STRICT = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });
const LENIENT = new TextDecoder("utf-8", { fatal: false, ignoreBOM: true });

function decodeUtf8Strict(b: Uint8Array): string | null {
  try {
    return STRICT.decode(b);
  } catch {
    return null;
  }
}

/** Python's `unquote_plus`: `+` → space; `%XX` runs decoded as UTF-8 with U+FFFD for bad bytes. */
export function unquotePlus(s: string): string {
  s = s.replaceAll("+", " ");
  if (!s.includes("%")) return s;
  // Only ASCII runs are unquoted (non-ASCII characters pass through), as in CPython.
  return s.replace(/[\x00-\x7f]+/g, (run) => {
    if (!run.includes("%")) return run;
    const bytes: number[] = [];
    for (let i = 0; i < run.length; i++) {
      if (run[i] === "%" && /^[0-9a-fA-F]{2}$/.test(run.slice(i + 1, i + 3))) {
        bytes.push(parseInt(run.slice(i + 1, i + 3), 16));
        i += 2;
      } else bytes.push(run.charCodeAt(i));
    }
    return LENIENT.decode(Uint8Array.from(bytes));
  });
}

/** Python's `quote_plus(s, safe='')`: UTF-8, letters digits `_.-~` kept, space → `+`. */
export function quotePlus(v: string | Uint8Array): string {
  const b = typeof v === "string" ? Buffer.from(v, "utf8") : v;
  let out = "";
  for (const c of b) {
    if ((c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a) || c === 0x5f || c === 0x2e || c === 0x2d || c === 0x7e) out += String.fromCharCode(c);
    else if (c === 0x20) out += "+";
    else out += "%" + c.toString(16).toUpperCase().padStart(2, "0");
  }
  return out;
}

/** `urlencode(pairs)`; a null name is Python's `None`. */
function urlencode(pairs: Array<[string | null, string | Uint8Array]>): string {
  return pairs.map(([k, v]) => `${quotePlus(k ?? "None")}=${quotePlus(v)}`).join("&");
}

// ---------------------------------------------------------------------------------------------
// multipart/form-data: (name, value) of every part; file parts keep their raw bytes.

function parseMultipart(data: Buffer, boundary: string): Array<[string | null, string | Uint8Array]> {
  const out: Array<[string | null, string | Uint8Array]> = [];
  const delim = Buffer.from("--" + boundary, "latin1");
  let pos = data.indexOf(delim);
  while (pos >= 0) {
    let start = pos + delim.length;
    if (data.subarray(start, start + 2).toString("latin1") === "--") break; // closing delimiter
    if (data[start] === 0x0d) start++;
    if (data[start] === 0x0a) start++;
    const next = data.indexOf(delim, start);
    if (next < 0) break;
    let end = next;
    if (data[end - 1] === 0x0a) end--;
    if (data[end - 1] === 0x0d) end--;
    const part = parsePart(data.subarray(start, Math.max(start, end)));
    if (part) out.push(part);
    pos = next;
  }
  return out;
}

function parsePart(p: Buffer): [string | null, string | Uint8Array] | null {
  let sep = p.indexOf("\r\n\r\n");
  let sepLen = 4;
  if (sep < 0) {
    sep = p.indexOf("\n\n");
    sepLen = 2;
  }
  if (sep < 0) return null;
  const head = p.subarray(0, sep).toString("utf8");
  const body = p.subarray(sep + sepLen);
  const disp = /^content-disposition:(.*)$/im.exec(head)?.[1] ?? "";
  const name = dispositionParam(disp, "name");
  const filename = dispositionParam(disp, "filename");
  if (filename) return [name, body];
  return [name, LENIENT.decode(body)];
}

function dispositionParam(disp: string, key: string): string | null {
  const re = new RegExp(`(?:^|;)\\s*${key}=(?:"((?:[^"\\\\]|\\\\.)*)"|([^;]*))`, "i");
  const m = re.exec(disp);
  if (!m) return null;
  return m[1] !== undefined ? m[1].replace(/\\(.)/g, "$1") : m[2]!.trim();
}

// ---------------------------------------------------------------------------------------------
// JSON bodies: every scalar leaf as `name=str(value)`, duplicates as `name.2_`, `name.3_`…

/** `json_parse`, or null where the reference raises (then the caller falls back). */
function jsonQuery(data: Buffer): string | null {
  const fields = new Map<string, string>();
  const dupes = new Map<string, number>();
  const keyFor = (n: string) => {
    if (!fields.has(n)) return n;
    const d = (dupes.get(n) ?? 1) + 1;
    dupes.set(n, d);
    return `${n}.${d}_`;
  };
  const walk = (v: PyJson, name: string) => {
    if (v.t === "obj") for (const [k, x] of v.v) walk(x, k);
    else if (v.t === "arr") for (const x of v.v) walk(x, name);
    else if (name) fields.set(keyFor(name), pyStr(v));
  };
  try {
    const text = decodeJsonBytes(data);
    let parsed: PyJson[];
    try {
      parsed = [parsePyJson(text)];
    } catch (e) {
      // The reference retries line by line (JSON Lines) when the body has a newline.
      if (!data.includes(0x0a)) throw e;
      parsed = text.split("\n").map(parsePyJson);
    }
    for (const p of parsed) walk(p, "");
    // A lone surrogate (`"\ud800"`) cannot be UTF-8 encoded: Python's urlencode raises.
    if ([...fields].some(([k, v]) => LONE_SURROGATE.test(k) || LONE_SURROGATE.test(v))) return null;
    return urlencode([...fields].map(([k, v]) => [k, v]));
  } catch {
    return null;
  }
}

const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/** `json.loads(bytes)` decoding: UTF-8 (a BOM is dropped); bad UTF-8 raises. */
function decodeJsonBytes(data: Buffer): string {
  const b = data[0] === 0xef && data[1] === 0xbb && data[2] === 0xbf ? data.subarray(3) : data;
  const s = decodeUtf8Strict(b);
  if (s === null) throw new Error("invalid UTF-8");
  return s;
}

type PyJson =
  | { t: "obj"; v: Map<string, PyJson> }
  | { t: "arr"; v: PyJson[] }
  | { t: "str"; v: string }
  | { t: "num"; v: string }
  | { t: "lit"; v: "True" | "False" | "None" | "nan" | "inf" | "-inf" };

/** Python's `str()` of a decoded JSON scalar. */
function pyStr(v: PyJson): string {
  if (v.t === "str" || v.t === "lit") return v.v;
  if (v.t === "num") return pyNumberStr(v.v);
  throw new Error("not a scalar");
}

/** `str(int(t))` or `str(float(t))` for a JSON number token. */
export function pyNumberStr(t: string): string {
  if (!/[.eE]/.test(t)) return t === "-0" ? "0" : t; // Python ints are exact: keep the digits
  const x = Number(t);
  if (x === Infinity) return "inf";
  if (x === -Infinity) return "-inf";
  if (x === 0) return t.startsWith("-") ? "-0.0" : "0.0";
  // repr(float): shortest round-trip digits, fixed notation for 1e-4 <= |x| < 1e16.
  const [mant, expText] = Math.abs(x).toExponential().split("e") as [string, string];
  const digits = mant.replace(".", "");
  const exp = Number(expText);
  const sign = x < 0 ? "-" : "";
  if (exp >= -4 && exp < 16) {
    if (exp < 0) return `${sign}0.${"0".repeat(-exp - 1)}${digits}`;
    const int = digits.slice(0, exp + 1).padEnd(exp + 1, "0");
    const frac = digits.slice(exp + 1) || "0";
    return `${sign}${int}.${frac}`;
  }
  const m = digits.length > 1 ? `${digits[0]}.${digits.slice(1)}` : digits;
  return `${sign}${m}e${exp < 0 ? "-" : "+"}${String(Math.abs(exp)).padStart(2, "0")}`;
}

/** A strict JSON parser (plus Python's NaN/Infinity) keeping number tokens and key order. */
export function parsePyJson(text: string): PyJson {
  let i = 0;
  const ws = () => {
    while (i < text.length && (text[i] === " " || text[i] === "\t" || text[i] === "\n" || text[i] === "\r")) i++;
  };
  const fail = (): never => {
    throw new SyntaxError(`JSON error at ${i}`);
  };
  const value = (): PyJson => {
    ws();
    const c = text[i];
    if (c === "{") {
      i++;
      const m = new Map<string, PyJson>();
      ws();
      if (text[i] === "}") {
        i++;
        return { t: "obj", v: m };
      }
      for (;;) {
        ws();
        if (text[i] !== '"') fail();
        const k = str();
        ws();
        if (text[i++] !== ":") fail();
        m.set(k, value()); // a repeated key keeps its first place and its last value, as a dict
        ws();
        const d = text[i++];
        if (d === "}") return { t: "obj", v: m };
        if (d !== ",") fail();
      }
    }
    if (c === "[") {
      i++;
      const a: PyJson[] = [];
      ws();
      if (text[i] === "]") {
        i++;
        return { t: "arr", v: a };
      }
      for (;;) {
        a.push(value());
        ws();
        const d = text[i++];
        if (d === "]") return { t: "arr", v: a };
        if (d !== ",") fail();
      }
    }
    if (c === '"') return { t: "str", v: str() };
    for (const [lit, v] of [
      ["true", "True"],
      ["false", "False"],
      ["null", "None"],
      ["NaN", "nan"],
      ["Infinity", "inf"],
      ["-Infinity", "-inf"],
    ] as const) {
      if (text.startsWith(lit, i)) {
        i += lit.length;
        return { t: "lit", v };
      }
    }
    const m = /^-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?/.exec(text.slice(i, i + 400));
    if (!m) fail();
    i += m![0].length;
    return { t: "num", v: m![0] };
  };
  const str = (): string => {
    i++; // opening quote
    let out = "";
    for (;;) {
      const c = text[i++];
      if (c === undefined) fail();
      if (c === '"') return out;
      if (c! < " ") fail(); // control characters are not allowed inside strings (strict mode)
      if (c !== "\\") {
        out += c;
        continue;
      }
      const e = text[i++];
      const simple: Record<string, string> = { '"': '"', "\\": "\\", "/": "/", b: "\b", f: "\f", n: "\n", r: "\r", t: "\t" };
      if (e !== undefined && e in simple) out += simple[e];
      else if (e === "u" && /^[0-9a-fA-F]{4}$/.test(text.slice(i, i + 4))) {
        out += String.fromCharCode(parseInt(text.slice(i, i + 4), 16));
        i += 4;
      } else fail();
    }
  };
  const v = value();
  ws();
  if (i !== text.length) fail();
  return v;
}
