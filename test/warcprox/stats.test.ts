import { describe, expect, it } from "vitest";
import { parseWarcproxMeta } from "../../src/warcprox/warcproxMeta.js";
import { StatsRegistry } from "../../src/warcprox/stats.js";

const meta = (o: unknown) => parseWarcproxMeta([JSON.stringify(o)]);

describe("stats buckets", () => {
  const s = new StatsRegistry();

  it("__all__ always, __unspecified__ only without stats.buckets", () => {
    expect(s.bucketsOf(null, "http://example.com/")).toEqual(["__all__", "__unspecified__"]);
    expect(s.bucketsOf(meta({ "warc-prefix": "x" }), "http://example.com/")).toEqual(["__all__", "__unspecified__"]);
    expect(s.bucketsOf(meta({ stats: { buckets: [] } }), "http://example.com/")).toEqual(["__all__"]);
    expect(s.bucketsOf(meta({ stats: { buckets: ["job1", "site2", "job1"] } }), "http://example.com/")).toEqual([
      "__all__",
      "job1",
      "site2",
    ]);
  });

  it("tally domains: host equal or subdomain, IP exact, domain normalized", () => {
    const m = meta({
      stats: { buckets: ["job1", { bucket: "site2", "tally-domains": ["Example.COM.", "other.org", "1.2.3.4", "Bücher.de"] }] },
    });
    expect(s.bucketsOf(m, "http://example.com/")).toEqual(["__all__", "job1", "site2", "site2:example.com"]);
    expect(s.bucketsOf(m, "https://WWW.Example.com:8443/a")).toEqual(["__all__", "job1", "site2", "site2:example.com"]);
    expect(s.bucketsOf(m, "http://badexample.com/")).toEqual(["__all__", "job1", "site2"]);
    expect(s.bucketsOf(m, "http://1.2.3.4/")).toEqual(["__all__", "job1", "site2", "site2:1.2.3.4"]);
    expect(s.bucketsOf(m, "http://0.1.2.3.4/")).toEqual(["__all__", "job1", "site2"]);
    expect(s.bucketsOf(m, "http://shop.bücher.de/")).toEqual(["__all__", "job1", "site2", "site2:xn--bcher-kva.de"]);
  });

  it("tally: total always, new/revisit only when written; bucket object shape", () => {
    const r = new StatsRegistry();
    expect(r.get("b")).toBeNull();
    r.tally(["__all__", "b"], { written: true, revisit: false, wireBytes: 100 });
    r.tally(["__all__", "b"], { written: true, revisit: true, wireBytes: 30 });
    r.tally(["__all__", "b"], { written: false, revisit: false, wireBytes: 7 });
    r.tally(["__all__"], { written: true, revisit: false, wireBytes: 1 });
    expect(JSON.stringify(r.get("b"))).toBe(
      '{"bucket":"b","total":{"urls":3,"wire_bytes":137},"new":{"urls":1,"wire_bytes":100},"revisit":{"urls":1,"wire_bytes":30}}',
    );
    expect(r.get("__all__")!.total).toEqual({ urls: 4, wire_bytes: 138 });
    expect(r.value("b", "new", "urls")).toBe(1);
    expect(r.value("nope", "total", "urls")).toBe(0);
    expect(r.names()).toEqual(["__all__", "b"]);
    // get() returns a copy
    r.get("b")!.total.urls = 99;
    expect(r.value("b", "total", "urls")).toBe(3);
  });

  it("reservations count in flight and settle once", () => {
    const r = new StatsRegistry();
    const a = r.reserve(["__all__", "b"]);
    const b = r.reserve(["b"], { mayBeRevisit: false });
    expect(r.reserved("b", "total")).toBe(2);
    expect(r.reserved("b", "revisit")).toBe(1);
    expect(r.reserved("b", "new")).toBe(2);
    a.settle({ written: true, revisit: false, wireBytes: 10 });
    a.settle({ written: true, revisit: false, wireBytes: 10 });
    expect(a.settled).toBe(true);
    expect(r.value("b", "total", "urls")).toBe(1);
    expect(r.reserved("b", "total")).toBe(1);
    b.settle(null);
    expect(r.reserved("b", "total")).toBe(0);
    expect(r.value("b", "total", "urls")).toBe(1);
    expect(r.get("__all__")!.new).toEqual({ urls: 1, wire_bytes: 10 });
  });
});
