import { describe, expect, it } from "vitest";
import { fromBinary, lowerAscii, toBinary } from "../../src/url/binary.js";

describe("binary strings (one char per UTF-8 byte)", () => {
  it.each([
    ["", ""],
    ["http://example.com/", "http://example.com/"],
    ["é", "\xc3\xa9"],
    ["☃", "\xe2\x98\x83"],
    ["𝄞", "\xf0\x9d\x84\x9e"],
  ])("toBinary(%j) = %j, and back", (text, bytes) => {
    expect(toBinary(text)).toBe(bytes);
    expect(fromBinary(bytes)).toBe(text);
  });

  it.each([
    ["\xff", "\ufffd"], // not UTF-8
    ["a\xc3", "a\ufffd"], // cut short
    ["%C3%A9", "%C3%A9"], // ASCII comes back as it is
  ])("fromBinary(%j) = %j", (bytes, text) => {
    expect(fromBinary(bytes)).toBe(text);
  });

  it.each([
    ["HTTP://Example.COM/", "http://example.com/"],
    ["already lower", "already lower"],
    ["\xc3\x89T\xc3\x89", "\xc3\x89t\xc3\x89"], // bytes ≥ 0x80 untouched (Python bytes.lower())
    ["ÀB", "Àb"],
    ["%2E%2F", "%2e%2f"],
  ])("lowerAscii(%j) = %j", (s, lower) => {
    expect(lowerAscii(s)).toBe(lower);
  });
});
