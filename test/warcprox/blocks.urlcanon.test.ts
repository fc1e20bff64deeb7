import { describe, expect, it } from "vitest";
import {
  formatUrl,
  hostMatchesDomain,
  normalizeHost,
  parseUrl,
  resolvePathDots,
  reverseHost,
  semantic,
  semanticPrecise,
  ssurtHost,
  ssurtOf,
  surtOf,
} from "../../src/warcprox/urlcanon.js";

// Expected values: iipc/urlcanon testdata (semantic_precise.json, ssurt.json, path_dots) and
// python/tests/test_match_rules.py, as behaviour facts of the reference.
const SEMANTIC_PRECISE: Array<[string, string]> = [
  ["  http://www.google.com/  ", "http://www.google.com/"],
  ["%20leadingspace.com/", "http://%20leadingspace.com/"],
  ["h\tt\nt\rp://h\to\ns\rt:9\t0\n0\r0/p\ta\nt\rh?q\tu\ne\rry#f\tr\na\rg", "http://host:9000/path?query#frag"],
  ["http:%/", "http://%25/"],
  ["http:%2e%2e/a/b", "http://0.0.0.0/a/b"],
  ["http:%61%62%63/", "http://abc/"],
  ["http:// leadingspace.com/", "http://%20leadingspace.com/"],
  ["http://%/", "http://%25/"],
  ["http://%25DOMAIN:foobar@foodomain.com/", "http://foodomain.com/"],
  ["http://%2e/a/b", "http://0.0.0.0/a/b"],
  [
    "http://%31%36%38%2e%31%38%38%2e%39%39%2e%32%36/%2E%73%65%63%75%72%65/%77%77%77%2E%65%62%61%79%2E%63%6F%6D/",
    "http://168.188.99.26/.secure/www.ebay.com/",
  ],
  ["http://%e2%98%83.net", "http://xn--n3h.net/"],
  ["http://09/", "http://09/"],
  ["http://127.0.0.1:10100/relative_import.html", "http://127.0.0.1:10100/relative_import.html"],
  ["http://192.0x00A80001", "http://192.168.0.1/"],
  ["http://3279880203/blah", "http://195.127.0.11/blah"],
  ["http://:@www.example.com", "http://www.example.com/"],
  ["http://@:@@host/a/b", "http://host/a/b"],
  ["http://@ho@st/a/b", "http://st/a/b"],
  ["http://a:b@www.example.com", "http://www.example.com/"],
  ["http://evil.com/foo#bar#baz", "http://evil.com/foo#bar%23baz"],
  ["http://evil.com/foo?bar;", "http://evil.com/foo?bar;"],
  ["http://example.com/%20foo", "http://example.com/%20foo"],
  ["http://example.com/%3A%3a%3C%3c", "http://example.com/::<<"],
  ["http://example.com/%7Ffp3%3Eju%3Dduvgw%3Dd", "http://example.com/%7Ffp3>ju=duvgw=d"],
  ["http://example.com/././foo", "http://example.com/foo"],
  ["http://example.com/./.foo", "http://example.com/.foo"],
  ["http://example.com////../..", "http://example.com/"],
  ["http://example.com/?%26=%26&%26", "http://example.com/?%26&%26=%26"],
  ["http://example.com/?%3d=%3d&%3d", "http://example.com/?%3D&%3D=%3D"],
  ["http://example.com/?c=d&a=b", "http://example.com/?a=b&c=d"],
  ["http://example.com/@asdf%40", "http://example.com/@asdf@"],
  ["http://example.com/\u00E4\u00BD\u00A0", "http://example.com/%C3%A4%C2%BD%C2%A0"],
  ["http://example.com/foo%", "http://example.com/foo%25"],
  ["http://example.com/foo%00%51", "http://example.com/foo%00Q"],
  ["http://example.com/foo%2zbar", "http://example.com/foo%252zbar"],
  ["http://example.com/foo/%2e%2", "http://example.com/foo/.%252"],
  ["http://example.com/foo/%2e./%2e%2e/.%2e/%2e.bar", "http://example.com/..bar"],
  ["http://example.com/foo/../../../ton", "http://example.com/ton"],
  ["http://example.com/foo/..bar", "http://example.com/foo/..bar"],
  ["http://example.com/foo/bar/../ton/../../a", "http://example.com/a"],
  ["http://example.com/foo/bar//..", "http://example.com/foo/bar/"],
  ["http://example.com/foo/bar//../..", "http://example.com/foo/"],
  ["http://example.com\\\\foo\\\\bar", "http://example.com/foo/bar"],
  ['http://facebook.com/?foo=%7B%22abc%22', 'http://facebook.com/?foo={"abc"'],
  ["http://foo:80/", "http://foo/"],
  ["http://foo:81/", "http://foo:81/"],
  [
    "http://host%23.com/%257Ea%2521b%2540c%2523d%2524e%25f%255E00%252611%252A22%252833%252944_55%252B",
    "http://host%23.com/~a!b@c%23d$e%25f^00&11*22(33)44_55+",
  ],
  ["http://host.com//twoslashes?more//slashes", "http://host.com/twoslashes?more//slashes"],
  ["http://host/%%%25%32%35asd%%", "http://host/%25%25%25asd%25%25"],
  ["http://host/%25%2536%2531", "http://host/a"],
  ["http://host/%2e%2e%2e", "http://host/..."],
  ["http://host/%45%25?%45%25", "http://host/E%25?E%25"],
  ["http://host/?%2e", "http://host/?."],
  ["http://www.@pple.com", "http://pple.com/"],
  ["http://www.GOOgle.com/", "http://www.google.com/"],
  ["http://www.google.com.../", "http://www.google.com/"],
  ["http://www.google.com/foo?bar=baz# \u00bb", "http://www.google.com/foo?bar=baz#%20%C2%BB"],
  ["http://www.google.com/q?", "http://www.google.com/q?"],
  ["http://www/foo%2Ehtml", "http://www/foo.html"],
  ["http:\\\\www.google.com\\foo", "http://www.google.com/foo"],
  ["http:example.com/", "http://example.com/"],
  ["https://%e2%98%83", "https://xn--n3h/"],
  ["https://0x.0x.0", "https://0.0.0.0/"],
  ["https://fa\u00df.ExAmPlE/", "https://xn--fa-hia.example/"],
  ["https://foo:443/", "https://foo/"],
  ["https://foo:80/", "https://foo:80/"],
  ["https://localhost:3000/jqueryui@1.2.3", "https://localhost:3000/jqueryui@1.2.3"],
  ["ftp://foo:21/", "ftp://foo/"],
  ["ws://foo:80/", "ws://foo/"],
  ["wss://foo:80/", "wss://foo:80/"],
  ["non-special://H%4fSt/path", "non-special://HOSt/path"],
  ["non-special://[1:2:0:0:0:0:0:3]/", "non-special://[1:2::3]/"],
  ["redis://foo:bar@somehost:6379/0?baz=bam&qux=baz", "redis://somehost:6379/0?baz=bam&qux=baz"],
  ["urn:ietf:rfc:2648", "urn:ietf:rfc:2648"],
  ["mailto:/../", "mailto:/"],
  ["www.google.com", "http://www.google.com/"],
];

