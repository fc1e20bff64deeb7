import { describe, expect, it } from "vitest";
import { parseWarcproxMeta } from "../../src/warcprox/warcproxMeta.js";
import { StatsRegistry } from "../../src/warcprox/stats.js";
import { admit, parseLimitKey, type AdmitResult, type Admitted } from "../../src/warcprox/limits.js";

const meta = (o: unknown) => parseWarcproxMeta([JSON.stringify(o)]);
const done = { written: true, revisit: false, wireBytes: 100 };
const okOf = (r: AdmitResult): Admitted => {
  if (!r.ok) throw new Error("refused: " + r.answer.body);
  return r;
};
const tick = () => new Promise((r) => setTimeout(r, 5));

describe("limit keys", () => {
  it("split at the last two slashes; domain form normalized", () => {
    expect(parseLimitKey("job/1/total/urls")).toEqual({ bucket: "job/1", sub: "total", counter: "urls", key: "job/1/total/urls" });
    expect(parseLimitKey("job1:Example.COM./new/wire_bytes")).toEqual({
      bucket: "job1:example.com",
      sub: "new",
      counter: "wire_bytes",
      key: "job1:example.com/new/wire_bytes",
    });
    expect(parseLimitKey("a:b:c/total/urls")!.bucket).toBe("a:b:c"); // not the domain form (warcprox: exactly one ':')
    expect(parseLimitKey("total/urls")).toBeNull();
    expect(parseLimitKey("x/all/urls")).toBeNull();
  });
});

