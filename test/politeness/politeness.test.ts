/**
 * Politeness per collection (issue #27), measured from the origin's side over real sockets: one
 * request at a time with the delay between them, in arrival order, another host not slowed;
 * back-off after 500 and 429 (Retry-After); queue full and maximum wait → 503 with Retry-After;
 * robots.txt (wildcards, Allow, Crawl-delay, a group for the crawler's token, 404, unreachable)
 * fetched once and recorded and indexed, refused URLs not; the User-Agent rule; and nothing
 * held back when politeness is off or the session is a person's.
 *
 * Each test has host names of its own (*.test, resolved to the one origin), so the per-host
 * state of one does not touch another.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import dns from "node:dns";
import http from "node:http";
import type net from "node:net";
import { rm } from "node:fs/promises";
import { startTestLathe, type TestLathe } from "../helpers/lathe.js";
import { viaProxy, type ClientResponse } from "../helpers/client.js";
import { readAllWarcs } from "../helpers/warcs.js";

interface Arrival {
  host: string;
  path: string;
  ua: string;
  startMs: number;
  endMs: number;
}

const arrivals: Arrival[] = [];
/** robots.txt per host name: a body (200), a status, or "reset" (the connection is dropped). */
const robots: Record<string, string | number | "reset"> = {};
/** Statuses to answer, in turn, per host (then 200). */
const scripted: Record<string, Array<[number, string[]]>> = {};
let inFlight = 0;
let maxInFlight = 0;

function originHandler(req: http.IncomingMessage, res: http.ServerResponse): void {
  const host = (req.headers.host ?? "").replace(/:\d+$/, "");
  const path = req.url ?? "/";
  const a: Arrival = { host, path, ua: req.headers["user-agent"] ?? "", startMs: Date.now(), endMs: 0 };
  arrivals.push(a);
  inFlight++;
  maxInFlight = Math.max(maxInFlight, inFlight);
  const finish = (status: number, body: string, headers: Record<string, string> = {}) => {
    a.endMs = Date.now();
    inFlight--;
    res.writeHead(status, { "Content-Type": "text/plain", ...headers });
    res.end(body);
  };
  if (path === "/robots.txt" && host in robots) {
    const r = robots[host]!;
    if (r === "reset") {
      inFlight--;
      a.endMs = Date.now();
      return void req.socket.destroy();
    }
    return typeof r === "number" ? finish(r, "no\n") : finish(200, r);
  }
  const next = scripted[host]?.shift();
  if (next) return finish(next[0], `status ${next[0]}\n`, Object.fromEntries(next[1].length ? [next[1] as [string, string]] : []));
  const hold = /^\/hold\/(\d+)/.exec(path);
  if (hold) return void setTimeout(() => finish(200, `held ${path}\n`), Number(hold[1]));
  finish(200, `page ${path}\n`);
}

let origin: http.Server;
let port = 0;
let lathe: TestLathe;

const lookup = ((host: string, opts: dns.LookupOptions, cb: (...a: unknown[]) => void) => {
  if (!host.endsWith(".test")) return dns.lookup(host, opts, cb as never);
  if (opts.all) cb(null, [{ address: "127.0.0.1", family: 4 }]);
  else cb(null, "127.0.0.1", 4);
}) as unknown as net.LookupFunction;

const url = (host: string, path: string) => `http://${host}:${port}${path}`;
const get = (collection: string, host: string, path: string, headers: Record<string, string> = {}): Promise<ClientResponse> =>
  viaProxy(lathe.proxyUrl, url(host, path), { headers: { Host: `${host}:${port}`, "User-Agent": "testbot/1.0 (+https://example.org/bot)", "Warcprox-Meta": JSON.stringify({ lathe: { collection } }), ...headers } });
const at = (host: string) => arrivals.filter((a) => a.host === host);
const header = (r: ClientResponse, name: string) => {
  const i = r.rawHeaders.findIndex((h, j) => j % 2 === 0 && h.toLowerCase() === name);
  return i < 0 ? undefined : r.rawHeaders[i + 1];
};
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Timer and clock granularity: a gap the gate keeps may read 1–2 ms shorter at the origin. */
const SLACK = 5;

