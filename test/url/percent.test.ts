import { describe, expect, it } from "vitest";
import { GOOGLE_ESCAPES, percentDecodeRepeatedly, percentEncode } from "../../src/url/percent.js";

describe("percentDecodeRepeatedly (unquote_to_bytes until nothing changes)", () => {
  it.each([
    ["", ""],
    ["plain", "plain"],
    ["%41%62", "Ab"],
    ["%2541", "A"], // %25 → % makes a new escape, decoded in the next pass
    ["%252541", "A"],
    ["%C3%A9", "\xc3\xa9"], // bytes, not text
    ["%", "%"],
    ["%4", "%4"],
    ["%zz%4g", "%zz%4g"], // not two hex digits: left alone
    ["%%41", "%A"],
    ["100%25", "100%"],
  ])("%j → %j", (s, decoded) => {
    expect(percentDecodeRepeatedly(s)).toBe(decoded);
  });
});

describe("percentEncode with the Google escape set", () => {
  it.each([
    ["", ""],
    ["/a/b.html?x=1&y=2", "/a/b.html?x=1&y=2"],
    ["a b", "a%20b"],
    ["#frag", "%23frag"],
    ["100%", "100%25"],
    ["\x00\x1f\x7f", "%00%1F%7F"],
    ["\xc3\xa9", "%C3%A9"], // upper-case hex, one escape per byte
    ["!\"$&'()*+,-./:;<=>?@[\\]^_`{|}~", "!\"$&'()*+,-./:;<=>?@[\\]^_`{|}~"], // surt's `safe`: left alone
  ])("%j → %j", (s, encoded) => {
    expect(percentEncode(s, GOOGLE_ESCAPES)).toBe(encoded);
  });

  it("escapes exactly the bytes outside letters, digits and surt's safe characters", () => {
    const safe = new Set(Array.from("!\"$&'()*+,-./:;<=>?@[\\]^_`{|}~"));
    for (let b = 0; b < 256; b++) {
      const c = String.fromCharCode(b);
      const kept = /[0-9A-Za-z]/.test(c) || safe.has(c);
      expect(percentEncode(c, GOOGLE_ESCAPES), `byte ${b}`).toBe(kept ? c : "%" + b.toString(16).toUpperCase().padStart(2, "0"));
    }
  });

  it("encodes what percentDecodeRepeatedly decoded, once (the round trip both canonicalizers make)", () => {
    expect(percentEncode(percentDecodeRepeatedly("%2520%7e%C3%a9"), GOOGLE_ESCAPES)).toBe("%20~%C3%A9");
  });

  it("takes any escape set", () => {
    expect(percentEncode("a=b&c", /[&=]/g)).toBe("a%3Db%26c");
  });
});
