/**
 * Replay what lathe wrote in a real replay tool, ReplayWeb.page (issue #23), with no network.
 * What works, and why:
 *
 * - The app is served from node_modules/replaywebpage by `startReplayServer` (replayServer.ts):
 *   index.html, ui.js (the UI) and sw.js (wabac.js, run both as the service worker and as the
 *   web worker that indexes), with the archives under `/archive/` and HTTP Range (a WACZ, and a
 *   WARC named by a CDXJ, are read by ranges; `bytes=0-` first, `bytes=-N` for a ZIP's end).
 *   http://127.0.0.1 is a secure context, so the service worker registers without TLS.
 * - `launchReplayBrowser`: headless Chromium whose only route is that server. Every other
 *   connection goes to a tripwire proxy that answers 502 and notes the target; `<-loopback>`
 *   routes loopback through it too (Chromium bypasses proxies for loopback by default), all but
 *   the replay server's own host:port. `--host-resolver-rules` would not do: the recorded site
 *   is at an IP literal, never resolved. `holdPorts` puts tripwires on the stopped origins' own
 *   ports as well, in case anything went around the proxy; a test asserts both saw nothing.
 *   Chromium's own background requests (Google hosts) also end at the proxy; they are not the site.
 * - `loadArchive` opens `index.html?source=<archive URL>` (what a person does) and waits until the
 *   collection is indexed: the service worker's API `w/api/c/<id>` answers 200 once the web
 *   worker has added it. The collection id is ReplayWeb.page's own, `id-` + the first 12 hex
 *   digits of SHA-256(source URL) (pageutils.ts sourceToId); so every archive variant needs a URL
 *   of its own, or the collection of an earlier variant would be replayed. A failed load is read
 *   from the UI's `<wr-loader>` (state "errored", its message) and thrown at once.
 * - `openInReplay` sets that tab's hash to `#view=replay&url=…&ts=…` (what the UI's own page
 *   links do) and finds the replay frame among the tab's frames: the frame whose URL is
 *   `/w/<id>/<ts>mp_/<original url>`, served by the service worker, rewritten, with wombat. The
 *   iframe sits in nested shadow roots (replay-app-main → wr-item → wr-coll-replay), but
 *   Playwright lists every frame of a page whatever DOM holds it, so no shadow DOM is walked.
 *   Not a tab navigated to the `mp_` URL itself: wabac's head insert sends a top-level `mp_` page
 *   to `/w/<id>/<ts>/<url>`, which the service worker redirects to the UI with that same hash.
 *   Not a new tab per page: each tab starts the UI again (~2-4 s on two cores); a hash change
 *   in the loaded tab shows the next page in ~0.3 s.
 * - `checkPage` then reads, in that frame, the title, the body's text, every image's natural
 *   size, computed styles and the text a script wrote, and returns what differs from the
 *   expectation (empty = replayed as recorded), so negative tests can assert that it fails.
 *
 * All archives share one browser context: the service worker installs once, and each archive is
 * its own collection, under its own URL, in its own IndexedDB database.
 */
import { createHash } from "node:crypto";
import { chromium, type Browser, type BrowserContext, type Frame, type Page } from "playwright-core";
import { chromiumArgs, isRoot } from "../../src/record/browser.js";
import { type ReplayServer, type Tripwire, startTripwire } from "./replayServer.js";

export { type ReplayServer, type Tripwire, holdPorts, startReplayServer } from "./replayServer.js";

export const CHROMIUM = "/usr/bin/chromium";

/** How long indexing an archive, and one page's replay, may take. */
const LOAD_MS = 30_000;
const PAGE_MS = 20_000;
/** How long a replayed page may take to settle (images decoded, fetch() written) before it is read. */
const SETTLE_MS = 3_000;

// ---------------------------------------------------------------------------------------------
// The browser.