beforeAll(async () => {
  origin = http.createServer(originHandler);
  await new Promise<void>((r) => origin.listen(0, "127.0.0.1", r));
  port = (origin.address() as net.AddressInfo).port;
  lathe = await startTestLathe({}, { lookup });
  const polite = (name: string, politeness: Record<string, unknown>) => lathe.facade.createCollection({ name, politeness: { enabled: true, ...politeness } });
  polite("steady", { maxConcurrentPerHost: 1, delayMs: 200 });
  polite("backoff", { backoffMs: 400, maxBackoffMs: 5000 });
  polite("retry", { backoffMs: 30_000 });
  polite("tight", { maxQueuePerHost: 2, maxWaitMs: 300 });
  polite("robots", { robots: "obey", maxDelayMs: 1000 });
  polite("contact", { userAgent: { requireContact: true, suffix: "" } });
  polite("suffix", { userAgent: { requireContact: true, suffix: "(+https://archive.example/contact)" } });
});

afterAll(async () => {
  await lathe?.stop().catch(() => undefined);
  await new Promise((r) => origin?.close(r));
  if (lathe) for (const d of [lathe.dir, lathe.certsDir]) await rm(d, { recursive: true, force: true });
});

describe("the per-host gate", () => {
  it("takes 20 concurrent requests to one host one at a time, ≥ 200 ms apart, in arrival order; another host is not slowed", async () => {
    const many: Array<Promise<ClientResponse>> = [];
    // Staggered by 10 ms so that their order at lathe is known.
    for (let i = 0; i < 20; i++) {
      many.push(get("steady", "one.test", `/seq/${i}`));
      await sleep(10);
    }
    const other: number[] = [];
    for (let i = 0; i < 3; i++) {
      expect((await get("steady", "two.test", `/other/${i}`)).status).toBe(200);
      other.push(Date.now());
    }
    const done = await Promise.all(many);
    expect(done.map((r) => r.status)).toEqual(Array(20).fill(200));
    const one = at("one.test");
    expect(one.map((a) => a.path)).toEqual(Array.from({ length: 20 }, (_, i) => `/seq/${i}`));
    for (let i = 1; i < one.length; i++) expect(one[i]!.startMs - one[i - 1]!.endMs, `gap before /seq/${i}`).toBeGreaterThanOrEqual(200 - SLACK);
    // two.test kept its own 200 ms gaps, and was done long before one.test's queue was.
    expect(other.at(-1)!).toBeLessThan(one.at(-1)!.startMs);
  }, 30_000);

  it("backs off after 500s, growing; a success ends the back-off", async () => {
    scripted["b500.test"] = [[500, []], [500, []]];
    for (let i = 0; i < 4; i++) await get("backoff", "b500.test", `/try/${i}`);
    const a = at("b500.test");
    expect(a).toHaveLength(4);
    expect(a[1]!.startMs - a[0]!.endMs).toBeGreaterThanOrEqual(400 - SLACK);
    expect(a[2]!.startMs - a[1]!.endMs).toBeGreaterThanOrEqual(800 - SLACK);
    const view = lathe.facade.politeness().hosts.find((h) => h.host === "b500.test")!;
    expect(view).toMatchObject({ consecutiveFailures: 0, lastStatus: 200 });
  }, 20_000);

  it("honours a 429's Retry-After: 2 (not the 30 s back-off it would otherwise take)", async () => {
    scripted["b429.test"] = [[429, ["Retry-After", "2"]]];
    expect((await get("retry", "b429.test", "/a")).status).toBe(429);
    expect((await get("retry", "b429.test", "/b")).status).toBe(200);
    const a = at("b429.test");
    expect(a[1]!.startMs - a[0]!.endMs).toBeGreaterThanOrEqual(2000 - SLACK);
  }, 20_000);

  it("answers 503 with Retry-After when the host's queue is full, and when a request waited maxWaitMs; those never reach the origin", async () => {
    const first = get("tight", "q.test", "/hold/1500");
    for (let i = 0; i < 100 && at("q.test").length === 0; i++) await sleep(10);
    const waiting = [get("tight", "q.test", "/w/1"), get("tight", "q.test", "/w/2")];
    await sleep(100);
    const full = await get("tight", "q.test", "/w/3");
    expect(full.status).toBe(503);
    expect(Number(header(full, "retry-after"))).toBeGreaterThanOrEqual(1);
    expect(full.body.toString()).toMatch(/politeness\.maxQueuePerHost 2/);
    for (const r of await Promise.all(waiting)) {
      expect(r.status).toBe(503);
      expect(Number(header(r, "retry-after"))).toBeGreaterThanOrEqual(1);
      expect(r.body.toString()).toMatch(/waited 300 ms .*politeness\.maxWaitMs/);
    }
    expect((await first).status).toBe(200);
    expect(at("q.test").map((a) => a.path)).toEqual(["/hold/1500"]);
  }, 20_000);
});

