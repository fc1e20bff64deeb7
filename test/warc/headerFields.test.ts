/**
 * Header sections as the reader parses them (src/warc/headerFields.ts): where a section ends
 * (CRLF CRLF, or LF LF when that comes first), its fields (folding, repeats, lines without a
 * name), and the case-insensitive lookup.
 */
import { describe, expect, it } from "vitest";
import { fieldGetter, findHeadEnd, parseFields } from "../../src/warc/headerFields.js";

describe("findHeadEnd", () => {
  const cases: Array<[string, { end: number; sep: number } | null]> = [
    ["WARC/1.1\r\nA: b\r\n\r\nblock", { end: 14, sep: 4 }],
    ["WARC/1.1\nA: b\n\nblock", { end: 13, sep: 2 }],
    // Bare LF first, CRLF CRLF only in the block: the LF LF ends the header.
    ["WARC/1.1\nA: b\n\nblock\r\n\r\n", { end: 13, sep: 2 }],
    // CRLF CRLF first, LF LF only in the block.
    ["WARC/1.1\r\nA: b\r\n\r\nblock\n\n", { end: 14, sep: 4 }],
    ["WARC/1.1\r\nA: b\r\n", null],
    ["", null],
  ];
  for (const [text, want] of cases) {
    it(JSON.stringify(text), () => {
      expect(findHeadEnd(Buffer.from(text))).toEqual(want);
    });
  }
});

describe("parseFields", () => {
  it("reads the first line and the fields, values trimmed, names as written", () => {
    const f = parseFields("WARC/1.1 \r\nWARC-Type:  response \r\nContent-Length: 5\r\n");
    expect(f).toEqual({
      firstLine: "WARC/1.1",
      headers: [
        ["WARC-Type", "response"],
        ["Content-Length", "5"],
      ],
      lower: ["warc-type", "content-length"],
      values: ["response", "5"],
    });
  });

  it("splits on bare LF when there is no CRLF", () => {
    expect(parseFields("HTTP/1.1 200 OK\nA: 1\nB: 2").headers).toEqual([
      ["A", "1"],
      ["B", "2"],
    ]);
  });

  it("joins folded lines to the field before them; skips lines without a name", () => {
    const f = parseFields("WARC/1.1\r\n folded before any field\r\nA: one\r\n  two\r\n\tthree\r\nno colon here\r\n: no name\r\nB: x");
    expect(f.headers).toEqual([
      ["A", "one two three"],
      ["B", "x"],
    ]);
    expect(f.values).toEqual(["one two three", "x"]);
  });
});

describe("fieldGetter", () => {
  const f = parseFields("WARC/1.1\r\nWARC-Concurrent-To: <a>\r\nwarc-concurrent-to: <b>\r\nContent-Length: 0");
  const g = fieldGetter(f.lower, f.values);
  it("finds the first value of a field, whatever the case", () => {
    expect(g.get("WARC-CONCURRENT-TO")).toBe("<a>");
    expect(g.get("content-length")).toBe("0");
    expect(g.get("warc-type")).toBeNull();
  });
  it("finds every value of a repeated field, in order", () => {
    expect(g.getAll("Warc-Concurrent-To")).toEqual(["<a>", "<b>"]);
    expect(g.getAll("warc-type")).toEqual([]);
  });
});
