/**
 * The live page (issue #6) in headless Chromium against a real lathe: sessions' and the default
 * collection's captures (URL, status, type, size on disk, new/revisit, file), totals and the files
 * being written are shown, checked against the WARC records read back with warcio (offsets and
 * gzip member lengths included); more captures appear without a reload; hostile URLs stay text;
 * with a control token the page asks for it and the data routes require it.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createReadStream, existsSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { WARCParser } from "warcio";
import { chromium, type Browser, type Page } from "playwright-core";
import { startHttpOrigin, type Origin } from "../helpers/origin.js";
import { startTestLathe, type TestLathe } from "../helpers/lathe.js";
import { viaProxy } from "../helpers/client.js";
import { within } from "../clients/util.js";

const CHROMIUM = "/usr/bin/chromium";
const hasChromium = existsSync(CHROMIUM);
if (!hasChromium) console.warn(`livePage.test.ts skipped: ${CHROMIUM} does not exist (apt-get install -y chromium)`);
const isRoot = typeof process.getuid === "function" && process.getuid() === 0;

/** Every record of every WARC in `dir` (closed and `.open`), with its offset and on-disk length. */
interface Rec {
  file: string;
  offset: number;
  length: number;
  type: string;
  id: string;
  uri: string | undefined;
  concurrentTo: string[];
  status: number | null;
}

async function readRecords(dir: string): Promise<Rec[]> {
  const out: Rec[] = [];
  const files = readdirSync(dir).filter((f) => /\.warc(\.gz)?(\.open)?$/.test(f)).sort();
  for (const f of files) {
    const path = join(dir, f);
    const parser = new WARCParser(createReadStream(path), { parseHttp: false, keepHeadersCase: true });
    const inFile: Rec[] = [];
    for await (const rec of parser) {
      const block = Buffer.from(await rec.readFully(false));
      let status: number | null = null;
      if (rec.warcType === "response" || rec.warcType === "revisit") status = Number(/^HTTP\/\d(?:\.\d)? (\d{3})/.exec(block.toString("latin1"))?.[1] ?? NaN);
      inFile.push({
        file: f.replace(/\.open$/, ""),
        offset: parser.offset,
        length: parser.recordLength,
        type: rec.warcType!,
        id: rec.warcHeader("WARC-Record-ID")!,
        uri: rec.warcTargetURI ?? undefined,
        concurrentTo: (rec.warcHeader("WARC-Concurrent-To") ?? "").split(/,\s*/).filter(Boolean),
        status,
      });
    }
    // The lengths are the gzip members': they tile the file exactly.
    let end = 0;
    for (const r of inFile) {
      expect(r.offset, `${f} record ${r.id}`).toBe(end);
      end = r.offset + r.length;
    }
    expect(end, `${f} size`).toBe(statSync(path).size);
    out.push(...inFile);
  }
  return out;
}

interface ShownCapture {
  seq: number;
  recordId: string;
  time: string;
  status: string;
  type: string;
  sizeText: string;
  bytes: number;
  flag: string;
  url: string;
  file: string;
}
interface ShownGroup {
  key: string;
  open: string;
  name: string;
  state: string;
  totals: Record<string, number>;
  files: string[];
  rows: ShownCapture[];
}
interface Shown {
  groups: ShownGroup[];
  writers: Array<{ series: string; file: string; bytes: number; records: string }>;
  conn: string;
}

/** What the page shows, read from its DOM. */
function readPage(page: Page): Promise<Shown> {
  return page.evaluate(() => {
    const text = (e: Element | null) => (e?.textContent ?? "").trim();
    const groups = [...document.querySelectorAll("section.group")].map((s) => {
      const el = s as HTMLElement;
      const totals: Record<string, number> = {};
      for (const d of el.querySelectorAll("[data-total]")) totals[(d as HTMLElement).dataset.total!] = Number((d as HTMLElement).dataset.value);
      return {
        key: el.dataset.key!,
        open: el.dataset.open!,
        name: text(el.querySelector(".name")),
        state: text(el.querySelector(".state")),
        totals,
        files: [...el.querySelectorAll(".files code")].map(text),
        rows: [...el.querySelectorAll("tbody tr")].map((tr) => {
          const r = tr as HTMLElement;
          const cell = (c: string) => r.querySelector(`.c-${c}`)!;
          return {
            seq: Number(r.dataset.seq),
            recordId: r.dataset.recordId ?? "",
            time: text(cell("time")),
            status: text(cell("status")),
            type: text(cell("type")),
            sizeText: text(cell("size")),
            bytes: Number((cell("size") as HTMLElement).dataset.bytes),
            flag: text(cell("flag")),
            url: text(cell("url").querySelector(".u")),
            file: text(cell("file")),
          };
        }),
      };
    });
    const writers = [...document.querySelectorAll("#writer-rows tr")].map((tr) => {
      const r = tr as HTMLElement;
      const size = r.querySelectorAll("td")[2] as HTMLElement;
      return { series: r.dataset.series!, file: text(r.querySelector("code")), bytes: Number(size.dataset.bytes), records: text(r.querySelectorAll("td")[3]!) };
    });
    return { groups, writers, conn: text(document.getElementById("conn-text")) };
  });
}

