/**
 * Headless Debian Chromium (driven by playwright-core) through lathe: an HTTPS page with 24
 * subresources and a fetch() loads with no certificate error (lathe's CA trusted by SPKI hash,
 * decisions.md §9 flags), and pages that use a WebSocket (wss:// and ws://) keep working. Every
 * response the browser got from the origin is in the WARC with its body and valid digests, and
 * nothing outside loopback was contacted or recorded.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { existsSync } from "node:fs";
import https from "node:https";
import http from "node:http";
import { chromium, type Browser, type BrowserContext, type Page } from "playwright-core";
import { originCerts } from "../helpers/certs.js";
import { WS_GREETING, startWsOrigin, type WsOrigin } from "../helpers/origin.js";
import { startTestLathe, type TestLathe } from "../helpers/lathe.js";
import { captureOf, checkDigests, readAllWarcs, type ReadRecord } from "../helpers/warcs.js";
import { within } from "./util.js";

const CHROMIUM = "/usr/bin/chromium";
const hasChromium = existsSync(CHROMIUM);
if (!hasChromium) console.warn(`chromium.test.ts skipped: ${CHROMIUM} does not exist (apt-get install -y chromium; npm test's pretest installs it)`);

const PAGE_MS = 20_000;

/** The origin's response body, fetched directly (no proxy). */
function direct(url: string, ca: string): Promise<{ status: number; body: Buffer }> {
  return new Promise((resolve, reject) => {
    const get = url.startsWith("https:") ? https.get : http.get;
    const req = get(url, { agent: false, ca }, (res) => {
      const parts: Buffer[] = [];
      res.on("data", (d: Buffer) => parts.push(d));
      res.on("end", () => resolve({ status: res.statusCode!, body: Buffer.concat(parts) }));
      res.on("error", reject);
    });
    req.setTimeout(10_000, () => req.destroy(new Error(`direct ${url} timed out`)));
    req.on("error", reject);
  });
}

