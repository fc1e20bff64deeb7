/**
 * `lathe record` (issue "Standalone recording session"): its own lathe in this process, one
 * recording session, a fresh Chromium pointed at it; the pages given (or whatever the person
 * browses), each with a viewport screenshot and a thumbnail; then a summary and how to replay.
 */
import { parseArgs } from "node:util";
import { join, relative } from "node:path";
import { loadConfig } from "./loadConfig.js";
import { startLathe } from "../main.js";
import { ProxyError } from "../core/errors.js";
import { COLLECTION_NAME } from "../archive/collections.js";
import { DEFAULT_BROWSER } from "../record/browser.js";
import { type RecordResult, runRecording } from "../record/recorder.js";
import { checkUrl, readUrlFile } from "../record/urls.js";
import { checkWaczOutput, writeWaczFile } from "../wacz/output.js";
import { WaczError } from "../wacz/waczError.js";
import { formatWaczSummary } from "./wacz.js";

export const RECORD_HELP = `lathe record [URL...] [options]
                        record pages in a fresh Chromium (its own lathe, its own session)
  --collection NAME  collection to record into (created when missing; default "default")
  --dir DIR        WARC output directory (default ./warcs)
  --certs DIR      CA directory (default ./certs)
  --browser PATH   Chromium executable (default ${DEFAULT_BROWSER})
  --headless       no window: visit the URLs, then finish (exit 0 only when every page
                   loaded with status < 400, was recorded and got its screenshots)
  --urls FILE      more URLs, one a line ('#' starts a comment)
  --wait MS        wait this long on each page after it loaded and the network went quiet
  --scroll         scroll each page to the bottom and back before the screenshots
  --timeout MS     navigation timeout per page (default 60000)
  --accept-invalid-certs  record sites whose certificate is invalid (default: lathe's error page)
  --port P         lathe's main proxy port (default 0: any free port; the browser uses the
                   session's own port)
  --control-port P  REST control API port (default -1: off)
  --config FILE    settings file (default ./proxy.config.json); flags override it
  --wacz FILE      also package the session as a WACZ (its WARC files, index, the pages
                   visited with their titles) once it ends
  --verbose        lathe's log lines (info) on stderr; default warnings only
  Without --headless the browser stays open until you close it or press Ctrl-C.
`;

function intFlag(name: string, v: string | undefined, min: number, max: number): number | undefined {
  if (v === undefined) return undefined;
  const n = Number(v);
  if (!/^-?\d+$/.test(v) || n < min || n > max) throw new ProxyError("ERR_CONFIG", `--${name} must be a number from ${min} to ${max}, got ${JSON.stringify(v)}`);
  return n;
}

const shellQuote = (s: string) => (/^[\w@%+=:,./-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`);

export function formatSummary(r: RecordResult): string {
  const ok = r.pages.filter((p) => p.ok).length;
  const shots = r.pages.reduce((n, p) => n + (p.view ? 1 : 0) + (p.thumbnail ? 1 : 0), 0);
  const shotBytes = r.pages.reduce((n, p) => n + (p.view?.length ?? 0) + (p.thumbnail?.length ?? 0), 0);
  const s = r.session;
  const paths = r.files.map((f) => join(r.warcDir, f));
  const shown = paths.map((p) => {
    const rel = relative(process.cwd(), p);
    return shellQuote(rel && !rel.startsWith("..") ? rel : p);
  });
  const lines = [
    "",
    `summary of session ${r.sessionId} (collection "${r.collection}")${r.interrupted ? ", interrupted" : ""}`,
    `  pages:       ${r.pages.length} (${ok} recorded, ${r.pages.length - ok} failed)`,
    `  captures:    ${s.captures} (revisits: ${s.revisits}, failed: ${s.failed}, skipped: ${s.skipped})`,
    `  screenshots: ${shots} (${kbLabel(shotBytes)})`,
    `  bytes:       ${s.bytes} (captures) + ${shotBytes} (screenshots)`,
    `  files:       ${paths.length === 0 ? "(none)" : paths[0]}`,
    ...paths.slice(1).map((p) => `               ${p}`),
  ];
  if (paths.length > 0) {
    const list = shown.join(" ");
    const coll = r.collection;
    lines.push(
      "",
      "to index:  lathe index --cdxj --output " + shellQuote(relOrAbs(join(r.warcDir, `${coll}.cdxj`))) + ` ${list}`,
      "to replay: open the WARC files in ReplayWeb.page (https://replayweb.page), or with pywb:",
      `           wb-manager init ${coll} && wb-manager add ${coll} ${list} && wayback`,
      `           then browse http://localhost:8080/${coll}/<page-url>`,
    );
  }
  return lines.join("\n") + "\n";
}

const relOrAbs = (p: string) => {
  const rel = relative(process.cwd(), p);
  return rel && !rel.startsWith("..") ? rel : p;
};

const kbLabel = (n: number) => (n < 1024 ? `${n} B` : n < 1024 * 1024 ? `${(n / 1024).toFixed(1)} kB` : `${(n / 1024 / 1024).toFixed(1)} MB`);