export interface ReplayBrowser {
  browser: Browser;
  /**
   * The one context every archive is opened in: ReplayWeb.page's service worker is installed
   * once, and each archive is a collection of its own (its own URL, its own id).
   */
  context: BrowserContext;
  /** The proxy every connection but the replay server's goes to. */
  proxy: Tripwire;
  close(): Promise<void>;
}

export async function launchReplayBrowser(server: ReplayServer): Promise<ReplayBrowser> {
  const proxy = await startTripwire();
  let browser: Browser | null = null;
  try {
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      headless: true,
      timeout: 30_000,
      chromiumSandbox: !isRoot(),
      // lathe record's flags (quiet, no QUIC, loopback through the proxy), but the proxy is the
      // tripwire, the replay server's own host:port goes direct, and no CA is trusted.
      args: chromiumArgs({ proxyUrl: `http://127.0.0.1:${proxy.port}`, spkiSha256Base64: "", root: isRoot() })
        .filter((a) => !a.startsWith("--ignore-certificate-errors-spki-list="))
        .map((a) => (a.startsWith("--proxy-bypass-list=") ? `--proxy-bypass-list=<-loopback>;127.0.0.1:${server.port}` : a)),
    });
    const context = await browser.newContext({ serviceWorkers: "allow" });
    const b = browser;
    return {
      browser: b,
      context,
      proxy,
      close: async () => {
        await b.close().catch(() => undefined);
        await proxy.close();
      },
    };
  } catch (e) {
    await browser?.close().catch(() => undefined);
    await proxy.close();
    throw e;
  }
}

// ---------------------------------------------------------------------------------------------
// Loading an archive and opening its pages.

/** ReplayWeb.page's collection id for a source URL (pageutils.ts sourceToId). */
export const collectionId = (sourceUrl: string) => "id-" + createHash("sha256").update(sourceUrl).digest("hex").slice(0, 12);

export interface LoadedArchive {
  /** The UI's tab the archive was loaded in; pages are shown in it. */
  tab: Page;
  server: ReplayServer;
  sourceUrl: string;
  id: string;
  /** Milliseconds from opening the UI to the collection being indexed. */
  loadMs: number;
  close(): Promise<void>;
}

async function loaderState(page: Page): Promise<{ state: string; error: string } | null> {
  // Playwright's CSS engine pierces open shadow roots: <wr-loader> is found inside the UI's.
  const loader = page.locator("wr-loader");
  if ((await loader.count()) === 0) return null;
  return loader
    .first()
    .evaluate((el) => ({ state: String((el as unknown as { state: string }).state), error: String((el as unknown as { error?: string }).error ?? "") }), undefined, { timeout: 1000 })
    .catch(() => null);
}

/**
 * Open the archive in ReplayWeb.page, in a tab of its own, and wait until it is indexed; throws
 * the UI's error on a failed load.
 */
export async function loadArchive(rb: ReplayBrowser, server: ReplayServer, sourceUrl: string): Promise<LoadedArchive> {
  const id = collectionId(sourceUrl);
  const started = Date.now();
  const tab = await rb.context.newPage();
  try {
    await tab.goto(`${server.origin}/?source=${encodeURIComponent(sourceUrl)}`, { timeout: PAGE_MS });
    for (;;) {
      const status = await tab
        .evaluate(async (u) => (navigator.serviceWorker.controller ? (await fetch(u, { cache: "no-store" })).status : 0), `/w/api/c/${id}`)
        .catch(() => 0);
      if (status === 200) break;
      const l = await loaderState(tab);
      if (l?.state === "errored") throw new Error(`ReplayWeb.page could not load ${sourceUrl}: ${l.error.trim()}`);
      if (Date.now() - started > LOAD_MS) throw new Error(`ReplayWeb.page did not index ${sourceUrl} within ${LOAD_MS} ms (loader: ${JSON.stringify(l)})`);
      await tab.waitForTimeout(100);
    }
    return { tab, server, sourceUrl, id, loadMs: Date.now() - started, close: () => tab.close().catch(() => undefined) };
  } catch (e) {
    await tab.close().catch(() => undefined);
    throw e;
  }
}

