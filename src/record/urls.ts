/** The page list of `lathe record`: URLs from the command line and from `--urls FILE`. */
import { readFileSync } from "node:fs";
import { ProxyError, errorMessage } from "../core/errors.js";

/**
 * One URL a line; blank lines and lines starting with `#` are ignored, as is anything after
 * whitespace + `#` (a trailing comment). Throws naming the file and line of a bad URL.
 */
export function parseUrlList(text: string, source = "--urls"): string[] {
  const out: string[] = [];
  const lines = text.split(/\r?\n/);
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!.replace(/\s+#.*$/, "").trim();
    if (!line || line.startsWith("#")) continue;
    out.push(checkUrl(line, `${source}:${i + 1}`));
  }
  return out;
}

export function readUrlFile(path: string): string[] {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (e) {
    throw new ProxyError("ERR_CONFIG", `cannot read the URL list ${path} (--urls): ${errorMessage(e)}`, e);
  }
  return parseUrlList(text, path);
}

/** An absolute http(s) URL; `example.com/x` (no scheme) gets `https://`. */
export function checkUrl(s: string, where = "URL"): string {
  const hasScheme = /^[a-z][a-z0-9+.-]*:\/\//i.test(s) || /^(about|blob|chrome|data|file|javascript|mailto):/i.test(s);
  const withScheme = hasScheme ? s : `https://${s}`;
  let u: URL;
  try {
    u = new URL(withScheme);
  } catch {
    throw new ProxyError("ERR_CONFIG", `${where}: not a URL: ${JSON.stringify(s)}`);
  }
  if (u.protocol !== "http:" && u.protocol !== "https:") throw new ProxyError("ERR_CONFIG", `${where}: only http and https pages can be recorded, got ${JSON.stringify(s)}`);
  return u.href;
}
