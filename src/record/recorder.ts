/**
 * A standalone recording session (issue "Standalone recording session"): one session of a
 * running lathe, one fresh Chromium pointed at it, the pages a person (or a URL list) opens, and
 * for every top-level page a viewport screenshot and a thumbnail written as resources linked to
 * the page's response (tls-and-resources.md B).
 *
 * Headless: visit each URL in turn, then finish. Interactive: open the URLs, then record whatever
 * the person does until the browser is closed or `signal` aborts (Ctrl-C).
 */
import { Readable } from "node:stream";
import type { Page, Response } from "playwright-core";
import type { Lathe } from "../main.js";
import type { SessionSummary } from "../archive/sessions.js";
import type { WrittenResource } from "../control/facade.js";
import { errorMessage } from "../core/errors.js";
import { VERSION } from "../core/version.js";
import { formatWarcDate } from "../warc/date.js";
import { type RecordingBrowser, launchRecordingBrowser } from "./browser.js";
import { chromiumServiceHosts } from "./denyList.js";
import { type Screenshots, takeScreenshots } from "./screenshots.js";

/** How far back the page record of a screenshot may be (resources.linkWindowMs default). */
const LINK_WINDOW_MS = 600_000;
/** After `load`, how long to wait for the network to go quiet (fetches started by scripts). */
const SETTLE_MS = 5_000;

export interface RecordOptions {
  urls: string[];
  collection: string;
  /** No browser window. */
  headless: boolean;
  /**
   * Record whatever happens in the browser until it is closed or `signal` aborts, rather than
   * visiting `urls` and finishing. Default: `!headless` (a person at the window).
   */
  interactive?: boolean;
  browser: string;
  /** Extra wait after each page has loaded and settled. */
  waitMs: number;
  /** Scroll each page to the bottom (loading lazy content) and back before the screenshots. */
  scroll: boolean;
  /** Record sites whose certificate is invalid instead of showing lathe's error page. */
  acceptInvalidCerts: boolean;
  /** Navigation timeout per page. */
  pageTimeoutMs: number;
  /** Abort: headless stops after the current page; interactive closes the browser. */
  signal?: AbortSignal;
  /** Progress lines (one per page, ending in "\n"). */
  out?: (line: string) => void;
  /** Called once the browser is up (tests drive an interactive session through it). */
  onBrowser?: (b: RecordingBrowser) => void;
}

export interface PageResult {
  /** The URL asked for (headless) or the document's URL (interactive). */
  url: string;
  /** The URL of the document that was loaded (after redirects). */
  finalUrl: string | null;
  status: number | null;
  /** The page is lathe's own error page (X-Lathe-Error: 1), e.g. an invalid certificate. */
  latheError: boolean;
  title: string | null;
  /** The page's response/revisit record the screenshots are linked to. */
  pageRecordId: string | null;
  view: WrittenResource | null;
  thumbnail: WrittenResource | null;
  /** Loaded (status < 400, not an error page), its record written, both screenshots written. */
  ok: boolean;
  error: string | null;
}

export interface RecordResult {
  sessionId: string;
  collection: string;
  browser: { name: string; version: string; userAgent: string } | null;
  pages: PageResult[];
  session: SessionSummary;
  /** Final WARC file names (in the WARC directory) holding the session's captures and screenshots. */
  files: string[];
  warcDir: string;
  interrupted: boolean;
}

type RecorderLathe = Pick<Lathe, "facade" | "archiver" | "ca" | "warcDir">;

interface PageDoc {
  url: string;
  status: number;
  latheError: boolean;
}

const kb = (n: number) => (n < 1024 ? `${n} B` : `${(n / 1024).toFixed(1)} kB`);

function isMainDocument(page: Page, r: Response): boolean {
  const req = r.request();
  return req.isNavigationRequest() && r.frame() === page.mainFrame();
}

function documentOf(r: Response): PageDoc {
  return { url: r.url().replace(/#.*$/, ""), status: r.status(), latheError: r.headers()["x-lathe-error"] === "1" };
}

async function settle(page: Page, o: RecordOptions): Promise<void> {
  await page.waitForLoadState("networkidle", { timeout: SETTLE_MS }).catch(() => undefined);
  if (o.scroll) {
    await page
      .evaluate(async () => {
        const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));
        const end = Date.now() + 10_000;
        let last = -1;
        while (Date.now() < end) {
          window.scrollBy(0, Math.max(200, window.innerHeight * 0.8));
          await pause(150);
          const y = window.scrollY;
          if (y === last || window.innerHeight + y >= document.documentElement.scrollHeight) break;
          last = y;
        }
        window.scrollTo(0, 0);
        await pause(150);
      })
      .catch(() => undefined);
    await page.waitForLoadState("networkidle", { timeout: SETTLE_MS }).catch(() => undefined);
  }
  if (o.waitMs > 0) await page.waitForTimeout(o.waitMs).catch(() => undefined);
}