const fmtBytes = (n: number) => {
  if (n < 1024) return `${n} B`;
  const u = ["KiB", "MiB", "GiB", "TiB"];
  let v = n / 1024;
  let i = 0;
  while (v >= 1024 && i < u.length - 1) {
    v /= 1024;
    i++;
  }
  return `${v >= 100 ? v.toFixed(0) : v.toFixed(1)} ${u[i]}`;
};

/**
 * Every row of a group against the WARCs: the record exists in the named file, at the shown
 * length, with the shown type, URL and status; the group's totals and files are those of its
 * records (main records, their request/metadata records, and resources).
 */
function checkGroup(g: ShownGroup, recs: Rec[]): void {
  const byId = new Map(recs.map((r) => [r.id, r]));
  for (const row of g.rows) {
    const r = byId.get(row.recordId);
    expect(r, `${g.key}: ${row.url} (${row.recordId}) is in a WARC`).toBeDefined();
    expect(row.file).toBe(r!.file);
    expect(row.type).toBe(r!.type);
    expect(row.url).toBe(r!.uri);
    expect(row.bytes).toBe(r!.length);
    expect(row.sizeText).toBe(fmtBytes(r!.length));
    expect(row.flag).toBe(r!.type === "revisit" ? "revisit" : "new");
    expect(row.status).toBe(r!.status === null ? "—" : String(r!.status));
    expect(row.time).toMatch(/^\d\d:\d\d:\d\d$/);
  }
  // Rows are newest first.
  expect(g.rows.map((r) => r.seq)).toEqual([...g.rows.map((r) => r.seq)].sort((a, b) => b - a));
  const mains = g.rows.map((r) => byId.get(r.recordId)!);
  const ids = new Set(mains.map((m) => m.id));
  const all = recs.filter((r) => ids.has(r.id) || r.concurrentTo.some((c) => ids.has(c) && r.type !== "resource"));
  expect(g.totals.captures).toBe(mains.filter((m) => m.type === "response" || m.type === "revisit").length);
  expect(g.totals.revisits).toBe(mains.filter((m) => m.type === "revisit").length);
  expect(g.totals.new).toBe(mains.filter((m) => m.type === "response").length);
  expect(g.totals.resources).toBe(mains.filter((m) => m.type === "resource" || m.type === "metadata").length);
  expect(g.totals.records).toBe(all.length);
  expect(g.totals.bytes).toBe(all.reduce((n, r) => n + r.length, 0));
  expect(new Set(g.files)).toEqual(new Set(all.map((r) => r.file)));
  expect(g.totals.files).toBe(new Set(all.map((r) => r.file)).size);
}

async function launch(): Promise<Browser> {
  return within(30_000, chromium.launch({ executablePath: CHROMIUM, headless: true, timeout: 30_000, args: [...(isRoot ? ["--no-sandbox"] : []), "--disable-background-networking", "--no-first-run"] }), "chromium.launch");
}

/** Wait until the page shows `n` rows in the group whose key starts with `key`. */
async function waitRows(page: Page, key: string, n: number): Promise<void> {
  await page.waitForFunction(
    ([k, want]) => {
      const s = [...document.querySelectorAll("section.group")].find((x) => (x as HTMLElement).dataset.key === k);
      return !!s && s.querySelectorAll("tbody tr").length >= (want as number);
    },
    [key, n] as const,
    { timeout: 15_000 },
  );
}

