import { describe, it, expect } from "vitest";
import * as der from "../../src/tls/der.js";

const hex = (b: Buffer) => b.toString("hex");

describe("der encoder", () => {
  it.each([
    ["00", "020100"],
    ["0000", "020100"],
    ["7f", "02017f"],
    ["80", "02020080"],
    ["00007f", "02017f"],
    ["0080", "02020080"],
    ["ff01", "020300ff01"],
  ])("unsignedInteger(%s) is minimal and positive", (input, out) => {
    expect(hex(der.unsignedInteger(Buffer.from(input, "hex")))).toBe(out);
  });

  it.each([
    [0, "0400"],
    [127, "047f"],
    [128, "048180"],
    [255, "0481ff"],
    [256, "04820100"],
    [70000, "0483011170"],
  ])("length %i uses the shortest form", (len, prefix) => {
    expect(hex(der.octetString(Buffer.alloc(len))).slice(0, prefix.length)).toBe(prefix);
  });

  it.each([
    ["1.2.840.10045.4.3.2", "06082a8648ce3d040302"],
    ["2.5.29.17", "0603551d11"],
    ["1.3.6.1.5.5.7.3.1", "06082b06010505070301"],
  ])("oid %s", (dotted, out) => {
    const enc = der.oid(dotted);
    expect(hex(enc)).toBe(out);
    expect(der.readOid(der.readTlv(enc))).toBe(dotted);
  });

  it.each([
    ["2026-12-03T12:34:56.789Z", "170d3236313230333132333435365a"],
    ["2049-12-31T23:59:59Z", "170d3439313233313233353935395a"],
    ["2050-01-01T00:00:00Z", "180f32303530303130313030303030305a"],
    ["1949-06-01T00:00:00Z", "180f31393439303630313030303030305a"],
  ])("time %s: UTCTime before 2050, GeneralizedTime from 2050", (iso, out) => {
    const ms = Date.parse(iso);
    const enc = der.time(ms);
    expect(hex(enc)).toBe(out);
    expect(der.readTime(der.readTlv(enc))).toBe(Math.floor(ms / 1000) * 1000);
  });

  it("reads nested structures back", () => {
    const enc = der.sequence(der.unsignedInteger(Buffer.from([5])), der.octetString(Buffer.alloc(200, 1)), der.sequence());
    const kids = der.children(der.readTlv(enc));
    expect(kids.map((k) => k.tag)).toEqual([der.TAG.INTEGER, der.TAG.OCTET_STRING, der.TAG.SEQUENCE]);
    expect(der.content(kids[1]!).length).toBe(200);
    expect(der.raw(kids[2]!).toString("hex")).toBe("3000");
  });

  it("rejects truncated input", () => {
    expect(() => der.readTlv(Buffer.from("3005020101", "hex"))).toThrow(/truncated/);
    expect(() => der.readTlv(Buffer.from("3080", "hex"))).toThrow(/length/);
  });
});
