import { describe, expect, it } from "vitest";
import { blockSize, headerFields, serializeHeader } from "../../src/warc/serialize.js";
import type { RecordDraft } from "../../src/warc/types.js";
import { bufferSource } from "./helpers.js";

const WI = "<urn:uuid:0f6a2d11-8c3e-4b7a-9d5f-1e2a3b4c5d6e>";
const ID = "<urn:uuid:6b1e3c2a-4f7d-4a51-9a0e-2f3c8d9b1a01>";

function draft(fields: Array<[string, string]>, block: RecordDraft["block"] = [Buffer.from("abc")], type: RecordDraft["type"] = "response"): RecordDraft {
  return { type, id: ID, fields, block };
}
const names = (d: RecordDraft, wi: string | undefined = WI) => headerFields(d, { version: "1.1", warcinfoId: wi }).map(([n]) => n);

describe("serializeHeader", () => {
  it("inserts WARC-Warcinfo-ID after WARC-Target-URI and puts Content-Length last", () => {
    const d = draft([
      ["WARC-Type", "response"],
      ["WARC-Record-ID", ID],
      ["WARC-Date", "2026-12-03T10:45:07.123456Z"],
      ["WARC-Target-URI", "https://example.com/page?q=1"],
      ["WARC-IP-Address", "93.184.215.14"],
      ["WARC-Block-Digest", "sha1:X"],
      ["Content-Type", "application/http;msgtype=response"],
    ], [Buffer.from("HTTP/1.1 200 OK\r\n\r\n"), bufferSource(Buffer.alloc(10), 3)]);
    const text = serializeHeader(d, { version: "1.1", warcinfoId: WI }).toString("latin1");
    expect(text).toBe(
      "WARC/1.1\r\n" +
        "WARC-Type: response\r\n" +
        `WARC-Record-ID: ${ID}\r\n` +
        "WARC-Date: 2026-12-03T10:45:07.123456Z\r\n" +
        "WARC-Target-URI: https://example.com/page?q=1\r\n" +
        `WARC-Warcinfo-ID: ${WI}\r\n` +
        "WARC-IP-Address: 93.184.215.14\r\n" +
        "WARC-Block-Digest: sha1:X\r\n" +
        "Content-Type: application/http;msgtype=response\r\n" +
        "Content-Length: 29\r\n" +
        "\r\n",
    );
  });

  it("without a Target-URI, inserts after WARC-Date (or WARC-Filename)", () => {
    const d = draft([["WARC-Type", "metadata"], ["WARC-Record-ID", ID], ["WARC-Date", "d"], ["WARC-Concurrent-To", "<x>"]], [], "metadata");
    expect(names(d)).toEqual(["WARC-Type", "WARC-Record-ID", "WARC-Date", "WARC-Warcinfo-ID", "WARC-Concurrent-To", "Content-Length"]);
  });

  it("warcinfo records get no WARC-Warcinfo-ID", () => {
    const d = draft([["WARC-Type", "warcinfo"], ["WARC-Record-ID", ID], ["WARC-Date", "d"], ["WARC-Filename", "f"]], [], "warcinfo");
    expect(names(d)).toEqual(["WARC-Type", "WARC-Record-ID", "WARC-Date", "WARC-Filename", "Content-Length"]);
    expect(names(d, undefined)).not.toContain("WARC-Warcinfo-ID");
  });

  it("writes the 1.0 version line", () => {
    const d = draft([["WARC-Type", "response"], ["WARC-Record-ID", ID]]);
    expect(serializeHeader(d, { version: "1.0", warcinfoId: WI }).toString().startsWith("WARC/1.0\r\nWARC-Type: response\r\n")).toBe(true);
  });

  it("supplies WARC-Type and WARC-Record-ID from the draft when the fields lack them", () => {
    expect(names(draft([["WARC-Date", "d"]]))).toEqual(["WARC-Type", "WARC-Record-ID", "WARC-Date", "WARC-Warcinfo-ID", "Content-Length"]);
  });

  it("counts the block parts for Content-Length, empty block included", () => {
    expect(blockSize([Buffer.alloc(3), bufferSource(Buffer.alloc(5)), new Uint8Array(0)])).toBe(8);
    expect(serializeHeader(draft([], []), { version: "1.1", warcinfoId: WI }).toString()).toContain("Content-Length: 0\r\n\r\n");
  });

  it.each([
    ["CR/LF in a value", [["WARC-Target-URI", "http://x/\r\nWARC-Type: resource"]]],
    ["a bare LF", [["X", "a\nb"]]],
    ["a non-token name", [["Bad Name", "v"]]],
    ["its own Content-Length", [["Content-Length", "3"]]],
    ["its own WARC-Warcinfo-ID", [["WARC-Warcinfo-ID", WI]]],
    ["a contradicting WARC-Type", [["WARC-Type", "request"]]],
  ] as Array<[string, Array<[string, string]>]>)("refuses a draft with %s", (_, fields) => {
    expect(() => serializeHeader(draft(fields), { version: "1.1", warcinfoId: WI })).toThrow(expect.objectContaining({ code: "ERR_INTERNAL" }));
  });

  it("refuses a non-warcinfo record without a warcinfo id", () => {
    expect(() => serializeHeader(draft([]), { version: "1.1" })).toThrow(/Warcinfo-ID/);
  });

  it("encodes values as UTF-8", () => {
    const d = draft([["WARC-Target-URI", "urn:x:é"]]);
    expect(serializeHeader(d, { version: "1.1", warcinfoId: WI }).includes(Buffer.from("urn:x:é", "utf8"))).toBe(true);
  });
});

