import { describe, expect, it } from "vitest";
import { deflateSync } from "node:zlib";
import { parseWarcproxMeta, type BlockRule } from "../../src/warcprox/warcproxMeta.js";
import { blockAnswer, matchBlock } from "../../src/warcprox/blocks.js";

const rules = (r: unknown[]): BlockRule[] => parseWarcproxMeta([JSON.stringify({ blocks: r })])!.blocks!;
const blocked = (r: unknown, url: string) => matchBlock(rules([r]), url) !== null;

describe("block rules", () => {
  it("domain: equal or subdomain, IP exact, normalized", () => {
    expect(blocked({ domain: "example.com" }, "http://example.com/")).toBe(true);
    expect(blocked({ domain: "example.com" }, "https://a.b.EXAMPLE.com.:8443/x")).toBe(true);
    expect(blocked({ domain: "example.com" }, "http://badexample.com/")).toBe(false);
    expect(blocked({ domain: "foo.example.com" }, "http://example.com/")).toBe(false);
    expect(blocked({ domain: "1.2.3.4" }, "http://1.2.3.4:8080/")).toBe(true);
    expect(blocked({ domain: "2.3.4" }, "http://1.2.3.4/")).toBe(false);
    expect(blocked({ domain: "127.0.0.1" }, "http://2130706433/")).toBe(true);
    expect(blocked({ domain: "Bücher.Example" }, "http://www.xn--bcher-kva.example/")).toBe(true);
    expect(blocked({ domain: "☃.net" }, "http://😬.%E2%98%83.net/")).toBe(true);
  });

  it("domain with exact: only the host itself", () => {
    expect(blocked({ domain: "example.com", exact: true }, "http://example.com/a")).toBe(true);
    expect(blocked({ domain: "example.com", exact: true }, "http://www.example.com/a")).toBe(false);
  });

  it("surt: prefix of urlcanon's surt() of the semantic URL", () => {
    const r = { surt: "http://(com,example,)/fuh/" };
    expect(blocked(r, "http://example.com/fuh/")).toBe(true);
    expect(blocked(r, "http://EXAMPLE.com/fuh/x?y#z")).toBe(true);
    expect(blocked(r, "http://example.com/fuh")).toBe(false);
    expect(blocked(r, "https://example.com/fuh/")).toBe(false);
    expect(blocked(r, "http://www.example.com/fuh/")).toBe(false);
    // host prefix, as brozzler scopes use it
    expect(blocked({ surt: "http://(com,vimeocdn," }, "http://a.b.vimeocdn.com/blahblah")).toBe(true);
    expect(blocked({ surt: "http://(com,vimeocdn," }, "https://a.b.vimeocdn.com/blahblah")).toBe(false);
    // port inside the parentheses
    expect(blocked({ surt: "http://(com,example:8080,)/" }, "http://example.com:8080/a")).toBe(true);
    expect(blocked({ surt: "http://(com,example,)/" }, "http://example.com:8080/a")).toBe(false);
    // deprecated form
    expect(blocked({ url_match: "SURT_MATCH", value: "http://(com,example,)/a" }, "http://example.com/abc")).toBe(true);
    // exact
    expect(blocked({ surt: "http://(com,example,)/a", exact: true }, "http://example.com/a")).toBe(true);
    expect(blocked({ surt: "http://(com,example,)/a", exact: true }, "http://example.com/ab")).toBe(false);
  });

  it("ssurt: prefix of ssurt()", () => {
    expect(blocked({ ssurt: "com,example,//http:/foo" }, "http://example.com/foo/bar")).toBe(true);
    expect(blocked({ ssurt: "com,example," }, "https://sub.example.com/")).toBe(true);
    expect(blocked({ ssurt: "com,example,//http:" }, "https://example.com/")).toBe(false);
    expect(blocked({ ssurt: "com,example,//8080:http:/" }, "http://example.com:8080/")).toBe(true);
    expect(blocked({ ssurt: "com,example,//http:/", exact: true }, "http://example.com/")).toBe(true);
    expect(blocked({ ssurt: "com,example,//http:/", exact: true }, "http://example.com/x")).toBe(false);
  });

  it("regex: full match of the canonical URL; substring", () => {
    expect(blocked({ regex: "^https?://(www.)?youtube.com/watch?.*$" }, "https://www.youtube.com/watch?v=x")).toBe(true);
    expect(blocked({ regex: "https?://twitter\\.com" }, "https://twitter.com/x")).toBe(false); // not a full match
    expect(blocked({ regex: "https?://twitter\\.com/.*" }, "https://TWITTER.com/x")).toBe(true); // canonical host
    expect(blocked({ url_match: "REGEX_MATCH", value: "^.*/audio_file/.*\\.mp3$" }, "http://foo.com/blah/audio_file/some.mp3")).toBe(true);
    expect(blocked({ url_match: "REGEX_MATCH", value: "^.*/audio_file/.*\\.mp3$" }, "http://foo.com/some.mp3")).toBe(false);
    expect(blocked({ substring: "facebook.com" }, "https://www.facebook.com/whatevz")).toBe(true);
    expect(blocked({ url_match: "STRING_MATCH", value: "ec-media" }, "http://ec-media.soundcloud.com/")).toBe(true);
    // the query is sorted before matching
    expect(blocked({ substring: "?a=1&b=2" }, "http://x.org/p?b=2&a=1")).toBe(true);
  });

  it("all keys must hold; parent_url_regex never matches; {} matches everything", () => {
    const r = { domain: "twitter.com", url_match: "REGEX_MATCH", value: "^.*lang=(?!en).*$" };
    expect(blocked(r, "https://twitter.com/twit")).toBe(false);
    expect(blocked(r, "https://twitter.com/twit?lang=en")).toBe(false);
    expect(blocked(r, "https://twitter.com/twit?lang=es")).toBe(true);
    expect(blocked(r, "https://example.com/twit?lang=es")).toBe(false);
    expect(blocked({ regex: ".*", parent_url_regex: ".*" }, "http://example.com/")).toBe(false);
    expect(blocked({}, "http://anything.example/")).toBe(true);
    // empty-string conditions are ignored (MatchRule's truthiness test)
    expect(blocked({ domain: "", substring: "" }, "http://x.org/")).toBe(true);
  });

  it("first matching rule wins; compressed_blocks", () => {
    const list = [{ domain: "a.org" }, { substring: "/x" }, { domain: "example.com" }];
    const m = parseWarcproxMeta([JSON.stringify({ compressed_blocks: deflateSync(Buffer.from(JSON.stringify(list))).toString("base64") })])!;
    expect(matchBlock(m.blocks!, "http://example.com/x")!.raw).toEqual({ substring: "/x" });
    expect(matchBlock(m.blocks!, "http://example.com/y")!.raw).toEqual({ domain: "example.com" });
    expect(matchBlock(m.blocks!, "http://b.org/y")).toBeNull();
    expect(matchBlock(undefined, "http://b.org/y")).toBeNull();
  });

  it("403 answer: compact header, Python-separator body", () => {
    const rule = rules([{ domain: "x.com", substring: "é" }])[0]!;
    const a = blockAnswer(rule);
    expect(a.status).toBe(403);
    expect(a.reason).toBe("Forbidden");
    const body = 'request rejected by warcprox: blocked by rule found in Warcprox-Meta header: {"domain": "x.com", "substring": "\\u00e9"}\n';
    expect(a.body).toBe(body);
    expect(a.headers).toEqual([
      ["Content-Type", "text/plain;charset=utf-8"],
      ["Connection", "close"],
      ["Content-Length", String(Buffer.byteLength(body))],
      ["Warcprox-Meta", '{"blocked-by-rule":{"domain":"x.com","substring":"\\u00e9"}}'],
    ]);
    expect(blockAnswer(rules([{ domain: "x.com" }])[0]!).body).toBe(
      'request rejected by warcprox: blocked by rule found in Warcprox-Meta header: {"domain": "x.com"}\n',
    );
    // the rule as sent (original case, deprecated keys kept)
    expect(blockAnswer(rules([{ url_match: "SURT_MATCH", value: "http://(com,X," }])[0]!).headers[3]).toEqual([
      "Warcprox-Meta",
      '{"blocked-by-rule":{"url_match":"SURT_MATCH","value":"http://(com,X,"}}',
    ]);
  });
});