describe.skipIf(!hasChromium)(`headless Chromium through lathe${hasChromium ? "" : ` (skipped: ${CHROMIUM} not installed)`}`, () => {
  const certs = originCerts();
  let origin: WsOrigin; // HTTPS, serves /page/N, /wspage/*, and WebSockets on /ws/*
  let plain: WsOrigin; // HTTP, for a ws:// page
  let lathe: TestLathe;
  let browser: Browser | undefined;
  let context: BrowserContext;
  let stopped = false;
  /** Every response Chromium reported, by URL, with its status and body when it had one. */
  const responses = new Map<string, { status: number; body: Buffer | null }>();
  const failed: Array<{ url: string; error: string }> = [];
  const pending: Array<Promise<void>> = [];

  function watch(page: Page) {
    page.on("response", (r) => {
      pending.push(
        r
          .body()
          .then((b) => void responses.set(r.url(), { status: r.status(), body: b }))
          .catch(() => void responses.set(r.url(), { status: r.status(), body: null })),
      );
    });
    page.on("requestfailed", (r) => failed.push({ url: r.url(), error: r.failure()?.errorText ?? "?" }));
  }

  beforeAll(async () => {
    origin = await startWsOrigin(certs);
    plain = await startWsOrigin();
    lathe = await startTestLathe({ upstream: { caFile: certs.caFile, allowHosts: ["127.0.0.1", "localhost", "origin.test"] } });
    browser = await within(
      30_000,
      chromium.launch({
        executablePath: CHROMIUM,
        headless: true,
        timeout: 30_000,
        args: [
          "--no-sandbox",
          `--proxy-server=${lathe.proxyUrl}`,
          "--proxy-bypass-list=<-loopback>",
          `--ignore-certificate-errors-spki-list=${lathe.ca.spkiSha256Base64}`,
          "--disable-background-networking",
          "--disable-component-update",
          "--disable-sync",
          "--no-first-run",
          "--no-default-browser-check",
          "--disable-quic",
        ],
      }),
      "chromium.launch",
    );
    context = await browser.newContext();
  });
  afterAll(async () => {
    await browser?.close().catch(() => undefined);
    if (!stopped) await lathe?.stop();
    await origin?.close();
    await plain?.close();
  });

  it("loads an HTTPS page with 24 subresources and a fetch() with no certificate error", async () => {
    const page = await context.newPage();
    watch(page);
    const url = `${origin.url}/page/24`;
    const r = await page.goto(url, { timeout: PAGE_MS, waitUntil: "load" });
    expect(r?.ok()).toBe(true);
    expect(r?.status()).toBe(200);
    await page.waitForFunction(() => document.title === "loaded:100", undefined, { timeout: PAGE_MS });
    expect(await page.evaluate(() => (window as unknown as { loaded: number }).loaded)).toBe(8); // the 8 scripts ran
    await Promise.all(pending);
    const securityDetails = await r!.securityDetails();
    // Chromium saw lathe's leaf (issued by lathe's CA), and accepted it.
    expect(securityDetails?.issuer).toMatch(/^lathe CA /);
    expect(securityDetails?.protocol).toMatch(/^TLS 1\.[23]$/);
    // Chromium spoke h2 to lathe for the page and every subresource, over one tunnel (http2.md §1).
    const protocols = await page.evaluate(() => [
      (performance.getEntriesByType("navigation")[0] as PerformanceNavigationTiming).nextHopProtocol,
      ...performance.getEntriesByType("resource").map((e) => (e as PerformanceResourceTiming).nextHopProtocol),
    ]);
    expect(protocols.length).toBeGreaterThanOrEqual(26);
    expect(new Set(protocols)).toEqual(new Set(["h2"]));
    await page.close();
    expect(failed.filter((f) => f.url.startsWith(origin.url))).toEqual([]);
    const fromOrigin = [...responses.keys()].filter((u) => u.startsWith(origin.url));
    // The page, 24 subresources and the fetch.
    expect(fromOrigin.length).toBeGreaterThanOrEqual(26);
    for (let i = 0; i < 24; i++) {
      const sub = i % 3 === 0 ? `/img/${i}.svg` : i % 3 === 1 ? `/js/${i}.js` : `/css/${i}.css`;
      expect(responses.get(`${origin.url}${sub}`)?.status, sub).toBe(200);
    }
    expect(responses.get(`${origin.url}/text/100`)?.status).toBe(200);
  });

  it("keeps a page that uses a WebSocket working: wss:// on an HTTPS page", async () => {
    const page = await context.newPage();
    watch(page);
    const r = await page.goto(`${origin.url}/wspage/secure`, { timeout: PAGE_MS });
    expect(r?.ok()).toBe(true);
    await page.waitForFunction(() => /^ws(:|-error:|-closed:)/.test(document.title), undefined, { timeout: PAGE_MS });
    expect(await page.title()).toBe(`ws:${WS_GREETING}|page says hi secure`);
    await page.close();
    expect(origin.messages.map((m) => m.data.toString())).toContain("page says hi secure");
  });

  it("keeps a page that uses a WebSocket working: ws:// on an HTTP page (Chromium tunnels it with CONNECT)", async () => {
    const page = await context.newPage();
    watch(page);
    const r = await page.goto(`${plain.url}/wspage/plain`, { timeout: PAGE_MS });
    expect(r?.ok()).toBe(true);
    await page.waitForFunction(() => /^ws(:|-error:|-closed:)/.test(document.title), undefined, { timeout: PAGE_MS });
    expect(await page.title()).toBe(`ws:${WS_GREETING}|page says hi plain`);
    await page.close();
  });

  it("recorded every response Chromium got, bodies equal, digests valid, nothing off loopback", async () => {
    await browser?.close();
    browser = undefined;
    await lathe.stop();
    stopped = true;
    const records: ReadRecord[] = await readAllWarcs(lathe.dir);
    for (const r of records) expect(checkDigests(r)).toEqual([]);
    const urls = [...responses.keys()].filter((u) => u.startsWith(origin.url) || u.startsWith(plain.url));
    expect(urls.length).toBeGreaterThanOrEqual(28);
    for (const url of urls) {
      const { response, request } = captureOf(records, url);
      const want = await direct(url, certs.caPem);
      expect(response.httpHead!.startsWith(`HTTP/1.1 ${want.status} `), url).toBe(true);
      expect(response.body!.equals(want.body), url).toBe(true);
      const seen = responses.get(url)!;
      if (seen.body) expect(seen.body.equals(want.body), `${url} as Chromium got it`).toBe(true);
      expect(request.httpHead!.startsWith(`GET ${new URL(url).pathname} HTTP/1.1\r\n`), url).toBe(true);
      // Names go upstream as the client sent them: title case over HTTP/1.1, lowercase over h2.
      if (url.startsWith("https:")) expect(request.httpHead, url).toMatch(/\r\nuser-agent: [^\r]*Chrome\//);
      else expect(request.httpHead, url).toMatch(/\r\nUser-Agent: [^\r]*Chrome\//);
      if (url.startsWith("https:")) expect(response.getAll("WARC-Protocol")).toEqual(["http/1.1", expect.stringMatching(/^tls\/1\.[23]$/)]);
    }
    // The WebSocket handshakes: 101 response (head only) + request with Upgrade: websocket.
    for (const uri of [`${origin.url}/ws/secure`, `${plain.url}/ws/plain`]) {
      const { response, request } = captureOf(records, uri);
      expect(response.httpHead, uri).toMatch(/^HTTP\/1\.1 101 /);
      expect(response.body!.length, uri).toBe(0);
      expect(request.httpHead, uri).toMatch(/\r\nupgrade: websocket\r\n/i);
    }
    // Chromium's own background requests (if any) were refused before DNS and not recorded.
    for (const r of records.filter((x) => x.type === "response" || x.type === "request")) {
      expect(new URL(r.get("WARC-Target-URI")!).hostname).toBe("127.0.0.1");
    }
  });
});