const replayFrameOf = (tab: Page, prefix: string, url: string) =>
  tab.frames().find((f) => {
    const u = f.url();
    if (!u.startsWith(prefix)) return false;
    const mp = u.indexOf("mp_/");
    return mp >= 0 && decodeURI(u.slice(mp + 4)) === url;
  });

/**
 * Show `url` as captured at `ts` (14 digits; "" = latest) in the archive's tab: the UI's replay
 * view, by its hash, as the UI's own links do; returns the replay frame once it has loaded.
 */
export async function openInReplay(a: LoadedArchive, url: string, ts: string): Promise<Frame> {
  const hash = new URLSearchParams({ view: "replay", url, ts }).toString();
  await a.tab.evaluate((h) => void (location.hash = h), hash);
  const prefix = `${a.server.origin}/w/${a.id}/`;
  const end = Date.now() + PAGE_MS;
  let frame = replayFrameOf(a.tab, prefix, url);
  while (!frame) {
    if (Date.now() > end) throw new Error(`no replay frame for ${url} within ${PAGE_MS} ms; frames: ${a.tab.frames().map((f) => f.url()).join(", ")}`);
    await a.tab.waitForTimeout(25);
    frame = replayFrameOf(a.tab, prefix, url);
  }
  await frame.waitForLoadState("load", { timeout: PAGE_MS });
  return frame;
}

// ---------------------------------------------------------------------------------------------
// What a replayed page must show.

export interface PageExpectation {
  url: string;
  title: string;
  /** Substrings of the body's text. */
  texts: string[];
  /** Every <img> of the page by id, with its natural size (the page has no other images). */
  images: Record<string, { width: number; height: number }>;
  /** Computed styles that only the page's stylesheet gives. */
  styles: Array<{ selector: string; property: string; value: string }>;
  /** An element a script fills with fetched data, and the text it must end with. */
  fetched?: { selector: string; text: string };
}

interface Observed {
  title: string;
  text: string;
  images: Array<{ id: string; width: number; height: number; complete: boolean }>;
  styles: Array<string | null>;
  fetched: string | null;
  /** Resources the frame loaded with an HTTP error status (diagnostics). */
  failed: string[];
}

/** Read the page in its frame once it has settled (images complete, the fetched text in) or SETTLE_MS passed. */
async function observe(frame: Frame, e: PageExpectation): Promise<Observed> {
  return frame.evaluate(
    async ({ e, settleMs }) => {
      const end = Date.now() + settleMs;
      // The element a script fills is in the page's HTML: when it is missing (another page, e.g.
      // "Archived Page Not Found"), there is nothing to wait for.
      const filled = (f: NonNullable<typeof e.fetched>) => {
        const el = document.querySelector(f.selector);
        return !el || el.textContent === f.text;
      };
      const settled = () => [...document.images].every((i) => i.complete) && (!e.fetched || filled(e.fetched));
      while (!settled() && Date.now() < end) await new Promise((r) => setTimeout(r, 50));
      const entries = performance.getEntriesByType("resource") as Array<PerformanceResourceTiming & { responseStatus?: number }>;
      return {
        title: document.title,
        text: document.body?.innerText ?? "",
        images: [...document.images].map((i) => ({ id: i.id, width: i.naturalWidth, height: i.naturalHeight, complete: i.complete })),
        styles: e.styles.map((s) => {
          const el = document.querySelector(s.selector);
          return el ? getComputedStyle(el).getPropertyValue(s.property) : null;
        }),
        fetched: e.fetched ? (document.querySelector(e.fetched.selector)?.textContent ?? null) : null,
        // wabac asks for ruffle (a Flash emulator) on every page; the npm package does not ship it.
        failed: entries.filter((r) => (r.responseStatus ?? 0) >= 400 && !r.name.includes("/ruffle/")).map((r) => `${r.responseStatus} ${r.name}`),
      };
    },
    { e, settleMs: SETTLE_MS },
  );
}