describe("limits (§2)", () => {
  it("10 concurrent admits with total/urls = 5: exactly five ok, five 420, then total.urls = 5", async () => {
    const stats = new StatsRegistry();
    const m = meta({ stats: { buckets: ["job1"] }, limits: { "job1/total/urls": 5 } });
    const results = await Promise.all(
      Array.from({ length: 10 }, async (_, i) => {
        const r = await admit(stats, m, `http://example.com/${i}`);
        if (r.ok) {
          await new Promise((res) => setTimeout(res, 10 + i * 3)); // the fetch
          r.release(done);
        }
        return r;
      }),
    );
    expect(results.filter((r) => r.ok)).toHaveLength(5);
    const refused = results.filter((r) => !r.ok);
    expect(refused).toHaveLength(5);
    expect(stats.get("job1")!.total.urls).toBe(5);
    expect(stats.get("__all__")!.total.urls).toBe(5);
    for (const r of refused) {
      if (r.ok) continue;
      expect(r.answer.status).toBe(420);
      expect(r.answer.reason).toBe("Reached limit");
      expect(r.answer.body).toBe("request rejected by warcprox: reached limit job1/total/urls=5\n");
      expect(r.answer.headers).toEqual([
        ["Content-Type", "text/plain;charset=utf-8"],
        ["Connection", "close"],
        ["Content-Length", String(Buffer.byteLength(r.answer.body))],
        [
          "Warcprox-Meta",
          '{"stats":{"job1":{"bucket":"job1","total":{"urls":5,"wire_bytes":500},"new":{"urls":5,"wire_bytes":500},' +
            '"revisit":{"urls":0,"wire_bytes":0}}},"reached-limit":{"job1/total/urls":5}}',
        ],
      ]);
    }
  });

  it("failed fetches release their reservation: a waiter is admitted instead", async () => {
    const stats = new StatsRegistry();
    const m = meta({ stats: { buckets: ["b"] }, limits: { "b/total/urls": 2 } });
    const a = okOf(await admit(stats, m, "http://x.org/a"));
    const b = okOf(await admit(stats, m, "http://x.org/b"));
    let third: AdmitResult | undefined;
    const p = admit(stats, m, "http://x.org/c").then((r) => (third = r));
    await tick();
    expect(third).toBeUndefined(); // C=0, R=2: undecided, waits
    a.release(null); // DNS failure: not counted
    await p;
    const c = okOf(third!);
    b.release(done);
    c.release(done);
    const r = await admit(stats, m, "http://x.org/d");
    expect(r.ok).toBe(false);
    expect(stats.value("b", "total", "urls")).toBe(2);
  });

  it("a waiter gets 420 when the in-flight captures complete", async () => {
    const stats = new StatsRegistry();
    const m = meta({ stats: { buckets: ["b"] }, limits: { "b/total/urls": 1 } });
    const a = okOf(await admit(stats, m, "http://x.org/a"));
    const p = admit(stats, m, "http://x.org/b");
    await tick();
    a.release(done);
    const r = await p;
    expect(r.ok).toBe(false);
  });

  it("soft limits: 430 after hard ones, first hit in order answers", async () => {
    const stats = new StatsRegistry();
    stats.tally(["__all__", "b"], { written: true, revisit: true, wireBytes: 5000 });
    const m = meta({
      stats: { buckets: ["b"] },
      limits: { "b/total/urls": 10, "other/total/urls": 1 },
      "soft-limits": { "b/revisit/wire_bytes": 1000, "b/total/urls": 1 },
    });
    const r = await admit(stats, m, "http://x.org/");
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.answer.status).toBe(430);
    expect(r.answer.reason).toBe("Reached soft limit");
    expect(r.answer.body).toBe("request rejected by warcprox: reached soft limit b/revisit/wire_bytes=1000\n");
    expect(r.answer.headers[3]![1]).toBe(
      '{"stats":{"b":{"bucket":"b","total":{"urls":1,"wire_bytes":5000},"new":{"urls":0,"wire_bytes":0},' +
        '"revisit":{"urls":1,"wire_bytes":5000}}},"reached-soft-limit":{"b/revisit/wire_bytes":1000}}',
    );
    // a hard limit that is reached wins over the soft one
    const m2 = meta({ stats: { buckets: ["b"] }, limits: { "b/total/urls": 1 }, "soft-limits": { "b/total/urls": 1 } });
    const r2 = await admit(stats, m2, "http://x.org/");
    expect(!r2.ok && r2.answer.status).toBe(420);
  });

  it("ignored: bucket not among the request's, limit 0, bucket without stats", async () => {
    const stats = new StatsRegistry();
    stats.tally(["__all__", "other"], done);
    const m = meta({ stats: { buckets: ["b"] }, limits: { "other/total/urls": 1, "b/total/urls": 0, "c/new/urls": 1 } });
    const r = await admit(stats, m, "http://x.org/");
    expect(r.ok).toBe(true);
    // __all__ applies to everything
    const r2 = await admit(stats, meta({ limits: { "__all__/total/urls": 1 } }), "http://x.org/");
    expect(r2.ok).toBe(false);
  });

  it("domain form applies only to tallied domains the host is in, key printed normalized", async () => {
    const stats = new StatsRegistry();
    const m = meta({
      stats: { buckets: [{ bucket: "job1", "tally-domains": ["example.com"] }] },
      limits: { "job1:EXAMPLE.com./total/urls": 1 },
    });
    okOf(await admit(stats, m, "http://www.example.com/a")).release(done);
    const r = await admit(stats, m, "https://example.com/b");
    expect(r.ok).toBe(false);
    if (!r.ok) {
      expect(r.answer.body).toBe("request rejected by warcprox: reached limit job1:example.com/total/urls=1\n");
      expect(r.answer.headers[3]![1]).toContain('"stats":{"job1:example.com":{"bucket":"job1:example.com"');
      expect(r.answer.headers[3]![1]).toContain('"reached-limit":{"job1:example.com/total/urls":1}');
    }
    expect((await admit(stats, m, "http://other.org/")).ok).toBe(true);
  });

  it("wire_bytes: answers once committed >= limit, admits while in flight", async () => {
    const stats = new StatsRegistry();
    const m = meta({ stats: { buckets: ["b"] }, limits: { "b/total/wire_bytes": 150 } });
    const a = okOf(await admit(stats, m, "http://x.org/a"));
    const b = okOf(await admit(stats, m, "http://x.org/b"));
    a.release(done);
    b.release(done); // overshoot bounded by what was in flight
    const r = await admit(stats, m, "http://x.org/c");
    expect(!r.ok && r.answer.body).toBe("request rejected by warcprox: reached limit b/total/wire_bytes=150\n");
    expect(stats.value("b", "total", "wire_bytes")).toBe(200);
  });

  it("new/revisit: captures that cannot count there do not wait", async () => {
    const stats = new StatsRegistry();
    const m = meta({ stats: { buckets: ["b"] }, limits: { "b/new/urls": 1 } });
    const a = okOf(await admit(stats, m, "http://x.org/a"));
    // a non-archived capture can never be "new": admitted at once
    const nm = meta({ "warc-prefix": "-", stats: { buckets: ["b"] }, limits: { "b/new/urls": 1 } });
    const n = okOf(await admit(stats, nm, "http://x.org/n"));
    n.release({ written: false, revisit: false, wireBytes: 5 });
    // the first turns out a revisit: it does not count in new, so the waiter is admitted
    const p = admit(stats, m, "http://x.org/b");
    await tick();
    a.release({ written: true, revisit: true, wireBytes: 5 });
    okOf(await p).release(done);
    expect((await admit(stats, m, "http://x.org/c")).ok).toBe(false);
  });

  it("limit printed as a JSON number", async () => {
    const stats = new StatsRegistry();
    stats.tally(["__all__", "b"], { written: true, revisit: false, wireBytes: 2e8 });
    const r = await admit(stats, meta({ stats: { buckets: ["b"] }, limits: { "b/total/wire_bytes": 1e8 } }), "http://x.org/");
    expect(!r.ok && r.answer.body).toBe("request rejected by warcprox: reached limit b/total/wire_bytes=100000000\n");
  });

  it("bounded wait: on timeout the undecided limit answers; abort rejects", async () => {
    const stats = new StatsRegistry();
    const m = meta({ stats: { buckets: ["b"] }, limits: { "b/total/urls": 1 } });
    const a = okOf(await admit(stats, m, "http://x.org/a"));
    const r = await admit(stats, m, "http://x.org/b", { waitTimeoutMs: 20 });
    expect(!r.ok && r.answer.status).toBe(420);
    const ac = new AbortController();
    const p = admit(stats, m, "http://x.org/c", { signal: ac.signal });
    ac.abort(new Error("client gone"));
    await expect(p).rejects.toThrow("client gone");
    a.release(null);
    expect((await admit(stats, m, "http://x.org/d")).ok).toBe(true);
  });

  it("no header: admitted, counted in __all__ and __unspecified__", async () => {
    const stats = new StatsRegistry();
    const r = okOf(await admit(stats, null, "http://x.org/"));
    expect(r.buckets).toEqual(["__all__", "__unspecified__"]);
    r.release({ written: true, revisit: false, wireBytes: 42 });
    r.release({ written: true, revisit: false, wireBytes: 42 }); // ignored
    expect(stats.get("__unspecified__")!.total).toEqual({ urls: 1, wire_bytes: 42 });
  });
});