describe.skipIf(!hasChromium)("the live page", () => {
  let origin: Origin;
  let lathe: TestLathe;
  let browser: Browser;

  beforeAll(async () => {
    origin = await startHttpOrigin();
    lathe = await startTestLathe({ upstream: { allowHosts: ["127.0.0.1", "localhost"] } });
    browser = await launch();
  });
  afterAll(async () => {
    await browser?.close().catch(() => undefined);
    await lathe?.stop();
    await origin?.close();
  });

  const api = async (path: string, init: RequestInit = {}) => {
    const r = await fetch(`${lathe.controlUrl}${path}`, { ...init, headers: { "Content-Type": "application/json", ...(init.headers ?? {}) } });
    const body = r.status === 204 ? null : await r.json();
    if (!r.ok) throw new Error(`${init.method ?? "GET"} ${path}: ${r.status} ${JSON.stringify(body)}`);
    return body;
  };

  it("shows each session's and the default collection's captures, totals and files as the WARCs hold them, and updates without a reload", async () => {
    await api("/api/v1/collections", { method: "POST", body: JSON.stringify({ name: "live-1" }) });
    const s = await api("/api/v1/sessions", { method: "POST", body: JSON.stringify({ collection: "live-1" }) });
    const pageUrl = `${origin.url}/text/300`;
    for (const path of ["/text/300", "/bytes/500", "/bytes/500", "/status/404", "/bytes/800"]) {
      const r = await viaProxy(s.proxyUrl, `${origin.url}${path}`);
      expect(r.status).toBe(path.startsWith("/status/") ? 404 : 200);
    }
    // The default collection: traffic on the main port (a bulk crawler), with a revisit too.
    for (const path of ["/bytes/300", "/bytes/300"]) expect((await viaProxy(lathe.proxyUrl, `${origin.url}${path}`)).status).toBe(200);
    // A pushed resource linked to the session's page.
    const shot = await fetch(`${lathe.controlUrl}/api/v1/resources?collection=live-1&kind=view&page=${encodeURIComponent(pageUrl)}`, {
      method: "POST",
      body: new Uint8Array([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 1, 2, 3, 4]),
      headers: { "Content-Type": "image/png" },
    });
    expect(shot.status).toBe(201);
    const written = await shot.json();

    const page = await browser.newPage({ viewport: { width: 1360, height: 1100 } });
    const consoleErrors: string[] = [];
    page.on("console", (m) => void (m.type() === "error" && consoleErrors.push(m.text())));
    page.on("pageerror", (e) => consoleErrors.push(e.message));
    await page.goto(`${lathe.controlUrl}/`);
    await waitRows(page, `session:${s.id}`, 6);
    await waitRows(page, "collection:default", 2);
    await page.waitForFunction(() => document.getElementById("conn-text")?.textContent === "live");

    let shown = await readPage(page);
    let recs = await readRecords(lathe.dir);
    const session = shown.groups.find((g) => g.key === `session:${s.id}`)!;
    expect(session.name).toBe(s.id);
    expect(session.state).toBe("recording");
    // Rows come in the order the writes were confirmed (an exchange is archived after its answer
    // went out), newest first; compare as multisets.
    const summarize = (g: ShownGroup) => g.rows.map((r) => [r.url, r.type, r.status, r.flag].join(" ")).sort();
    expect(summarize(session)).toEqual(
      [
        `urn:view:${pageUrl} resource — new`,
        `${origin.url}/text/300 response 200 new`,
        `${origin.url}/bytes/500 response 200 new`,
        `${origin.url}/bytes/500 revisit 200 revisit`,
        `${origin.url}/status/404 response 404 new`,
        `${origin.url}/bytes/800 response 200 new`,
      ].sort(),
    );
    expect(session.rows.find((r) => r.type === "resource")!.recordId).toBe(written.recordId);
    expect(session.totals).toMatchObject({ captures: 5, revisits: 1, new: 4, resources: 1, pages: 1, failed: 0 });
    checkGroup(session, recs);
    const def = shown.groups.find((g) => g.key === "collection:default")!;
    expect(def.rows.map((r) => [r.url, r.type, r.flag])).toEqual([
      [`${origin.url}/bytes/300`, "revisit", "revisit"],
      [`${origin.url}/bytes/300`, "response", "new"],
    ]);
    expect(def.totals).toMatchObject({ captures: 2, revisits: 1, resources: 0 });
    checkGroup(def, recs);
    // Open sessions come first, then the collections.
    expect(shown.groups.map((g) => g.key).slice(0, 2)).toEqual([`session:${s.id}`, "collection:default"]);
    // The files being written: each writer's current file, its size on disk and its records.
    expect(shown.writers.map((w) => w.series).sort()).toEqual(["lathe", "live-1"].sort());
    for (const w of shown.writers) {
      expect(w.file).toMatch(/\.warc\.gz$/);
      expect(existsSync(join(lathe.dir, `${w.file}.open`))).toBe(true);
      expect(w.bytes).toBe(statSync(join(lathe.dir, `${w.file}.open`)).size);
      // The writer's counters run since start, over all its files (warcinfo records not counted).
      expect(Number(w.records)).toBe(recs.filter((r) => r.file.startsWith(`${w.series}-`) && r.type !== "warcinfo").length);
    }
    // The snapshot route says the same.
    const snap = await api("/api/v1/live");
    expect(snap.groups.find((g: { key: string }) => g.key === `session:${s.id}`).captures.map((c: { recordId: string }) => c.recordId)).toEqual([...session.rows].reverse().map((r) => r.recordId));

    if (process.env.LATHE_LIVE_SCREENSHOT) await page.screenshot({ path: process.env.LATHE_LIVE_SCREENSHOT, fullPage: true });

    // More captures land: the page shows them without a reload.
    await page.evaluate(() => ((window as unknown as { marker: number }).marker = 42));
    for (const path of ["/bytes/500", "/text/301", "/bytes/1200"]) expect((await viaProxy(s.proxyUrl, `${origin.url}${path}`)).status).toBe(200);
    expect((await viaProxy(lathe.proxyUrl, `${origin.url}/bytes/301`)).status).toBe(200);
    await waitRows(page, `session:${s.id}`, 9);
    await waitRows(page, "collection:default", 3);
    expect(await page.evaluate(() => (window as unknown as { marker?: number }).marker)).toBe(42);
    await page.waitForFunction(() => document.querySelector("section.group [data-total=captures]")?.textContent === "8");
    shown = await readPage(page);
    recs = await readRecords(lathe.dir);
    const session2 = shown.groups.find((g) => g.key === `session:${s.id}`)!;
    expect(summarize({ ...session2, rows: session2.rows.slice(0, 3) })).toEqual(
      [`${origin.url}/bytes/1200 response 200 new`, `${origin.url}/text/301 response 200 new`, `${origin.url}/bytes/500 revisit 200 revisit`].sort(),
    );
    expect(session2.totals).toMatchObject({ captures: 8, revisits: 2, resources: 1, pages: 2 });
    checkGroup(session2, recs);
    checkGroup(shown.groups.find((g) => g.key === "collection:default")!, recs);

    // Closing the session: the page marks it closed (its files were rolled over to final names).
    const summary = await api(`/api/v1/sessions/${s.id}/close`, { method: "POST" });
    await page.waitForFunction((key) => (document.querySelector(`section.group[data-key="${key}"]`) as HTMLElement | null)?.dataset.open === "false", `session:${s.id}`, { timeout: 10_000 });
    shown = await readPage(page);
    const closed = shown.groups.find((g) => g.key === `session:${s.id}`)!;
    expect(closed.state).toBe("closed");
    expect(closed.totals.captures).toBe(summary.captures);
    expect(closed.totals.revisits).toBe(summary.revisits);
    expect(new Set(closed.files)).toEqual(new Set(summary.files));
    expect(shown.groups.at(-1)!.key).toBe(`session:${s.id}`);
    expect(consoleErrors).toEqual([]);
    await page.close();
  });

  it("shows hostile URLs as text", async () => {
    const evil = `${origin.url}/bytes/64?q=<script>window.pwned=1</script><img%20src=x%20onerror="window.pwned=2">`;
    expect((await viaProxy(lathe.proxyUrl, evil)).status).toBe(200);
    const page = await browser.newPage();
    await page.goto(`${lathe.controlUrl}/`);
    await page.waitForFunction((u) => [...document.querySelectorAll("td.c-url .u")].some((e) => e.textContent === u), evil, { timeout: 15_000 });
    expect(await page.evaluate(() => (window as unknown as { pwned?: number }).pwned)).toBeUndefined();
    if (process.env.LATHE_LIVE_SCREENSHOT) await page.screenshot({ path: `${process.env.LATHE_LIVE_SCREENSHOT}.hostile.png`, fullPage: true });
    expect(await page.evaluate(() => document.querySelectorAll("main script, main img").length)).toBe(0);
    const recs = await readRecords(lathe.dir);
    expect(recs.some((r) => r.type === "response" && r.uri === evil)).toBe(true);
    // The page's own script is the only one allowed (CSP with a per-response nonce).
    const r = await fetch(`${lathe.controlUrl}/`);
    expect(r.headers.get("content-type")).toBe("text/html; charset=utf-8");
    expect(r.headers.get("content-security-policy")).toMatch(/script-src 'nonce-[A-Za-z0-9+/=]{24}'/);
    expect(r.headers.get("x-frame-options")).toBe("DENY");
    await page.close();
  });
});

