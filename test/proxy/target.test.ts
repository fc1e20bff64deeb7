import { describe, expect, it } from "vitest";
import { type Target, targetUri } from "../../src/proxy/target.js";

const t = (scheme: "http" | "https", host: string, port: number, path: string): Target => ({ scheme, host, port, path });

describe("targetUri", () => {
  it("keeps a path that needs nothing encoded as it is", () => {
    expect(targetUri(t("http", "Example.COM", 80, "/bytes/10000"))).toBe("http://example.com/bytes/10000");
    expect(targetUri(t("https", "h", 443, "?q"))).toBe("https://h/?q");
    expect(targetUri(t("http", "h", 80, ""))).toBe("http://h/");
  });

  it("percent-encodes space, controls and non-ASCII from the first one on, and drops the fragment", () => {
    expect(targetUri(t("https", "example.com", 8443, "/a b?q=1#frag"))).toBe("https://example.com:8443/a%20b?q=1");
    expect(targetUri(t("http", "::1", 8080, "/\u00fc/\u00e9?x=\u00ff"))).toBe("http://[::1]:8080/%FC/%E9?x=%FF");
    expect(targetUri(t("http", "h", 80, "/\u65e5\u672c"))).toBe("http://h/%E6%97%A5%E6%9C%AC");
    expect(targetUri(t("http", "h", 80, "/%20ok%zz\t"))).toBe("http://h/%20ok%zz%09");
    expect(targetUri(t("http", "h", 80, "/x\u007f"))).toBe("http://h/x%7F");
    expect(targetUri(t("http", "h", 80, "/\u{1F600}"))).toBe("http://h/%EF%BF%BD%EF%BF%BD");
  });
});
