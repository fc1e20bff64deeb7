import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { existsSync } from "node:fs";
import { chromium, type Browser } from "playwright-core";
import { originCerts } from "../helpers/certs.js";
import { startHttpsOrigin, type Origin } from "../helpers/origin.js";
import { startTestLathe, type TestLathe } from "../helpers/lathe.js";
import { checkDigests, readAllWarcs } from "../helpers/warcs.js";
import { viaProxy } from "../helpers/client.js";

const CHROMIUM = "/usr/bin/chromium";
const has = existsSync(CHROMIUM);

describe.skipIf(!has)(`headless Chromium through a session selected by proxy credentials${has ? "" : " (skipped: apt-get install -y chromium)"}`, () => {
  let origin: Origin;
  let lathe: TestLathe;
  let browser: Browser;
  beforeAll(async () => {
    const certs = originCerts();
    origin = await startHttpsOrigin(certs);
    // required: Chromium sends credentials only after a 407 challenge.
    lathe = await startTestLathe({ proxy: { auth: "required" }, upstream: { caFile: certs.caFile, allowHosts: ["127.0.0.1"] } });
  });
  afterAll(async () => {
    await browser?.close();
    await lathe.stop();
    await origin.close();
  });

  it("records the page and its subresources into the session's collection", async () => {
    lathe.facade.createCollection({ name: "browser-crawl", warcinfo: { description: "Chromium with credentials" } });
    const s = await lathe.facade.openSession({ collection: "browser-crawl" });
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      headless: true,
      proxy: { server: lathe.proxyUrl, username: s.username, password: s.password!, bypass: "<-loopback>" },
      args: ["--no-sandbox", `--ignore-certificate-errors-spki-list=${lathe.ca.spkiSha256Base64}`, "--proxy-bypass-list=<-loopback>", "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic"],
    });
    const page = await browser.newPage();
    const res = await page.goto(`${origin.url}/page/9`, { waitUntil: "load", timeout: 30000 });
    expect(res?.status()).toBe(200);
    await page.waitForFunction(() => document.title.startsWith("loaded:"), null, { timeout: 15000 });
    await browser.close();
    const summary = await lathe.facade.closeSession(s.id);
    expect(summary.captures).toBeGreaterThanOrEqual(11); // the page, 9 subresources, the fetch
    const recs = await readAllWarcs(lathe.dir);
    for (const r of recs) expect(checkDigests(r)).toEqual([]);
    const ours = recs.filter((r) => summary.files.some((f) => r.file.endsWith(f)));
    expect(ours[0]!.block.toString()).toContain("description: Chromium with credentials\r\n");
    const uris = ours.filter((r) => r.type === "response" || r.type === "revisit").map((r) => r.get("WARC-Target-URI"));
    expect(uris).toContain(`${origin.url}/page/9`);
    expect(uris).toContain(`${origin.url}/text/100`);
    // No request went anywhere but loopback.
    for (const r of recs) if (r.get("WARC-Target-URI")?.startsWith("http")) expect(r.get("WARC-Target-URI")).toMatch(/^https?:\/\/127\.0\.0\.1[:/]/);
  });

  it("answers 407 with a Basic challenge to a request without credentials in required mode", async () => {
    const r = await viaProxy(lathe.proxyUrl, "http://127.0.0.1:9/never-fetched");
    expect(r.status).toBe(407);
    expect(r.rawHeaders).toContain('Basic realm="lathe"');
  });
});