export async function runRecording(lathe: RecorderLathe, o: RecordOptions): Promise<RecordResult> {
  const out = o.out ?? (() => undefined);
  const { facade } = lathe;
  if (!facade.collections.get(o.collection)) facade.createCollection({ name: o.collection });
  const prefix = facade.collections.get(o.collection)!.prefix;
  const session = await facade.openSession({
    collection: o.collection,
    rejectInvalidCerts: !o.acceptInvalidCerts,
    denyHosts: chromiumServiceHosts(),
    // A person browsing must not be slowed (issue #27), whatever the collection's politeness.
    exemptFromPoliteness: true,
  });
  let browser: RecordingBrowser | null = null;
  let recording: Recording | null = null;
  let interrupted = false;
  let failure: { error: unknown } | null = null;
  try {
    out(`session ${session.id} on ${session.proxyUrl}, collection "${o.collection}"\n`);
    browser = await launchRecordingBrowser({ executablePath: o.browser, headless: o.headless, proxyUrl: session.proxyUrl, spkiSha256Base64: lathe.ca.spkiSha256Base64 });
    out(`browser: ${browser.name} ${browser.version}${o.headless ? " (headless)" : ""}, fresh profile, lathe's CA trusted by SPKI for this browser only\n`);
    recording = new Recording(lathe, o, prefix, browser, out);
    if (o.interactive ?? !o.headless) await recording.interactive();
    else interrupted = await recording.headless();
  } catch (e) {
    failure = { error: e };
  } finally {
    await browser?.close();
  }
  // The session is closed whatever happened: its captures finish and its files are closed.
  const summary = await facade.closeSession(session.id);
  if (failure) throw failure.error;
  const { pages, resourceFiles, info } = recording!;
  const files = [...new Set([...summary.files, ...resourceFiles])].sort();
  return { sessionId: session.id, collection: o.collection, browser: info, pages, session: summary, files, warcDir: lathe.warcDir, interrupted };
}

function blank(url: string): PageResult {
  return { url, finalUrl: null, status: null, latheError: false, title: null, pageRecordId: null, view: null, thumbnail: null, ok: false, error: null };
}

/** The pages of one session in one browser: visiting or watching them, their screenshots, their results. */
class Recording {
  readonly pages: PageResult[] = [];
  /** Files the screenshots went to (the session's summary lists only its captures' files). */
  readonly resourceFiles = new Set<string>();
  readonly info: NonNullable<RecordResult["browser"]>;
  readonly #lathe: RecorderLathe;
  readonly #o: RecordOptions;
  readonly #prefix: string;
  readonly #b: RecordingBrowser;
  readonly #out: (line: string) => void;

  constructor(lathe: RecorderLathe, o: RecordOptions, prefix: string, b: RecordingBrowser, out: (line: string) => void) {
    this.#lathe = lathe;
    this.#o = o;
    this.#prefix = prefix;
    this.#b = b;
    this.#out = out;
    this.info = { name: b.name, version: b.version, userAgent: b.userAgent };
  }

  /** Visit each URL in turn; returns whether `signal` cut the list short. */
  async headless(): Promise<boolean> {
    const o = this.#o;
    for (const url of o.urls) {
      if (o.signal?.aborted) return true;
      const r = blank(url);
      const page = await this.#b.context.newPage();
      try {
        const resp = await page.goto(url, { waitUntil: "load", timeout: o.pageTimeoutMs });
        if (!resp) {
          r.error = "no response (the navigation did not load a document)";
        } else {
          const doc = documentOf(resp);
          Object.assign(r, { finalUrl: doc.url, status: doc.status, latheError: doc.latheError });
          await settle(page, o);
          await this.#capture(page, doc, r);
        }
      } catch (e) {
        r.error = errorMessage(e).split("\n")[0]!;
      } finally {
        await page.close().catch(() => undefined);
      }
      this.#report(r);
    }
    return o.signal?.aborted === true;
  }