/** What differs between the replayed page and the expectation. */
export function differences(e: PageExpectation, o: Observed): string[] {
  const out: string[] = [];
  if (o.title !== e.title) out.push(`title ${JSON.stringify(o.title)}, expected ${JSON.stringify(e.title)}`);
  for (const t of e.texts) if (!o.text.includes(t)) out.push(`text ${JSON.stringify(t)} missing`);
  const ids = o.images.map((i) => i.id).sort();
  const want = Object.keys(e.images).sort();
  if (ids.join() !== want.join()) out.push(`images [${ids.join(", ")}], expected [${want.join(", ")}]`);
  for (const i of o.images) {
    const size = e.images[i.id];
    if (size && (i.width !== size.width || i.height !== size.height)) out.push(`image #${i.id} is ${i.width}×${i.height}${i.complete ? "" : " (not complete)"}, expected ${size.width}×${size.height}`);
  }
  e.styles.forEach((s, k) => {
    if (o.styles[k] !== s.value) out.push(`${s.selector} ${s.property} is ${JSON.stringify(o.styles[k])}, expected ${s.value}`);
  });
  if (e.fetched && o.fetched !== e.fetched.text) out.push(`${e.fetched.selector} says ${JSON.stringify(o.fetched)}, expected ${JSON.stringify(e.fetched.text)}`);
  if (out.length && o.failed.length) out.push(`failed resources: ${o.failed.join(", ")}`);
  return out;
}

/** Replay one page and say what differs from `e` (empty: it replayed as recorded). */
export async function checkPage(a: LoadedArchive, e: PageExpectation, ts: string): Promise<string[]> {
  try {
    const frame = await openInReplay(a, e.url, ts);
    return differences(e, await observe(frame, e));
  } catch (err) {
    return [`replay of ${e.url} failed: ${String(err instanceof Error ? err.message : err).split("\n")[0]}`];
  }
}

/** The collection's pages, from the service worker's API (what the UI's page list shows). */
export async function listPages(a: LoadedArchive): Promise<Array<{ url: string; title: string }>> {
  const data = await a.tab.evaluate(async (u) => (await fetch(u, { cache: "no-store" })).json(), `/w/api/c/${a.id}?all=1`);
  return ((data as { pages?: Array<{ url: string; title?: string }> }).pages ?? []).map((p) => ({ url: p.url, title: p.title ?? "" }));
}

export interface ArchiveCheck {
  /** The load's error (then every page lists it), or null. */
  loadError: string | null;
  loadMs: number;
  /** The collection's page list as ReplayWeb.page shows it (a WACZ's pages.jsonl; pages it found in a WARC). */
  pageList: Array<{ url: string; title: string }>;
  /** Problems by page URL; empty lists = the page replayed as recorded. */
  problems: Record<string, string[]>;
}

/**
 * Load `sourceUrl` in a fresh context and check every page (at its capture's timestamp, all
 * tabs at once); the context is closed afterwards. A failed load fails every page.
 */
export async function checkArchive(rb: ReplayBrowser, server: ReplayServer, sourceUrl: string, pages: Array<{ expect: PageExpectation; ts: string }>): Promise<ArchiveCheck> {
  let a: LoadedArchive;
  try {
    a = await loadArchive(rb, server, sourceUrl);
  } catch (e) {
    const msg = String(e instanceof Error ? e.message : e);
    return { loadError: msg, loadMs: 0, pageList: [], problems: Object.fromEntries(pages.map((p) => [p.expect.url, [msg]])) };
  }
  try {
    const pageList = await listPages(a);
    const problems: Record<string, string[]> = {};
    for (const p of pages) problems[p.expect.url] = await checkPage(a, p.expect, p.ts);
    return { loadError: null, loadMs: a.loadMs, pageList, problems };
  } finally {
    await a.close();
  }
}
