/** Compressing groups ahead of the queue: at once when small and in memory, else on a slot. */
import { Readable } from "node:stream";
import { gunzipSync } from "node:zlib";
import { describe, expect, it } from "vitest";
import { GroupEncoder, inMemory } from "../../src/warc/groupEncoder.js";
import { captureGroup, makeDraft, parseRecord } from "./helpers.js";

const gzip = { gzip: true, level: 6, skipLength: false };

describe("group encoder", () => {
  it("compresses a small in-memory group at once, for the file named now", async () => {
    const encoder = new GroupEncoder("1.1", gzip);
    const group = [makeDraft("response", "https://example.com/a", [Buffer.from("HTTP/1.1 200 OK\r\n\r\nhi")])];
    const p = encoder.start(group, () => "<urn:uuid:info-1>");
    expect(p.ready).not.toBeNull();
    const g = await p.result;
    expect(g).toBe(p.ready);
    expect(inMemory(g)).toBe(true);
    expect(g.drafts).toBe(group);
    const rec = parseRecord(gunzipSync(Buffer.concat(g.records[0]!.parts!)));
    expect(rec.fields.find(([n]) => n === "WARC-Warcinfo-ID")?.[1]).toBe("<urn:uuid:info-1>");
  });

  it("a streamed body takes a slot, and names the file current when its compression starts", async () => {
    const encoder = new GroupEncoder("1.1", gzip, 1);
    let target = "<urn:uuid:info-1>";
    const p = encoder.start(captureGroup("https://example.com/a", Buffer.from("streamed")), () => target);
    expect(p.ready).toBeNull();
    target = "<urn:uuid:info-2>"; // a rollover before its slot came
    const g = await p.result;
    expect(g.warcinfoId).toBe("<urn:uuid:info-2>");
    expect(g.size).toBe(g.records.reduce((n, r) => n + r.size, 0));
    p.release();
  });

  it("refuses a group holding a warcinfo record, and one whose source breaks", async () => {
    const encoder = new GroupEncoder("1.1", gzip);
    const info = { ...makeDraft("metadata", "https://example.com/", [Buffer.from("x")]), type: "warcinfo" as const };
    const p = encoder.start([info], () => "<urn:uuid:info-1>");
    expect(p.ready).toBeNull();
    await expect(p.result).rejects.toMatchObject({ code: "ERR_INTERNAL" });
    const broken = captureGroup("https://example.com/b", Buffer.from("b"));
    broken[0]!.block[1] = { size: 10, createReadStream: () => Readable.from([Buffer.from("short")]) };
    await expect(encoder.encode(broken, "<urn:uuid:info-1>")).rejects.toMatchObject({ code: "ERR_SPOOL" });
  });
});
