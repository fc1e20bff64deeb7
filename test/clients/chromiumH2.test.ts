/**
 * Headless Chromium through lathe to an h2-only origin (http2.md): the page and its 33
 * subresources go over h2 on both legs, the origin sees one h2 session, and every resource is
 * in the WARC in its HTTP/1.1 form with WARC-Protocol h2. Page-load time through lathe against
 * direct is printed (a report, not a bar).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { existsSync } from "node:fs";
import net from "node:net";
import { chromium, type Browser } from "playwright-core";
import { originCerts } from "../helpers/certs.js";
import { startH2Origin, type H2Origin } from "../helpers/h2origin.js";
import { startTestLathe, type TestLathe } from "../helpers/lathe.js";
import { checkDigests, readAllWarcs } from "../helpers/warcs.js";
import { within } from "./util.js";

const CHROMIUM = "/usr/bin/chromium";
const hasChromium = existsSync(CHROMIUM);
const SUBRESOURCES = 33;
const COMMON = ["--no-sandbox", "--proxy-bypass-list=<-loopback>", "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic"];

function launch(args: string[]): Promise<Browser> {
  return within(30_000, chromium.launch({ executablePath: CHROMIUM, headless: true, timeout: 30_000, args: [...COMMON, ...args] }), "chromium.launch");
}

/** Load the page in a fresh context; resolves with the load time and every entry's nextHopProtocol. */
async function load(browser: Browser, url: string): Promise<{ ms: number; protocols: string[]; names: string[]; loaded: number }> {
  const context = await browser.newContext();
  const page = await context.newPage();
  const started = performance.now();
  const r = await page.goto(url, { waitUntil: "load", timeout: 20_000 });
  const ms = performance.now() - started;
  expect(r?.status()).toBe(200);
  const entries = await page.evaluate(() =>
    [...performance.getEntriesByType("navigation"), ...performance.getEntriesByType("resource")].map((e) => [e.name, (e as PerformanceResourceTiming).nextHopProtocol]),
  );
  const names = entries.map(([n]) => n!);
  const protocols = entries.map(([, p]) => p!);
  const loaded = await page.evaluate(() => (window as unknown as { loaded?: number }).loaded ?? 0);
  await context.close();
  return { ms, protocols, names, loaded };
}

/**
 * A TCP relay in front of lathe's proxy port that counts the CONNECTs Chromium opens, per target:
 * how many tunnels it uses for one host.
 */
async function countingRelay(to: number): Promise<{ url: string; connects: Map<string, number>; close(): Promise<void> }> {
  const connects = new Map<string, number>();
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const upstream = net.connect(to, "127.0.0.1");
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on("error", () => undefined);
      s.on("close", () => sockets.delete(s));
    }
    client.once("data", (first: Buffer) => {
      const m = /^CONNECT (\S+) /.exec(first.toString("latin1"));
      if (m) connects.set(m[1]!, (connects.get(m[1]!) ?? 0) + 1);
      upstream.write(first);
      client.pipe(upstream).pipe(client);
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return {
    url: `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`,
    connects,
    close: () => {
      for (const s of sockets) s.destroy();
      return new Promise((r) => server.close(() => r()));
    },
  };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

describe.skipIf(!hasChromium)("headless Chromium through lathe to an h2-only origin", () => {
  const certs = originCerts();
  let origin: H2Origin;
  let lathe: TestLathe;
  let viaLathe: Browser;
  let direct: Browser;
  let relay: Awaited<ReturnType<typeof countingRelay>>;

  beforeAll(async () => {
    origin = await startH2Origin(certs, { allowHTTP1: false });
    lathe = await startTestLathe({ upstream: { caFile: certs.caFile } });
    relay = await countingRelay(lathe.address.port);
    viaLathe = await launch([`--proxy-server=${relay.url}`, `--ignore-certificate-errors-spki-list=${lathe.ca.spkiSha256Base64}`]);
    direct = await launch(["--ignore-certificate-errors"]);
  });
  afterAll(async () => {
    await viaLathe?.close().catch(() => undefined);
    await direct?.close().catch(() => undefined);
    await lathe?.stop();
    await relay?.close();
    await origin?.close();
  });

  it("loads the page and its subresources over h2 on both legs, and records every one", async () => {
    const url = `${origin.url}/page/${SUBRESOURCES}`;
    const first = await load(viaLathe, url);
    expect(first.loaded).toBe(11); // the 11 scripts ran
    // The page and every subresource (Chromium may add entries of its own, such as a favicon).
    expect(first.names).toContain(url);
    for (let i = 0; i < SUBRESOURCES; i++) expect(first.names.some((n) => n.startsWith(`${origin.url}/sub/${i}.`)), `sub/${i}`).toBe(true);
    expect(new Set(first.protocols)).toEqual(new Set(["h2"]));
    // Chromium used one tunnel for the host, and lathe reached the origin over one session.
    expect(relay.connects.get(`127.0.0.1:${origin.port}`)).toBe(1);
    expect(origin.sessions).toBe(1);

    // Page-load time, through lathe and direct, alternating (medians of 3; printed, not asserted).
    const through: number[] = [];
    const straight: number[] = [];
    for (let i = 0; i < 3; i++) {
      through.push((await load(viaLathe, `${url}?round=${i}`)).ms);
      straight.push((await load(direct, `${url}?round=${i}`)).ms);
    }
    console.log(`h2 page with ${SUBRESOURCES} subresources: through lathe ${median(through).toFixed(0)} ms, direct ${median(straight).toFixed(0)} ms, ratio ${(median(through) / median(straight)).toFixed(2)}`);

    await viaLathe.close();
    await lathe.stop();
    const records = await readAllWarcs(lathe.dir);
    const uri = (r: (typeof records)[number]) => r.get("WARC-Target-URI") ?? "";
    const pages = records.filter((r) => r.type === "response" && uri(r) === url);
    expect(pages).toHaveLength(1);
    for (let i = 0; i < SUBRESOURCES; i++) {
      const ext = i % 3 === 0 ? "svg" : i % 3 === 1 ? "js" : "css";
      const rec = records.find((r) => (r.type === "response" || r.type === "revisit") && uri(r) === `${origin.url}/sub/${i}.${ext}`);
      expect(rec, `sub/${i}.${ext}`).toBeDefined();
      expect(rec!.getAll("WARC-Protocol")[0]).toBe("h2");
    }
    for (const r of records.filter((x) => x.type === "response" || x.type === "request")) expect(checkDigests(r), uri(r)).toEqual([]);
  });
});