describe("robots.txt", () => {
  it("obeys wildcard and Allow rules and the crawler's own group, fetches robots.txt once, and its Crawl-delay spaces the requests", async () => {
    robots["r.test"] = ["User-agent: *", "Disallow: /private/", "Allow: /private/open*", "Disallow: /*.pdf$", "Crawl-delay: 0.3", "", "User-agent: otherbot", "Disallow: /", ""].join("\n");
    const verdicts: Record<string, number> = {};
    for (const p of ["/index.html", "/private/x", "/private/open-1", "/file.pdf", "/file.pdf?download=1"]) verdicts[p] = (await get("robots", "r.test", p)).status;
    expect(verdicts).toEqual({ "/index.html": 200, "/private/x": 403, "/private/open-1": 200, "/file.pdf": 403, "/file.pdf?download=1": 200 });
    const refused = await get("robots", "r.test", "/private/y");
    expect(refused.body.toString()).toContain(`blocked by ${url("r.test", "/robots.txt")} (line 2: Disallow: /private/)`);
    expect(JSON.parse(String(header(refused, "warcprox-meta")))).toEqual({ "blocked-by-robots": { robots: url("r.test", "/robots.txt"), "user-agent": "*", line: 2, rule: "Disallow: /private/" } });
    // A crawler whose User-Agent holds "otherbot" gets that group (everything disallowed).
    expect((await get("robots", "r.test", "/index.html", { "User-Agent": "Mozilla/5.0 (compatible; OtherBot/2.1; +https://other.example/)" })).status).toBe(403);
    const a = at("r.test");
    expect(a.filter((x) => x.path === "/robots.txt")).toHaveLength(1);
    expect(a.map((x) => x.path)).toEqual(["/robots.txt", "/index.html", "/private/open-1", "/file.pdf?download=1"]);
    for (let i = 2; i < a.length; i++) expect(a[i]!.startMs - a[i - 1]!.endMs).toBeGreaterThanOrEqual(300 - SLACK);
  }, 20_000);

  it("allows everything when robots.txt is missing (404), and disallows everything while it is unreachable", async () => {
    robots["r404.test"] = 404;
    robots["rdown.test"] = "reset";
    expect((await get("robots", "r404.test", "/anything")).status).toBe(200);
    const down = await get("robots", "rdown.test", "/anything");
    expect(down.status).toBe(403);
    expect(down.body.toString()).toMatch(/robots\.txt unreachable.*every URL of the site is disallowed for now/);
    expect(at("rdown.test").map((x) => x.path)).toEqual(["/robots.txt"]);
  }, 20_000);
});

describe("the User-Agent rule", () => {
  it("refuses a User-Agent without contact, and sends (and records) the configured suffix", async () => {
    const bare = await get("contact", "ua.test", "/x", { "User-Agent": "curl/8.5.0" });
    expect(bare.status).toBe(403);
    expect(bare.body.toString()).toMatch(/names no contact .*politeness\.userAgent\.requireContact/);
    expect((await get("contact", "ua.test", "/y", { "User-Agent": "crawler/1 (ops@archive.example)" })).status).toBe(200);
    expect((await get("suffix", "ua.test", "/z", { "User-Agent": "curl/8.5.0" })).status).toBe(200);
    expect(at("ua.test").map((x) => [x.path, x.ua])).toEqual([
      ["/y", "crawler/1 (ops@archive.example)"],
      ["/z", "curl/8.5.0 (+https://archive.example/contact)"],
    ]);
  });
});

describe("politeness off", () => {
  it("holds nothing back: the default collection and a person's session through a polite collection reach the origin concurrently", async () => {
    maxInFlight = 0;
    await Promise.all(Array.from({ length: 6 }, (_, i) => viaProxy(lathe.proxyUrl, url("free.test", `/hold/300?${i}`), { headers: { Host: `free.test:${port}` } })));
    expect(maxInFlight).toBeGreaterThan(1);
    const s = await lathe.facade.openSession({ collection: "steady", exemptFromPoliteness: true });
    maxInFlight = 0;
    await Promise.all(Array.from({ length: 6 }, (_, i) => viaProxy(s.proxyUrl, url("person.test", `/hold/300?${i}`), { headers: { Host: `person.test:${port}` } })));
    expect(maxInFlight).toBeGreaterThan(1);
  });
});

