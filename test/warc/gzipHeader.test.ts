/**
 * Gzip member headers as the reader parses them (src/warc/gzipHeader.ts): where the deflate
 * data starts, whatever optional fields the header has; the 'sl' sizes when present and well
 * formed; "short" for every header cut before its end, "bad" for bytes that are not one.
 */
import { gzipSync, inflateRawSync } from "node:zlib";
import { describe, expect, it } from "vitest";
import { parseGzipHeader } from "../../src/warc/gzipHeader.js";
import { gzipMember, subfield, type MemberOptions } from "./members.js";

const DATA = Buffer.from("WARC/1.1\r\nWARC-Type: resource\r\nContent-Length: 5\r\n\r\nhello\r\n\r\n");

const shapes: Array<[string, MemberOptions]> = [
  ["no optional fields", {}],
  ["FNAME", { name: "record.warc" }],
  ["FNAME and FCOMMENT", { name: "record.warc", comment: "a comment" }],
  ["FHCRC", { hcrc: true }],
  ["FEXTRA with another subfield", { extra: subfield("AB", Buffer.from("xyz")) }],
  ["'sl' after another subfield, with FNAME, FCOMMENT and FHCRC", { extra: subfield("AB", Buffer.from("xyz")), sl: "exact", name: "n", comment: "c", hcrc: true }],
];

describe("parseGzipHeader", () => {
  it("finds where the deflate data starts, in a member node:zlib writes", () => {
    const m = gzipSync(DATA);
    expect(parseGzipHeader(m)).toEqual({ length: 10, sl: null });
  });

  for (const [what, o] of shapes) {
    it(`finds where the deflate data starts: ${what}`, () => {
      const m = gzipMember(DATA, o);
      const h = parseGzipHeader(m);
      if (typeof h === "string") throw new Error(`parsed as ${h}`);
      expect(inflateRawSync(m.subarray(h.length))).toEqual(DATA);
    });

    it(`says "short" for every cut inside the header: ${what}`, () => {
      const m = gzipMember(DATA, o);
      const h = parseGzipHeader(m);
      if (typeof h === "string") throw new Error(`parsed as ${h}`);
      for (let k = 0; k < h.length; k++) expect(parseGzipHeader(m.subarray(0, k)), `cut at ${k}`).toBe("short");
      expect(parseGzipHeader(m.subarray(0, h.length))).toEqual(h);
    });
  }

  it("reads the 'sl' sizes (little-endian) when the subfield has 8 bytes", () => {
    const m = gzipMember(DATA, { sl: "exact" });
    expect(parseGzipHeader(m)).toEqual({ length: 10 + 2 + 12, sl: { clen: m.length, ulen: DATA.length } });
    const given = gzipMember(DATA, { sl: { clen: 0x01020304, ulen: 7 } });
    expect((parseGzipHeader(given) as { sl: unknown }).sl).toEqual({ clen: 0x01020304, ulen: 7 });
  });

  it("ignores an 'sl' subfield of another length, and other subfields", () => {
    const odd = gzipMember(DATA, { extra: subfield("sl", Buffer.alloc(6, 1)) });
    expect(parseGzipHeader(odd)).toEqual({ length: 10 + 2 + 10, sl: null });
    const other = gzipMember(DATA, { extra: subfield("xy", Buffer.alloc(8, 1)) });
    expect(parseGzipHeader(other)).toEqual({ length: 10 + 2 + 12, sl: null });
  });

  it('says "bad" for bytes that are not a member header', () => {
    const m = gzipSync(DATA);
    const altered = (i: number, v: number) => {
      const b = Buffer.from(m);
      b[i] = v;
      return b;
    };
    expect(parseGzipHeader(altered(0, 0x1e))).toBe("bad");
    expect(parseGzipHeader(altered(1, 0))).toBe("bad");
    expect(parseGzipHeader(altered(2, 7))).toBe("bad"); // CM other than deflate
    expect(parseGzipHeader(altered(3, 0x20))).toBe("bad"); // reserved FLG bits
    expect(parseGzipHeader(Buffer.from("WARC/1.1\r\n"))).toBe("bad");
    // Three bytes are enough to tell; fewer are "short" whatever they are (the file may end there).
    expect(parseGzipHeader(Buffer.from("WAR"))).toBe("bad");
    expect(parseGzipHeader(Buffer.from("WA"))).toBe("short");
    expect(parseGzipHeader(Buffer.alloc(0))).toBe("short");
  });
});