export async function recordCommand(argv: string[], out: (s: string) => void, err: (s: string) => void = (s) => process.stderr.write(s)): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    options: {
      collection: { type: "string" },
      dir: { type: "string" },
      certs: { type: "string" },
      browser: { type: "string" },
      headless: { type: "boolean" },
      urls: { type: "string" },
      wait: { type: "string" },
      scroll: { type: "boolean" },
      timeout: { type: "string" },
      "accept-invalid-certs": { type: "boolean" },
      port: { type: "string" },
      "control-port": { type: "string" },
      config: { type: "string" },
      verbose: { type: "boolean" },
      wacz: { type: "string" },
      help: { type: "boolean", short: "h" },
    },
    strict: true,
    allowPositionals: true,
  });
  if (values.help) {
    out(RECORD_HELP);
    return 0;
  }
  const collection = values.collection ?? "default";
  if (!COLLECTION_NAME.test(collection)) throw new ProxyError("ERR_CONFIG", `--collection must be lower-case letters, digits, '.', '_' or '-' (at most 64), got ${JSON.stringify(collection)}`);
  const urls = positionals.map((u, i) => checkUrl(u, `URL ${i + 1}`));
  if (values.urls !== undefined) urls.push(...readUrlFile(values.urls));
  const headless = values.headless ?? false;
  if (headless && urls.length === 0) throw new ProxyError("ERR_CONFIG", "--headless needs pages to visit: give URLs or --urls FILE");
  const waitMs = intFlag("wait", values.wait, 0, 3_600_000) ?? 0;
  const pageTimeoutMs = intFlag("timeout", values.timeout, 1, 3_600_000) ?? 60_000;
  const port = intFlag("port", values.port, 0, 65535);
  const controlPort = intFlag("control-port", values["control-port"], -1, 65535);
  const wacz = values.wacz === undefined ? null : await waczTarget(values.wacz);

  const config = loadConfig(values.config, {
    proxy: { port: port ?? 0 },
    control: { port: controlPort ?? -1 },
    warc: values.dir !== undefined ? { dir: values.dir } : {},
    certs: values.certs !== undefined ? { dir: values.certs } : {},
    log: values.verbose ? { level: "info" } : { level: "warn" },
  });
  const lathe = await startLathe(config);
  out(`lathe ${lathe.facade.version} recording into ${lathe.warcDir}\n`);
  if (lathe.controlUrl) out(`live page: ${lathe.controlUrl}/\n`);

  const abort = new AbortController();
  let signals = 0;
  const onSignal = (sig: NodeJS.Signals) => {
    signals++;
    if (signals > 1) {
      err(`second ${sig}: exiting now; .open files will be recovered at the next start\n`);
      process.exit(130);
    }
    err(`${sig}: finishing the captures in flight, closing the browser and the WARC files...\n`);
    abort.abort();
  };
  process.on("SIGINT", onSignal);
  process.on("SIGTERM", onSignal);
  let result: RecordResult;
  try {
    result = await runRecording(lathe, {
      urls,
      collection,
      headless,
      browser: values.browser ?? DEFAULT_BROWSER,
      waitMs,
      scroll: values.scroll ?? false,
      acceptInvalidCerts: values["accept-invalid-certs"] ?? false,
      pageTimeoutMs,
      signal: abort.signal,
      out,
    });
  } finally {
    await lathe.stop();
    process.off("SIGINT", onSignal);
    process.off("SIGTERM", onSignal);
  }
  out(formatSummary(result));
  const packaged = wacz === null || (await packageRecording(result, wacz, out, err));
  if (!headless) return packaged ? 0 : 1;
  if (!packaged) return 1;
  if (result.interrupted) return 130;
  const all = result.pages.length === urls.length && result.pages.every((p) => p.ok);
  if (!all) err(`lathe record: ${result.pages.filter((p) => !p.ok).length} of ${urls.length} pages were not recorded\n`);
  return all ? 0 : 1;
}

/** `--wacz FILE`, checked before the recording starts: a .wacz name in a directory that exists. */
async function waczTarget(path: string): Promise<string> {
  if (!path.endsWith(".wacz")) throw new ProxyError("ERR_CONFIG", `--wacz must name a .wacz file, got ${JSON.stringify(path)}`);
  try {
    return await checkWaczOutput(path);
  } catch (e) {
    throw new ProxyError("ERR_CONFIG", `--wacz: ${(e as Error).message}`);
  }
}

/** The session's WARC files and visited pages as a WACZ; false (said on stderr) when it could not be written. */
async function packageRecording(r: RecordResult, path: string, out: (s: string) => void, err: (s: string) => void): Promise<boolean> {
  if (r.files.length === 0) {
    err("lathe record: nothing was recorded: no WACZ written\n");
    return false;
  }
  const pages = r.pages.map((p) => ({ url: p.finalUrl ?? p.url, title: p.title, recordId: p.pageRecordId }));
  try {
    const s = await writeWaczFile({ files: r.files.map((f) => join(r.warcDir, f)), pages: { kind: "given", pages }, title: `lathe record: session ${r.sessionId} (collection ${r.collection})`, ownIndexes: true }, path);
    out(formatWaczSummary(s));
    return true;
  } catch (e) {
    if (!(e instanceof WaczError)) throw e;
    err(`lathe record: the WACZ was not written: ${e.message}\n`);
    return false;
  }
}