describe("what is visible", () => {
  it("queues, gaps and back-offs per host in the control API, the proxy's /status, the live page's data and /metrics; bad policies are 400s naming the key", async () => {
    const held = [get("steady", "vis.test", "/hold/1000"), get("steady", "vis.test", "/v/1"), get("steady", "vis.test", "/v/2")];
    for (let i = 0; i < 100 && at("vis.test").length === 0; i++) await sleep(10);
    const api = (await (await fetch(`${lathe.controlUrl}/api/v1/politeness`)).json()) as { hosts: Array<Record<string, unknown>>; queued: number; policies: Record<string, { enabled: boolean }>; coordinated: boolean };
    expect(api.hosts.find((h) => h.host === "vis.test")).toMatchObject({ active: 1, queued: 2, delayMs: 200 });
    expect(api.hosts.find((h) => h.host === "b500.test")).toMatchObject({ lastStatus: 200, consecutiveFailures: 0 });
    expect(api).toMatchObject({ coordinated: false, policies: { default: { enabled: false }, steady: { enabled: true } } });
    const status = (await (await fetch(`${lathe.proxyUrl}/status`)).json()) as { lathe: { politeness: { hosts: Array<Record<string, unknown>> } } };
    expect(status.lathe.politeness.hosts.find((h) => h.host === "vis.test")).toMatchObject({ queued: 2 });
    const live = (await (await fetch(`${lathe.controlUrl}/api/v1/live`)).json()) as { politeness: { hosts: Array<Record<string, unknown>> } };
    expect(live.politeness.hosts.find((h) => h.host === "vis.test")).toMatchObject({ active: 1, queued: 2 });
    const metrics = await (await fetch(`${lathe.controlUrl}/metrics`)).text();
    expect(metrics).toMatch(/^lathe_politeness_requests_queued 2$/m);
    expect(metrics).toMatch(/^lathe_politeness_refused_total\{rule="robots"\} [1-9]/m);
    await Promise.all(held);
    const bad = await fetch(`${lathe.controlUrl}/api/v1/collections`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ name: "bad", politeness: { robots: "sometimes" } }) });
    expect(bad.status).toBe(400);
    expect(await bad.text()).toContain("politeness.robots: must be one of");
  }, 20_000);
});

describe("the records", () => {
  it("robots.txt is recorded and indexed in the collection that needed it; refused URLs are not recorded", async () => {
    const robotsUrl = url("r.test", "/robots.txt");
    let cdx = "";
    for (let i = 0; i < 300 && !cdx.trim(); i++) {
      cdx = await (await fetch(`${lathe.controlUrl}/cdx?url=${encodeURIComponent(robotsUrl)}&collection=robots`)).text();
      if (!cdx.trim()) await sleep(10);
    }
    expect(cdx.trim().split("\n")).toHaveLength(1);
    await lathe.stop();
    const records = await readAllWarcs(lathe.dir);
    const of = (u: string, type: string) => records.filter((r) => r.type === type && r.get("WARC-Target-URI") === u);
    expect(of(robotsUrl, "response")).toHaveLength(1);
    expect(of(robotsUrl, "request")).toHaveLength(1);
    expect(of(robotsUrl, "response")[0]!.file).toMatch(/\/robots-[^/]*\.warc\.gz$/);
    expect(of(robotsUrl, "request")[0]!.httpHead).toContain("User-Agent: testbot/1.0 (+https://example.org/bot)");
    for (const p of ["/private/x", "/file.pdf", "/private/y"]) expect(records.filter((r) => r.get("WARC-Target-URI") === url("r.test", p))).toEqual([]);
    expect(records.filter((r) => String(r.get("WARC-Target-URI")).includes("rdown.test/anything"))).toEqual([]);
    expect(of(url("ua.test", "/z"), "request")[0]!.httpHead).toContain("User-Agent: curl/8.5.0 (+https://archive.example/contact)");
  }, 30_000);
});
