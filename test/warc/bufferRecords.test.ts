/**
 * WARC records from bytes in memory (src/warc/bufferRecords.ts): the file reader's scanner over a
 * buffer, and one record's header and HTTP head from its first bytes.
 */
import { describe, expect, it } from "vitest";
import { recordFromPrefix, recordsInBuffer } from "../../src/warc/bufferRecords.js";

function record(type: string, uri: string, block: string): Buffer {
  const b = Buffer.from(block, "utf8");
  return Buffer.concat([Buffer.from(`WARC/1.1\r\nWARC-Type: ${type}\r\nWARC-Target-URI: ${uri}\r\nWARC-Record-ID: <urn:uuid:${type}>\r\nContent-Type: application/http; msgtype=${type}\r\nContent-Length: ${b.length}\r\n\r\n`), b, Buffer.from("\r\n\r\n")]);
}

const req = record("request", "https://example.com/", "GET / HTTP/1.1\r\nHost: example.com\r\nSec-Fetch-Dest: document\r\n\r\n");
const resp = record("response", "https://example.com/", `HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n<p>${"x".repeat(5000)}</p>`);

describe("records in a buffer", () => {
  it("reads every record, with its HTTP head", async () => {
    const { records, errors } = await recordsInBuffer("mem", Buffer.concat([resp, req]));
    expect(errors).toEqual([]);
    expect(records.map((r) => [r.warcType, r.offset, r.recordId])).toEqual([
      ["response", 0, "<urn:uuid:response>"],
      ["request", resp.length, "<urn:uuid:request>"],
    ]);
    expect(records[1]!.httpHead()?.get("sec-fetch-dest")).toBe("document");
  });

  it("reports bytes that are not whole records", async () => {
    const { records, errors } = await recordsInBuffer("mem", Buffer.concat([req, resp.subarray(0, resp.length - 100)]));
    expect(records.map((r) => r.warcType)).toEqual(["request"]);
    expect(errors[0]?.reason).toMatch(/truncated/);
    expect((await recordsInBuffer("mem", Buffer.from("<html>not a WARC</html>"))).errors.length).toBeGreaterThan(0);
  });
});

describe("a record from its first bytes", () => {
  const place = { file: "f.warc", gzip: false, offset: 1000, length: resp.length - 4 };

  it("has its header and HTTP head, and says its block was not read whole", () => {
    const r = recordFromPrefix(place, resp.subarray(0, 400))!;
    expect(r.warcType).toBe("response");
    expect(r.offset).toBe(1000);
    expect(r.httpHead()?.status).toBe(200);
    expect(r.httpHead()?.get("content-type")).toBe("text/html");
    expect(r.blockKept).toBe(false);
    expect(recordFromPrefix(place, resp)!.blockKept).toBe(true);
  });

  it("is null when the prefix does not hold a whole WARC header", () => {
    expect(recordFromPrefix(place, resp.subarray(0, 40))).toBeNull();
    expect(recordFromPrefix(place, Buffer.from("HTTP/1.1 200 OK\r\n\r\n"))).toBeNull();
  });
});
