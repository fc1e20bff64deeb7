import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readdirSync } from "node:fs";
import { startHttpOrigin, type Origin } from "../helpers/origin.js";
import { startTestLathe, type TestLathe } from "../helpers/lathe.js";
import { rawExchange, viaProxy } from "../helpers/client.js";
import { captureOf, readAllWarcs } from "../helpers/warcs.js";

let origin: Origin;
let lathe: TestLathe;
const meta = (o: unknown) => ({ Host: "x", "Warcprox-Meta": JSON.stringify(o) });

describe("the warcprox protocol on the proxy port", () => {
  beforeAll(async () => {
    origin = await startHttpOrigin();
    lathe = await startTestLathe();
  });
  afterAll(async () => {
    await lathe.stop();
    await origin.close();
  });

  it("GET /status answers warcprox's document with lathe's counters", async () => {
    await viaProxy(lathe.proxyUrl, `${origin.url}/bytes/4000?one`);
    await viaProxy(lathe.proxyUrl, `${origin.url}/bytes/4000?two`);
    // Captures are archived just after the client has its response: poll until both are counted.
    let raw = "";
    let st: Record<string, any> = {};
    for (let i = 0; i < 50; i++) {
      raw = await rawExchange(lathe.proxyUrl, "GET /status HTTP/1.1\r\nHost: proxy\r\nConnection: close\r\n\r\n");
      st = JSON.parse(raw.slice(raw.indexOf("\r\n\r\n") + 4));
      if (st.urls_processed >= 2) break;
      await new Promise((r) => setTimeout(r, 20));
    }
    expect(raw).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
    expect(st.role).toBe("warcprox");
    for (const k of ["version", "host", "address", "port", "pid", "threads", "active_requests", "unaccepted_requests", "load", "queued_urls", "queue_max_size", "urls_processed", "warc_bytes_written", "start_time", "rates_1min", "rates_5min", "rates_15min", "earliest_still_active_fetch_start", "earliest_still_active_socket", "earliest_still_active_postfetch", "seconds_behind", "postfetch_chain"]) {
      expect(st, k).toHaveProperty(k);
    }
    expect(st.port).toBe(lathe.address.port);
    expect(st.urls_processed).toBeGreaterThanOrEqual(2);
    expect(st.start_time).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{6})?\+00:00$/);
    expect(st.lathe.dedup.buckets.default.revisits).toBe(1);
    expect(st.lathe.dedup.buckets.default.bytesSaved).toBe(4000);
  });

  it("an invalid Warcprox-Meta is a 400 naming the field, and nothing is fetched or written", async () => {
    const before = origin.seen.length;
    const r = await viaProxy(lathe.proxyUrl, `${origin.url}/text/10?bad`, { headers: meta({ "dedup-ttl": 1 }) });
    expect(r.status).toBe(400);
    expect(r.statusMessage).toBe("request rejected by warcprox: invalid Warcprox-Meta field dedup-ttl");
    const slash = await viaProxy(lathe.proxyUrl, `${origin.url}/text/10?bad2`, { headers: meta({ "warc-prefix": "../x" }) });
    expect(slash.statusMessage).toBe("request rejected by warcprox: slash and backslash are not permitted in warc-prefix");
    expect(origin.seen.length).toBe(before);
  });

  it("warc-prefix picks the series, '-' archives nothing, capture-metadata returns the timestamp, an origin's Warcprox-Meta never reaches the client", async () => {
    await viaProxy(lathe.proxyUrl, `${origin.url}/text/20?series`, { headers: meta({ "warc-prefix": "job1" }) });
    const skip = await viaProxy(lathe.proxyUrl, `${origin.url}/text/30?skip`, { headers: meta({ "warc-prefix": "-" }) });
    expect(skip.body.length).toBe(30);
    const cm = await viaProxy(lathe.proxyUrl, `${origin.url}/text/40?cm`, { headers: meta({ accept: ["capture-metadata"] }) });
    const hdr = cm.rawHeaders[cm.rawHeaders.findIndex((h) => h.toLowerCase() === "warcprox-meta") + 1]!;
    const ts = JSON.parse(hdr)["capture-metadata"].timestamp as string;
    expect(ts).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
    const forged = await viaProxy(lathe.proxyUrl, `${origin.url}/forge`);
    expect(forged.rawHeaders.map((h) => h.toLowerCase())).not.toContain("warcprox-meta");
    const filtered = await viaProxy(lathe.proxyUrl, `${origin.url}/text/50?mime`, { headers: meta({ "mime-type-filters": [{ type: "REJECT", regex: "text/html" }] }) });
    expect(filtered.body.length).toBe(50);

    await lathe.stop();
    expect(readdirSync(lathe.dir).some((f) => /^job1-\d{17}-\d{5}-.*\.warc\.gz$/.test(f))).toBe(true);
    const recs = await readAllWarcs(lathe.dir);
    expect(recs.some((r) => r.get("WARC-Target-URI")?.endsWith("?skip"))).toBe(false);
    expect(recs.some((r) => r.get("WARC-Target-URI")?.endsWith("?mime"))).toBe(false);
    const c = captureOf(recs, `${origin.url}/text/40?cm`);
    expect(c.response.get("WARC-Date")!.slice(0, 19) + "Z").toBe(ts);
    expect(c.request.httpHead).not.toMatch(/warcprox-meta/i);
    expect(captureOf(recs, `${origin.url}/forge`).response.httpHead).toMatch(/\r\nWarcprox-Meta: /);
    const series = captureOf(recs, `${origin.url}/text/20?series`).response;
    expect(series.file).toMatch(/\/job1-/);
  });
});
