/**
 * A landed draft seen as a WarcRecord (src/index/landedRecord.ts): its fields as a reader of the
 * file gets them (values trimmed, the first field of a name wins, names matched without case),
 * whether or not any value had to be re-read.
 */
import { describe, expect, it } from "vitest";
import { landedRecord } from "../../src/index/landedRecord.js";
import type { RecordDraft } from "../../src/warc/types.js";

const head = Buffer.from("HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\nhello");
const landed = async (d: RecordDraft) => await landedRecord(d, 5, 6, "f.warc.gz");

describe("landedRecord", () => {
  it("reads the usual fields of a draft whose values are written as they are", async () => {
    const fields: Array<[string, string]> = [
      ["WARC-Type", "revisit"],
      ["WARC-Record-ID", "<urn:uuid:1>"],
      ["WARC-Date", "2026-12-07T17:20:01.123456Z"],
      ["WARC-Target-URI", "http://127.0.0.1:4000/bytes/10000"],
      ["WARC-Payload-Digest", "sha1:AAAABBBBCCCCDDDDEEEEFFFFGGGGHHHH"],
      ["Content-Type", "application/http;msgtype=response"],
    ];
    const r = await landed({ type: "revisit", id: "<urn:uuid:1>", fields, block: [head] });
    expect(r.headers).toEqual(fields);
    expect([r.warcType, r.recordId, r.date, r.targetUri]).toEqual(["revisit", "<urn:uuid:1>", "2026-12-07T17:20:01.123456Z", "http://127.0.0.1:4000/bytes/10000"]);
    expect(r.get("warc-payload-digest")).toBe("sha1:AAAABBBBCCCCDDDDEEEEFFFFGGGGHHHH");
    expect(r.get("WARC-PAYLOAD-DIGEST")).toBe("sha1:AAAABBBBCCCCDDDDEEEEFFFFGGGGHHHH");
    expect(r.get("warc-concurrent-to")).toBeNull();
    expect(r.httpHead()?.startLine).toBe("HTTP/1.1 200 OK");
    expect([r.offset, r.length, r.file, r.contentLength]).toEqual([5, 6, "f.warc.gz", head.length]);
  });

  it("trims values as a reader does, takes the first field of a name, and falls back to the draft's type and id", async () => {
    const fields: Array<[string, string]> = [
      ["warc-type", " response "],
      ["WARC-TYPE", "request"],
      ["WARC-Target-URI", "<http://example.com/é>"],
      ["X-Odd", "\u00a0spaced\t"],
      ["Content-Type", "APPLICATION/HTTP"],
    ];
    const r = await landed({ type: "resource", id: "<urn:uuid:2>", fields, block: [head] });
    expect(r.headers).toEqual([
      ["warc-type", "response"],
      ["WARC-TYPE", "request"],
      ["WARC-Target-URI", "<http://example.com/é>"],
      ["X-Odd", "spaced"],
      ["Content-Type", "APPLICATION/HTTP"],
    ]);
    expect(fields[0]![1]).toBe(" response "); // the draft is left as it was
    expect(r.warcType).toBe("response");
    expect(r.getAll("warc-type")).toEqual(["response", "request"]);
    expect(r.targetUri).toBe("http://example.com/é");
    expect(r.recordId).toBe("<urn:uuid:2>");
    expect(r.date).toBeNull();
    expect(r.httpHead()?.startLine).toBe("HTTP/1.1 200 OK");

    const bare = await landed({ type: "metadata", id: "<urn:uuid:3>", fields: [], block: [] });
    expect([bare.warcType, bare.recordId, bare.targetUri, bare.headers.length, bare.httpHead()]).toEqual(["metadata", "<urn:uuid:3>", null, 0, null]);
  });
});
