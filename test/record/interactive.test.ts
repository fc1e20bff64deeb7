/**
 * The interactive recording session (what `lathe record` without --headless runs), driven in
 * process with a headless Chromium standing in for the person: pages opened in the first tab,
 * in new tabs and by following links are all recorded with their screenshots, in a collection
 * created for the occasion; Ctrl-C (the abort signal) or closing the browser ends the session,
 * and the summary is what the WARCs hold.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { existsSync, readdirSync } from "node:fs";
import { originCerts } from "../helpers/certs.js";
import { startWsOrigin, type WsOrigin } from "../helpers/origin.js";
import { startTestLathe } from "../helpers/lathe.js";
import { captureOf, readAllWarcs } from "../helpers/warcs.js";
import { runRecording, type RecordOptions, type RecordResult } from "../../src/record/recorder.js";
import type { RecordingBrowser } from "../../src/record/browser.js";

const CHROMIUM = "/usr/bin/chromium";
const hasChromium = existsSync(CHROMIUM);
if (!hasChromium) console.warn(`interactive.test.ts skipped: ${CHROMIUM} does not exist (apt-get install -y chromium; npm test's pretest installs it)`);

async function until(cond: () => boolean, ms: number, what: string) {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe.skipIf(!hasChromium)(`interactive recording session${hasChromium ? "" : ` (skipped: ${CHROMIUM} not installed)`}`, () => {
  const certs = originCerts();
  let site: WsOrigin;
  beforeAll(async () => {
    site = await startWsOrigin(certs);
  });
  afterAll(async () => {
    await site?.close();
  });

  async function session(drive: (b: RecordingBrowser, lines: string[], abort: () => void) => Promise<void>): Promise<{ result: RecordResult; dir: string; lines: string[]; problems: unknown[] }> {
    const lathe = await startTestLathe({ upstream: { caFile: certs.caFile } });
    const lines: string[] = [];
    const problems: unknown[] = [];
    const ac = new AbortController();
    const o: RecordOptions = {
      urls: [`${site.url}/page/3`],
      collection: "manual",
      headless: true,
      interactive: true,
      browser: CHROMIUM,
      waitMs: 0,
      scroll: false,
      acceptInvalidCerts: false,
      pageTimeoutMs: 30_000,
      signal: ac.signal,
      out: (l) => lines.push(l),
      onBrowser: (b) => void drive(b, lines, () => ac.abort()).catch((e) => (problems.push(e), ac.abort())),
    };
    try {
      const result = await runRecording(lathe, o);
      return { result, dir: lathe.dir, lines, problems };
    } finally {
      await lathe.stop();
    }
  }

  const okLine = (lines: string[], url: string) => lines.some((l) => l.startsWith("ok ") && l.includes(` ${url} `));

  it("records the first tab, new tabs and followed navigations; Ctrl-C ends it", async () => {
    const [p3, p6, p9] = [3, 6, 9].map((n) => `${site.url}/page/${n}`) as [string, string, string];
    const { result, dir, lines, problems } = await session(async (b, lines, abort) => {
      await until(() => okLine(lines, p3), 30_000, "the first page");
      const tab = await b.context.newPage(); // the person opens a tab
      await tab.goto(p6);
      await until(() => okLine(lines, p6), 30_000, "the new tab's page");
      await tab.evaluate((u) => (location.href = u), p9); // and follows a link there
      await until(() => okLine(lines, p9), 30_000, "the followed page");
      abort(); // Ctrl-C
    });
    expect(problems).toEqual([]);
    expect(result.interrupted).toBe(false);
    expect(result.collection).toBe("manual");
    expect(result.pages.map((p) => [p.finalUrl, p.ok])).toEqual([
      [p3, true],
      [p6, true],
      [p9, true],
    ]);
    expect(lines.some((l) => l.startsWith("recording: "))).toBe(true);
    expect(readdirSync(dir).some((f) => f.endsWith(".open"))).toBe(false);
    const records = await readAllWarcs(dir);
    for (const p of [p3, p6, p9]) {
      const page = captureOf(records, p).response;
      for (const variant of ["view", "thumbnail"]) {
        const r = records.find((x) => x.type === "resource" && x.get("WARC-Target-URI") === `urn:${variant}:${p}`);
        expect(r?.get("WARC-Concurrent-To"), `${variant} of ${p}`).toBe(page.get("WARC-Record-ID"));
      }
    }
    const captures = records.filter((r) => r.type === "response" || r.type === "revisit");
    expect(result.session.captures).toBe(captures.length);
    expect(result.session.revisits).toBe(records.filter((r) => r.type === "revisit").length);
    expect(result.files).toEqual(readdirSync(dir).filter((f) => f.endsWith(".warc.gz")).sort());
  });

  it("ends when the person closes the browser", async () => {
    const { result, problems } = await session(async (b, lines) => {
      await until(() => okLine(lines, `${site.url}/page/3`), 30_000, "the first page");
      await b.context.close(); // the window is closed
    });
    expect(problems).toEqual([]);
    expect(result.pages.length).toBe(1);
    expect(result.pages[0]!.ok).toBe(true);
    expect(result.session.captures).toBeGreaterThanOrEqual(5);
  });
});
