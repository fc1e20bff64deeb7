import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { alphaReorderQuery, idnaToAscii, punycodeEncode, surt } from "../../src/index/surt.js";
import { describeUsing, sharedDir } from "../helpers/shared.js";

const CONFORMANCE = sharedDir("conformance");
const VECTORS = join(CONFORMANCE.path, "surt-vectors.tsv");

/** `url TAB key` lines; `#` comments, `## name` categories. */
function loadVectors(): Array<{ category: string; url: string; key: string }> {
  const out: Array<{ category: string; url: string; key: string }> = [];
  let category = "";
  for (const line of readFileSync(VECTORS, "utf8").split("\n")) {
    if (line.startsWith("## ")) category = line.slice(3).trim();
    if (line === "" || line.startsWith("#")) continue;
    const tab = line.indexOf("\t");
    out.push({ category, url: line.slice(0, tab), key: line.slice(tab + 1) });
  }
  return out;
}

describeUsing(CONFORMANCE, "surt: golden vectors (surt-vectors.tsv)", () => {
  const vectors = CONFORMANCE.present ? loadVectors() : []; // listed while the tests are collected
  it("has all 224 vectors", () => {
    expect(vectors.length).toBe(224);
  });
  it.each(vectors.map((v) => [v.category, v.url.length > 80 ? v.url.slice(0, 80) + "…" : v.url, v] as const))("%s: %s", (_c, _u, v) => {
    expect(surt(v.url)).toBe(v.key);
  });
});

describe("surt: spec examples beyond the vectors", () => {
  it.each([
    ["urn:view:https://Example.com/Page?b=2&a=1", "urn:view:https://example.com/page?a=1&b=2"],
    ["dns:www.Example.COM", "dns:www.example.com"],
    ["urn:X-wpull:log", "urn:x-wpull:log"],
    ["http:////////www.example.com/", "com,example)/"],
    // Ports: the plain path reads 1 to 5 digits without a leading zero; others go the long way.
    ["http://h.com:1/", "com,h:1)/"],
    ["http://h.com:65535/", "com,h:65535)/"],
    ["http://h.com:65536/", "http://h.com:65536/"],
    ["http://h.com:012/", "com,h:12)/"],
    ["http://h.com:123456/", "http://h.com:123456/"],
    ["http://h.com:12345", "com,h:12345)/"],
    ["http://h.com:/x", "com,h)/x"],
    ["http://h.com:8a/", "http://h.com:8a/"],
    ["http://h.com:80?x", "com,h)/?x"],
    ["https://h.com:443/", "com,h)/"],
    ["http://example.com/a/../../../b", "com,example)/b"],
    ["http://www.www.example.com/", "com,example,www)/"],
    ["http://example.com/(S(0123456789abcdefghijklmn))/default.aspx", "com,example)/default.aspx"],
    ["http://example.com/?x=1&jsessionid=0123456789ABCDEFabcdef0123456789", "com,example)/?&x=1"],
    ["http://example.com/?sid=short", "com,example)/?sid=short"],
    ["http://example.com/?a=1&&b=2", "com,example)/?&a=1&b=2"],
    ["http://example.com/?q=a%26b", "com,example)/?b&q=a"], // decoded `&` splits: two params, sorted,
    ["http://2130706433/", "1,0,0,127)/"],
    [null, "-"],
    ["", "-"],
  ])("%s → %s", (url, key) => {
    expect(surt(url)).toBe(key);
  });
});

describe("surt helpers", () => {
  it("punycode (RFC 3492 samples)", () => {
    expect(punycodeEncode("bücher")).toBe("bcher-kva");
    expect(punycodeEncode("münchen")).toBe("mnchen-3ya");
    expect(punycodeEncode("例え")).toBe("r8jz45g");
  });
  it("IDNA 2003 maps ß to ss and rejects empty labels", () => {
    expect(idnaToAscii("straße.de")).toBe("strasse.de");
    expect(idnaToAscii("bücher..de")).toBeNull();
    expect(idnaToAscii("bücher.de.")).toBe("xn--bcher-kva.de.");
  });
  it("orders a bare name before the same name with a value", () => {
    expect(alphaReorderQuery("a=1&a&b")).toBe("a&a=1&b");
    expect(alphaReorderQuery("10=a&9=b&1=c")).toBe("1=c&10=a&9=b");
  });
});
