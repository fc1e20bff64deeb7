import { describe, expect, it } from "vitest";
import { dottedQuad, joinReversedLabels, reversedLabels } from "../../src/url/host.js";

describe("dottedQuad", () => {
  it.each([
    [0, "0.0.0.0"],
    [2130706433, "127.0.0.1"],
    [0xc0a80001, "192.168.0.1"],
    [2 ** 32 - 1, "255.255.255.255"],
    [0x01020304, "1.2.3.4"],
  ])("%d → %s", (n, dotted) => {
    expect(dottedQuad(n)).toBe(dotted);
  });
});

describe("reversedLabels (SURT host order)", () => {
  it.each([
    ["www.example.com", ["com", "example", "www"]],
    ["example.com", ["com", "example"]],
    ["localhost", ["localhost"]],
    ["", [""]],
    ["a..b", ["b", "", "a"]],
    ["example.com.", ["", "com", "example"]],
    ["x,y.b.c", ["c", "b", "x,y"]], // commas are the caller's business
  ])("%j → %j", (host, labels) => {
    expect(reversedLabels(host)).toEqual(labels);
  });

  it.each(["www.example.com", "example.com", "localhost", "", ".", "..", ".a", "a.", "a..b", "example.com.", "x,y.b.c", "127.0.0.1"])("joinReversedLabels(%j) is the labels joined", (host) => {
    expect(joinReversedLabels(host, ",")).toBe(reversedLabels(host).join(","));
  });
});