describe("urlcanon semantic", () => {
  it.each(SEMANTIC_PRECISE)("semantic_precise %j", (input, expected) => {
    expect(formatUrl(semanticPrecise(input))).toBe(expected);
  });

  it("semantic drops the fragment", () => {
    expect(formatUrl(semantic("http://www.evil.com/blah#frag"))).toBe("http://www.evil.com/blah");
    expect(formatUrl(semantic("hTTp://EXAmple.com.../FOo/Bar#zuh"))).toBe("http://example.com/FOo/Bar");
  });

  it("resolves path dots like the reference", () => {
    for (const [p, e] of [
      ["/./", "/"], ["/.", "/"], ["/..", "/"], ["/../", "/"], ["/..//", "//"], ["//..//", "//"], ["/foo/./", "/foo/"],
      ["/foo/.", "/foo/"], ["/foo/..", "/"], ["/.../", "/.../"], ["//.../", "//.../"], ["/././.", "/"], ["/.././../.", "/"],
    ]) {
      expect(resolvePathDots(p!, true)).toBe(e);
    }
  });
});

describe("urlcanon surt / ssurt", () => {
  it("formats like ssurt.json", () => {
    const u = parseUrl("http://user:pass@foo.example.org:81/path?query#frag");
    expect(surtOf(u)).toBe("http://(org,example,foo:81,)/path?query#frag");
    expect(ssurtOf(u)).toBe("org,example,foo,//81:http@user:pass:/path?query#frag");
    expect(surtOf(parseUrl("http://user:pass@foo.example.org:81"))).toBe("http://(org,example,foo:81,)");
    expect(surtOf(parseUrl("http://user:pass@foo.example.org:81?query"))).toBe("http://(org,example,foo:81,)?query");
  });

  it("semantic forms used by block rules", () => {
    expect(surtOf(semantic("http://example.com/fuh/x"))).toBe("http://(com,example,)/fuh/x");
    expect(surtOf(semantic("https://www.Example.com:8443/a?b=2&a=1#f"))).toBe("https://(com,example,www:8443,)/a?a=1&b=2");
    expect(ssurtOf(semantic("http://example.com/foo/bar?query#fragment"))).toBe("com,example,//http:/foo/bar?query");
    expect(ssurtOf(semantic("http://example.com:8080/foo/bar"))).toBe("com,example,//8080:http:/foo/bar");
    expect(surtOf(semantic("http://1.2.3.4:81/"))).toBe("http://(1.2.3.4:81,)/");
    expect(surtOf(semantic("http://[::1]/x"))).toBe("http://([::1],)/x");
    expect(surtOf(semantic("screenshot:https://example.com/"))).toBe("screenshot:https://example.com/");
  });

  it("host helpers", () => {
    expect(reverseHost("")).toBe(",");
    expect(reverseHost("x.y.z.")).toBe(",z,y,x,");
    expect(reverseHost("a,b.y.z.")).toBe(",z,y,a.b,");
    expect(ssurtHost("1.2.3.4")).toBe("1.2.3.4");
    expect(ssurtHost("0x80")).toBe("0x80");
    expect(ssurtHost("x.y.z")).toBe("z,y,x,");
    expect(normalizeHost("Example.COM.")).toBe("example.com");
    expect(normalizeHost("☃.net")).toBe("xn--n3h.net");
    expect(normalizeHost("%31%32%37.1")).toBe("127.0.0.1");
    expect(hostMatchesDomain("1.2.3.4", "1.2.3.4")).toBe(true);
    expect(hostMatchesDomain("foo.example.com", "example.com")).toBe(true);
    expect(hostMatchesDomain("example.com", "foo.example.com")).toBe(false);
    expect(hostMatchesDomain("badexample.com", "example.com")).toBe(false);
    expect(hostMatchesDomain("foo.EXAMPLE.COM", "example.com")).toBe(false);
    expect(hostMatchesDomain(normalizeHost("😬.☃.net"), normalizeHost("☃.net"))).toBe(true);
    expect(hostMatchesDomain("1.2.3.4", "2.3.4")).toBe(false);
  });
});