  /** Interactive: every top-level document any tab loads, until the browser goes away. */
  async interactive(): Promise<void> {
    const { context } = this.#b;
    const o = this.#o;
    const work = new Set<Promise<void>>();
    const track = (p: Promise<void>) => {
      work.add(p);
      void p.finally(() => work.delete(p));
    };
    for (const p of context.pages()) this.#watch(p, track);
    context.on("page", (p) => this.#watch(p, track));
    const [first, ...rest] = o.urls;
    const open = async (page: Page, url: string) => {
      await page.goto(url, { waitUntil: "commit", timeout: o.pageTimeoutMs }).catch((e: unknown) => this.#out(`FAIL  --- ${url}  ${errorMessage(e).split("\n")[0]}\n`));
    };
    if (first) await open(context.pages()[0] ?? (await context.newPage()), first);
    for (const url of rest) await open(await context.newPage(), url);
    this.#out("recording: browse in the Chromium window; close it (or press Ctrl-C here) to finish\n");
    // Closing the browser or Ctrl-C is how an interactive session ends: not an interruption.
    await new Promise<void>((resolve) => {
      context.once("close", () => resolve());
      if (o.signal?.aborted) resolve();
      o.signal?.addEventListener("abort", () => resolve());
      o.onBrowser?.(this.#b);
    });
    // Captures in progress finish (the browser may already be gone: then they fail fast).
    await Promise.race([Promise.allSettled([...work]), new Promise((r) => setTimeout(r, 30_000).unref())]);
  }

  /** Capture each document `page` loads, one after the other; `track` keeps the work in flight. */
  #watch(page: Page, track: (p: Promise<void>) => void): void {
    let doc: PageDoc | null = null;
    let chain = Promise.resolve();
    page.on("response", (resp) => {
      if (isMainDocument(page, resp) && !(resp.status() >= 300 && resp.status() < 400 && resp.headers().location)) doc = documentOf(resp);
    });
    page.on("load", () => {
      const d = doc;
      if (!d || !/^https?:/.test(d.url)) return;
      chain = chain.then(async () => {
        if (page.isClosed()) return;
        await settle(page, this.#o);
        if (page.isClosed() || doc !== d) return; // navigated away meanwhile: that load gets its own turn
        const r = blank(d.url);
        Object.assign(r, { finalUrl: d.url, status: d.status, latheError: d.latheError });
        await this.#capture(page, d, r);
        if (!page.isClosed() || r.view) this.#report(r);
      }).catch(() => undefined);
      track(chain);
    });
  }

  /** Screenshots of a loaded document, written as resources; fills `r`. */
  async #capture(page: Page, doc: PageDoc, r: PageResult): Promise<void> {
    r.title = await page.title().catch(() => null);
    if (doc.latheError) {
      r.error = `lathe error page${r.title ? `: ${JSON.stringify(r.title)}` : ""}`;
      return;
    }
    let shots: Screenshots;
    try {
      shots = await takeScreenshots(page);
    } catch (e) {
      r.error = `screenshot failed: ${errorMessage(e).split("\n")[0]}`;
      return;
    }
    const { facade, archiver } = this.#lathe;
    const collection = this.#o.collection;
    const context = (variant: "view" | "thumbnail") => screenshotContext(this.#b, shots, variant, r.title);
    try {
      r.view = await facade.writeResource({ collection, kind: "view", page: doc.url, contentType: "image/png", body: Readable.from([shots.view]), length: shots.view.length, context: context("view") });
      r.thumbnail = await facade.writeResource({ collection, kind: "thumbnail", page: doc.url, contentType: "image/jpeg", body: Readable.from([shots.thumbnail]), length: shots.thumbnail.length, context: context("thumbnail") });
      this.resourceFiles.add(r.view.filename).add(r.thumbnail.filename);
    } catch (e) {
      r.error = `writing the screenshots failed: ${errorMessage(e)}`;
      return;
    }
    r.pageRecordId = archiver.pageRecord(this.#prefix, doc.url, LINK_WINDOW_MS)?.id ?? null;
    if (!r.pageRecordId) r.error = "the page's own response was not recorded (screenshots written unlinked)";
  }

  #report(r: PageResult): void {
    r.ok = r.error === null && r.status !== null && r.status < 400 && !r.latheError && r.view !== null && r.thumbnail !== null && r.pageRecordId !== null;
    if (r.ok) this.#out(`ok    ${r.status} ${r.finalUrl}  (view ${kb(r.view!.length)}, thumbnail ${kb(r.thumbnail!.length)})\n`);
    else this.#out(`FAIL  ${r.status ?? "---"} ${r.finalUrl ?? r.url}  ${r.error ?? (r.status !== null && r.status >= 400 ? `HTTP ${r.status}` : "")}\n`);
    this.pages.push(r);
  }
}

/**
 * The context of a screenshot resource: what took it, when, at what viewport; and the page's
 * title, so that a WACZ made later from the WARCs alone lists the page with it.
 */
function screenshotContext(b: RecordingBrowser, shots: Screenshots, variant: "view" | "thumbnail", title: string | null) {
  return {
    kind: "screenshot",
    variant,
    mode: "parallel",
    capturedAt: formatWarcDate(shots.takenMicros, "1.1"),
    browser: { name: b.name, version: b.version, ...(b.userAgent ? { userAgent: b.userAgent } : {}) },
    viewport: shots.viewport,
    tool: `lathe-record/${VERSION}`,
    ...(title ? { extra: { title } } : {}),
  };
}
