/**
 * `robots: "obey-except-embeds"` with headless Chromium (issue #27): a page whose images
 * robots.txt disallows still renders them (Chromium's `Sec-Fetch-Dest: image` marks them as page
 * requisites), a page robots.txt disallows is refused with 403, and an image the same robots.txt
 * disallows is refused too when it is asked for as a page (a navigation).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { existsSync } from "node:fs";
import { rm } from "node:fs/promises";
import http from "node:http";
import type net from "node:net";
import { startTestLathe, type TestLathe } from "../helpers/lathe.js";
import { within } from "../clients/util.js";
import { launchRecordingBrowser, type RecordingBrowser } from "../../src/record/browser.js";

const CHROMIUM = "/usr/bin/chromium";
const hasChromium = existsSync(CHROMIUM);
if (!hasChromium) console.warn(`embeds.test.ts skipped: ${CHROMIUM} does not exist (apt-get install -y chromium)`);

const PAGE_MS = 20_000;
// A 1×1 PNG.
const PNG = Buffer.from("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==", "base64");

describe.skipIf(!hasChromium)(`obey-except-embeds with Chromium${hasChromium ? "" : " (skipped: no chromium)"}`, () => {
  let origin: http.Server;
  let base = "";
  let lathe: TestLathe;
  let browser: RecordingBrowser | undefined;
  /** Each request the origin got: path and its Sec-Fetch-Dest. */
  const seen: Array<{ path: string; dest: string | undefined }> = [];

  beforeAll(async () => {
    origin = http.createServer((req, res) => {
      const path = req.url ?? "/";
      seen.push({ path, dest: req.headers["sec-fetch-dest"] as string | undefined });
      if (path === "/robots.txt") return void res.end("User-agent: *\nDisallow: /img/\nDisallow: /secret\n");
      if (path.startsWith("/img/")) {
        res.writeHead(200, { "Content-Type": "image/png", "Content-Length": PNG.length });
        return void res.end(PNG);
      }
      res.writeHead(200, { "Content-Type": "text/html" });
      res.end(`<!doctype html><title>page ${path}</title><img id="a" src="/img/a.png"><img id="b" src="/img/b.png">`);
    });
    await new Promise<void>((r) => origin.listen(0, "127.0.0.1", r));
    base = `http://127.0.0.1:${(origin.address() as net.AddressInfo).port}`;
    lathe = await startTestLathe();
    lathe.facade.createCollection({ name: "embeds", politeness: { enabled: true, robots: "obey-except-embeds" } });
    const session = await lathe.facade.openSession({ collection: "embeds" });
    // Launched as `lathe record` launches it (decisions.md §9 flags, a fresh profile).
    browser = await within(30_000, launchRecordingBrowser({ executablePath: CHROMIUM, headless: true, proxyUrl: session.proxyUrl, spkiSha256Base64: lathe.ca.spkiSha256Base64, root: true }), "chromium launch");
  }, 60_000);

  afterAll(async () => {
    await browser?.close().catch(() => undefined);
    await lathe?.stop().catch(() => undefined);
    await new Promise((r) => origin?.close(r));
    if (lathe) for (const d of [lathe.dir, lathe.certsDir]) await rm(d, { recursive: true, force: true });
  });

  it("renders a page's disallowed images, and refuses a disallowed page and a disallowed image asked for as a page", async () => {
    const page = await browser!.context.newPage();
    const r = await page.goto(`${base}/index.html`, { timeout: PAGE_MS, waitUntil: "load" });
    expect(r?.status()).toBe(200);
    const widths = await page.evaluate(() => [...document.images].map((i) => i.naturalWidth));
    expect(widths).toEqual([1, 1]);
    // The images went through because Chromium said what they were.
    expect(seen.filter((s) => s.path.startsWith("/img/")).map((s) => s.dest)).toEqual(["image", "image"]);
    const secret = await page.goto(`${base}/secret.html`, { timeout: PAGE_MS });
    expect(secret?.status()).toBe(403);
    expect(await secret?.text()).toMatch(/blocked by .*robots\.txt \(line 3: Disallow: \/secret\)/);
    const direct = await page.goto(`${base}/img/c.png`, { timeout: PAGE_MS });
    expect(direct?.status()).toBe(403);
    expect(seen.map((s) => s.path)).not.toContain("/secret.html");
    expect(seen.map((s) => s.path)).not.toContain("/img/c.png");
    expect(seen.filter((s) => s.path === "/robots.txt")).toHaveLength(1);
    expect(lathe.facade.politeness().embedsExempted).toBe(2);
  }, 60_000);
});
