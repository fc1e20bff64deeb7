import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { deflateSync } from "node:zlib";
import http from "node:http";
import { startHttpOrigin, type Origin } from "../helpers/origin.js";
import { startTestLathe, type TestLathe } from "../helpers/lathe.js";
import { rawExchange, viaProxy } from "../helpers/client.js";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { readAllWarcs } from "../helpers/warcs.js";

let origin: Origin;
let lathe: TestLathe;
beforeAll(async () => {
  origin = await startHttpOrigin();
  lathe = await startTestLathe();
});
afterAll(async () => {
  await lathe.stop();
  await origin.close();
});

describe("warcprox limits and blocks through the proxy", () => {
  it("a limit of 5 lets exactly 5 of 16 concurrent clients through; the rest get 420 with the bucket's stats", async () => {
    const meta = JSON.stringify({ "warc-prefix": "lim", stats: { buckets: ["job-a"] }, limits: { "job-a/total/urls": 5 } });
    const results = await Promise.all(
      Array.from({ length: 16 }, (_, i) =>
        viaProxy(lathe.proxyUrl, `${origin.url}/slow/5?i=${i}`, { headers: { Host: "x", "Warcprox-Meta": meta }, agent: new http.Agent() }),
      ),
    );
    const ok = results.filter((r) => r.status === 200);
    const limited = results.filter((r) => r.status === 420);
    expect(ok.length).toBe(5);
    expect(limited.length).toBe(11);
    const r = limited[0]!;
    expect(r.statusMessage).toBe("Reached limit");
    expect(r.body.toString()).toBe("request rejected by warcprox: reached limit job-a/total/urls=5\n");
    const h = JSON.parse(r.rawHeaders[r.rawHeaders.findIndex((x) => x.toLowerCase() === "warcprox-meta") + 1]!);
    expect(h["reached-limit"]).toEqual({ "job-a/total/urls": 5 });
    expect(h.stats["job-a"].total.urls).toBe(5);
    const raw = await rawExchange(lathe.proxyUrl, "GET /lathe/stats/job-a HTTP/1.1\r\nHost: p\r\nConnection: close\r\n\r\n");
    const bucket = JSON.parse(raw.slice(raw.indexOf("\r\n\r\n") + 4));
    expect(bucket).toMatchObject({ bucket: "job-a", total: { urls: 5 } });
    expect(bucket.new.urls + bucket.revisit.urls).toBe(5);
    // One crawl-log line per counted capture, in the prefix's log (warcprox-compat.md §6).
    // Appended as captures complete: give the last append a moment.
    let lines: string[] = [];
    for (let i = 0; i < 50 && lines.length < 5; i++) {
      const log = readdirSync(lathe.dir).find((f) => /^lim-.*-\d+\.log$/.test(f));
      lines = log ? readFileSync(join(lathe.dir, log), "utf8").trim().split("\n").filter(Boolean) : [];
      if (lines.length < 5) await new Promise((r) => setTimeout(r, 20));
    }
    expect(lines.length).toBe(5);
    for (const l of lines) expect(l.split(/ +/)[1]).toBe("200");
    await lathe.writers.get("lim")!.rollover();
    const recs = await readAllWarcs(lathe.dir);
    // Identical bodies: one response and four revisits, five captures.
    expect(recs.filter((x) => (x.type === "response" || x.type === "revisit") && x.file.includes("/lim-")).length).toBe(5);
  });

  it("a compressed block rule answers 403 before anything is fetched", async () => {
    const before = origin.seen.length;
    const rules = [{ domain: "127.0.0.1", substring: "/private/" }];
    const meta = JSON.stringify({ compressed_blocks: deflateSync(Buffer.from(JSON.stringify(rules))).toString("base64") });
    const r = await viaProxy(lathe.proxyUrl, `${origin.url}/private/x`, { headers: { Host: "x", "Warcprox-Meta": meta } });
    expect(r.status).toBe(403);
    expect(r.body.toString()).toBe('request rejected by warcprox: blocked by rule found in Warcprox-Meta header: {"domain": "127.0.0.1", "substring": "/private/"}\n');
    const fine = await viaProxy(lathe.proxyUrl, `${origin.url}/text/5`, { headers: { Host: "x", "Warcprox-Meta": meta } });
    expect(fine.status).toBe(200);
    expect(origin.seen.length).toBe(before + 1);
  });
});