describe("serializeHeader: written straight from the draft, the same text as headerFields orders it", () => {
  const text = (d: RecordDraft, wi: string | undefined) => {
    let s = "WARC/1.1\r\n";
    for (const [n, v] of headerFields(d, { version: "1.1", warcinfoId: wi })) s += `${n}: ${v}\r\n`;
    return Buffer.from(s + "\r\n", "utf8");
  };
  const T: [string, string] = ["WARC-Type", "response"];
  const I: [string, string] = ["warc-record-id", ID];
  const cases: Array<[string, Array<[string, string]>, RecordDraft["type"]]> = [
    ["spec order", [T, I, ["WARC-Date", "d"], ["WARC-Target-URI", "http://x/é?q= 1"], ["WARC-IP-Address", "1.2.3.4"]], "response"],
    ["id before type", [I, T, ["X-A", ""]], "response"],
    ["type and id late", [["X-A", "a"], ["WARC-Date", "d"], T, ["X-B", "b"], I], "response"],
    ["before-fields last", [T, I, ["X-A", "a"], ["WARC-Filename", "f"]], "response"],
    ["twice the type", [T, I, ["X-A", "a"], T, ["X-B", "b"]], "response"],
    ["only type and id", [T, I], "response"],
    ["mixed case", [["warc-type", "response"], ["WARC-RECORD-ID", ID], ["Warc-Target-Uri", "u"], ["x", "\u00ff\u{1F600}"]], "response"],
    ["a warcinfo", [["WARC-Type", "warcinfo"], I, ["WARC-Date", "d"], ["WARC-Filename", "f"], ["Content-Type", "application/warc-fields"]], "warcinfo"],
    ["no type", [I, ["WARC-Date", "d"]], "response"],
    ["no id", [T, ["WARC-Date", "d"], ["X-A", "a"]], "response"],
  ];
  it.each(cases)("%s", (_, fields, type) => {
    const d = draft(fields, [Buffer.from("abc"), bufferSource(Buffer.alloc(7))], type);
    const wi = type === "warcinfo" ? undefined : WI;
    expect(serializeHeader(d, { version: "1.1", warcinfoId: wi }).equals(text(d, wi))).toBe(true);
  });

  it("refuses the same drafts with the same errors, names already seen or not", () => {
    const bad: Array<Array<[string, string]>> = [
      [T, I, ["WARC-Date", "a\rb"]],
      [T, I, ["Bad Name", "v"]],
      [T, I, ["Content-Length", "3"]],
      [T, ["WARC-Record-ID", "<other>"]],
      [["WARC-Type", "request"], I],
    ];
    for (const fields of bad) {
      const d = draft(fields);
      const msg = (f: () => unknown) => {
        try {
          f();
        } catch (e) {
          return (e as Error).message;
        }
        return null;
      };
      const expected = msg(() => headerFields(d, { version: "1.1", warcinfoId: WI }));
      expect(expected).not.toBeNull();
      expect(msg(() => serializeHeader(d, { version: "1.1", warcinfoId: WI }))).toBe(expected);
    }
  });
});
