import { describe, expect, it } from "vitest";
import { deflateSync } from "node:zlib";
import { parseWarcproxMeta, WarcproxMetaError } from "../../src/warcprox/warcproxMeta.js";

const parse = (o: unknown) => parseWarcproxMeta([typeof o === "string" ? o : JSON.stringify(o)]);
function reason(o: unknown): string {
  try {
    parse(o);
  } catch (e) {
    if (e instanceof WarcproxMetaError) return e.reason;
    throw e;
  }
  throw new Error("no error");
}

describe("Warcprox-Meta parsing", () => {
  it("accepts what brozzler sends", () => {
    const blocks = [{ domain: "bad.example" }, { surt: "http://(com,example,)/private/" }];
    const m = parse({
      "warc-prefix": "job1-site2",
      stats: { buckets: ["job1", { bucket: "site2", "tally-domains": ["Example.com"] }] },
      limits: { "job1/total/urls": 100 },
      "soft-limits": { "site2/new/wire_bytes": 1e8 },
      "dedup-buckets": { job1: "rw", shared: "ro", legacy: "" },
      compressed_blocks: deflateSync(Buffer.from(JSON.stringify(blocks))).toString("base64"),
      metadata: { hop_path: "L", brozzled_url: "https://example.com/" },
      accept: ["capture-metadata"],
    })!;
    expect(m.warcPrefix).toBe("job1-site2");
    expect(m.statsBuckets).toEqual([{ bucket: "job1", tallyDomains: [] }, { bucket: "site2", tallyDomains: ["example.com"] }]);
    expect(m.limits).toEqual([["job1/total/urls", 100]]);
    expect(m.softLimits).toEqual([["site2/new/wire_bytes", 1e8]]);
    expect(m.dedupBuckets).toEqual([{ name: "job1", mode: "rw" }, { name: "shared", mode: "ro" }, { name: "legacy", mode: "rw" }]);
    expect(m.blocks!.map((b) => b.raw)).toEqual(blocks);
    expect(m.acceptCaptureMetadata).toBe(true);
  });

  it("maps legacy and lathe fields", () => {
    expect(parse({ "dedup-bucket": "old" })!.dedupBuckets).toEqual([{ name: "old", mode: "rw" }]);
    expect(parse({ "warc-prefix": "-" })!.noArchive).toBe(true);
    expect(parse({ "dedup-ok": false })!.dedupOk).toBe(false);
    expect(parse({ lathe: { "dedup-policy": "url", collection: "news" } })!.lathe).toEqual({ dedupPolicy: "url", collection: "news" });
    expect(parseWarcproxMeta([])).toBeNull();
  });

  it.each([
    ["{nope", "request rejected by warcprox: invalid Warcprox-Meta header"],
    [[1, 2], "request rejected by warcprox: invalid Warcprox-Meta header"],
    [{ "warc-prefix": "a/b" }, "request rejected by warcprox: slash and backslash are not permitted in warc-prefix"],
    [{ "warc-prefix": "..\\x" }, "request rejected by warcprox: slash and backslash are not permitted in warc-prefix"],
    [{ "warc-prefix": "has space" }, "request rejected by warcprox: invalid Warcprox-Meta field warc-prefix"],
    [{ "warc-prefix": ".." }, "request rejected by warcprox: invalid Warcprox-Meta field warc-prefix"],
    [{ "dedup-ttl": 5 }, "request rejected by warcprox: invalid Warcprox-Meta field dedup-ttl"],
    [{ "dedup-buckets": { a: "rx" } }, "request rejected by warcprox: invalid Warcprox-Meta field dedup-buckets"],
    [{ "dedup-buckets": {}, "dedup-bucket": "x" }, "request rejected by warcprox: invalid Warcprox-Meta field dedup-buckets"],
    [{ limits: { "job/total/bytes": 1 } }, "request rejected by warcprox: invalid Warcprox-Meta field limits"],
    [{ "soft-limits": { "job/total/urls": -1 } }, "request rejected by warcprox: invalid Warcprox-Meta field soft-limits"],
    [{ blocks: [{ domian: "x" }] }, "request rejected by warcprox: invalid Warcprox-Meta field blocks"],
    [{ blocks: [{ regex: "(" }] }, "request rejected by warcprox: invalid Warcprox-Meta field blocks"],
    [{ compressed_blocks: "!!!" }, "request rejected by warcprox: invalid Warcprox-Meta field compressed_blocks"],
    [{ "mime-type-filters": [{ type: "DROP", regex: "x" }] }, "request rejected by warcprox: invalid Warcprox-Meta field mime-type-filters"],
    [{ accept: ["other"] }, "request rejected by warcprox: invalid Warcprox-Meta field accept"],
    [{ lathe: { colour: "x" } }, "request rejected by warcprox: invalid Warcprox-Meta field lathe"],
    [{ stats: { buckets: [{ nobucket: 1 }] } }, "request rejected by warcprox: invalid Warcprox-Meta field stats"],
  ])("rejects %j", (input, expected) => {
    expect(reason(input)).toBe(expected);
  });

  it("refuses a repeated header", () => {
    expect(() => parseWarcproxMeta(["{}", "{}"])).toThrow(/sent once/);
  });
});