describe.skipIf(!hasChromium)("the live page with a control token", () => {
  const TOKEN = "live-t0ken-\u00e9";
  let origin: Origin;
  let lathe: TestLathe;
  let browser: Browser;

  beforeAll(async () => {
    origin = await startHttpOrigin();
    lathe = await startTestLathe({ control: { token: TOKEN }, upstream: { allowHosts: ["127.0.0.1", "localhost"] } });
    browser = await launch();
  });
  afterAll(async () => {
    await browser?.close().catch(() => undefined);
    await lathe?.stop();
    await origin?.close();
  });

  it("serves the page without data, asks for the token, and requires it on the data routes", async () => {
    const auth = { Authorization: `Bearer ${Buffer.from(TOKEN, "utf8").toString("latin1")}` };
    expect((await fetch(`${lathe.controlUrl}/`)).status).toBe(200);
    expect((await fetch(`${lathe.controlUrl}/api/v1/live`)).status).toBe(401);
    expect((await fetch(`${lathe.controlUrl}/api/v1/live/events`)).status).toBe(401);
    expect((await fetch(`${lathe.controlUrl}/api/v1/live`, { headers: { Authorization: "Bearer wrong" } })).status).toBe(401);
    expect((await fetch(`${lathe.controlUrl}/api/v1/live`, { headers: auth })).status).toBe(200);
    // A page of another site cannot read the stream even with the token.
    expect((await fetch(`${lathe.controlUrl}/api/v1/live/events`, { headers: { ...auth, "Sec-Fetch-Site": "cross-site" } })).status).toBe(403);
    const html = await (await fetch(`${lathe.controlUrl}/`)).text();
    expect(html).not.toContain(TOKEN);

    expect((await viaProxy(lathe.proxyUrl, `${origin.url}/bytes/100`)).status).toBe(200);

    const context = await browser.newContext();
    const page = await context.newPage();
    await page.goto(`${lathe.controlUrl}/`);
    await page.waitForSelector("#login:not([hidden])");
    expect(await page.evaluate(() => document.getElementById("conn-text")!.textContent)).toBe("token required");
    expect(await page.locator("section.group").count()).toBe(0);
    // A wrong token is refused and said so.
    await page.fill("#token", "nope");
    await page.click("#login button");
    await page.waitForFunction(() => document.getElementById("login-msg")!.className === "err");
    if (process.env.LATHE_LIVE_SCREENSHOT) await page.screenshot({ path: `${process.env.LATHE_LIVE_SCREENSHOT}.login.png` });
    expect(await page.locator("section.group").count()).toBe(0);
    // The right one shows the captures, and is kept for this tab (a reload needs no new entry).
    await page.fill("#token", TOKEN);
    await page.click("#login button");
    await waitRows(page, "collection:default", 1);
    expect(await page.locator("#login").isHidden()).toBe(true);
    await page.reload();
    await waitRows(page, "collection:default", 1);
    expect(await page.locator("#login").isHidden()).toBe(true);
    // No cookie was set: the credential is not ambient.
    expect(await context.cookies()).toEqual([]);
    await context.close();

    // A link with the token in the fragment (never sent to the server) works, and the fragment is dropped.
    const c2 = await browser.newContext();
    const p2 = await c2.newPage();
    await p2.goto(`${lathe.controlUrl}/#token=${encodeURIComponent(TOKEN)}`);
    await waitRows(p2, "collection:default", 1);
    expect(p2.url()).toBe(`${lathe.controlUrl}/`);
    const row = (await readPage(p2)).groups.find((g) => g.key === "collection:default")!.rows[0]!;
    expect(row.url).toBe(`${origin.url}/bytes/100`);
    checkGroup((await readPage(p2)).groups.find((g) => g.key === "collection:default")!, await readRecords(lathe.dir));
    await c2.close();
  });
});
