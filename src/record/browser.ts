/**
 * The recording browser (issue "Standalone recording session", decisions.md §9): Chromium driven
 * by playwright-core, with a fresh temporary profile, pointed at one recording session, trusting
 * lathe's CA for this browser only (by SPKI hash; the system's trust store is not touched).
 */
import type { BrowserContext } from "playwright-core";
import { ProxyError, errorMessage } from "../core/errors.js";

export const DEFAULT_BROWSER = "/usr/bin/chromium";

/** The headless viewport: 16:9, so the thumbnail is exactly 640×360 at half scale. */
export const HEADLESS_VIEWPORT = { width: 1280, height: 720 } as const;

export interface BrowserOptions {
  executablePath: string;
  headless: boolean;
  /** The session's proxy, `http://127.0.0.1:PORT`. */
  proxyUrl: string;
  /** base64 SHA-256 of lathe's CA SubjectPublicKeyInfo. */
  spkiSha256Base64: string;
  /** Running as root: Chromium's sandbox cannot start, so `--no-sandbox`. */
  root?: boolean;
  timeoutMs?: number;
}

export interface RecordingBrowser {
  context: BrowserContext;
  name: string;
  version: string;
  userAgent: string;
  close(): Promise<void>;
}

export const isRoot = (): boolean => typeof process.getuid === "function" && process.getuid() === 0;

/** Chromium's command-line flags for a recording session (decisions.md §9). */
export function chromiumArgs(o: Pick<BrowserOptions, "proxyUrl" | "spkiSha256Base64" | "root">): string[] {
  return [
    `--proxy-server=${o.proxyUrl}`,
    // Chromium bypasses the proxy for loopback by default; "<-loopback>" removes that rule, so
    // local sites are recorded too.
    "--proxy-bypass-list=<-loopback>",
    `--ignore-certificate-errors-spki-list=${o.spkiSha256Base64}`,
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--no-default-browser-check",
    // QUIC would go around the proxy (UDP); HTTP/1.1 and HTTP/2 over the proxy only.
    "--disable-quic",
    ...(o.root ? ["--no-sandbox"] : []),
  ];
}

async function loadPlaywright(): Promise<typeof import("playwright-core")> {
  try {
    return await import("playwright-core");
  } catch (e) {
    throw new ProxyError("ERR_CONFIG", `lathe record needs the npm package playwright-core (npm install playwright-core): ${errorMessage(e)}`, e);
  }
}

export async function launchRecordingBrowser(o: BrowserOptions): Promise<RecordingBrowser> {
  const { chromium } = await loadPlaywright();
  const root = o.root ?? isRoot();
  let context: BrowserContext;
  try {
    // "" = a fresh temporary user-data-dir, deleted when the browser closes.
    context = await chromium.launchPersistentContext("", {
      executablePath: o.executablePath,
      headless: o.headless,
      args: chromiumArgs({ ...o, root }),
      chromiumSandbox: !root,
      // A person's window keeps its own size; headless gets a fixed 16:9 viewport.
      viewport: o.headless ? { ...HEADLESS_VIEWPORT } : null,
      deviceScaleFactor: o.headless ? 1 : undefined,
      // lathe decides what happens on Ctrl-C (finish the captures, then close the browser).
      handleSIGINT: false,
      handleSIGTERM: false,
      handleSIGHUP: false,
      timeout: o.timeoutMs ?? 30_000,
      acceptDownloads: false,
    });
  } catch (e) {
    const noDisplay = !o.headless && process.platform === "linux" && !process.env.DISPLAY && !process.env.WAYLAND_DISPLAY;
    const hint = noDisplay ? " (there is no display here: use --headless with --urls FILE)" : "";
    throw new ProxyError("ERR_CONFIG", `cannot start the browser ${o.executablePath} (--browser PATH): ${errorMessage(e).split("\n")[0]}${hint}`, e);
  }
  const name = "Chromium";
  let version = "";
  let userAgent = "";
  try {
    const page = context.pages()[0] ?? (await context.newPage());
    const cdp = await context.newCDPSession(page);
    const v = (await cdp.send("Browser.getVersion")) as { product: string; userAgent: string };
    await cdp.detach().catch(() => undefined);
    // product is e.g. "Chrome/156.0.8078.114" (also for Chromium) or "HeadlessChrome/…".
    version = v.product.split("/")[1] ?? v.product;
    userAgent = v.userAgent;
  } catch {
    version = "unknown";
  }
  let closed = false;
  return {
    context,
    name,
    version,
    userAgent,
    async close() {
      if (closed) return;
      closed = true;
      await context.close().catch(() => undefined);
    },
  };
}
