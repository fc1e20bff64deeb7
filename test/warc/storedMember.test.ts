import { randomBytes } from "node:crypto";
import { Readable } from "node:stream";
import { createGunzip, gunzipSync } from "node:zlib";
import { WARCParser } from "warcio";
import { describe, expect, it } from "vitest";
import { encodeRecord, encodeRecordSync, type EncodedRecord } from "../../src/warc/gzipMember.js";
import { RECORD_TRAILER } from "../../src/warc/serialize.js";
import { STORED_BLOCK_MAX, StoredMemberEncoder, storedMemberParts, storedMemberSize } from "../../src/warc/storedMember.js";
import type { StreamSource } from "../../src/warc/types.js";

const join = (parts: readonly Uint8Array[]) => Buffer.concat(parts as Uint8Array[]);

/** Gunzip through a zlib stream too (the path a streaming reader takes), not only gunzipSync. */
async function gunzipStream(b: Buffer): Promise<Buffer> {
  const out: Buffer[] = [];
  for await (const c of Readable.from([b]).pipe(createGunzip())) out.push(c as Buffer);
  return Buffer.concat(out);
}

describe("stored-block gzip members", () => {
  const sizes = [0, 1, 100, STORED_BLOCK_MAX - 1, STORED_BLOCK_MAX, STORED_BLOCK_MAX + 1, 2 * STORED_BLOCK_MAX, 1_000_003];

  it.each(sizes)("%i bytes: node's zlib inflates it, and its size is known in advance", async (n) => {
    const data = randomBytes(n);
    // Cut anywhere: blocks do not follow the input's chunks.
    const cuts = n > 10 ? [data.subarray(0, 7), data.subarray(7, n >> 1), data.subarray(n >> 1)] : [data];
    const member = join(storedMemberParts(cuts));
    expect(member.length).toBe(storedMemberSize(n));
    expect(gunzipSync(member).equals(data)).toBe(true);
    expect((await gunzipStream(member)).equals(data)).toBe(true);
    expect(member.subarray(0, 10).toString("hex")).toBe("1f8b0800000000000403");
  });

  it("copies nothing: the input's buffers are in the output", () => {
    const big = randomBytes(STORED_BLOCK_MAX);
    expect(storedMemberParts([big])).toContain(big);
  });

  it("refuses more or fewer bytes than announced", () => {
    const e = new StoredMemberEncoder(10);
    expect(() => e.push(Buffer.alloc(11))).toThrow(/more than/);
    e.push(Buffer.alloc(4));
    expect(() => e.finish()).toThrow(/4 of the 10/);
  });
});

describe("records with incompressible payloads get stored members", () => {
  const head = (n: number) => Buffer.from(`WARC/1.1\r\nWARC-Type: resource\r\nWARC-Target-URI: http://example.com/v.mp4\r\nWARC-Record-ID: <urn:uuid:00000000-0000-4000-8000-000000000000>\r\nWARC-Date: 2026-12-03T10:45:07Z\r\nContent-Type: video/mp4\r\nContent-Length: ${n}\r\n\r\n`);
  const source = (data: Buffer, chunk = 64 * 1024): StreamSource => ({
    size: data.length,
    createReadStream: () => Readable.from((function* () { for (let i = 0; i < data.length; i += chunk) yield data.subarray(i, i + chunk); })()),
  });
  const bytesOf = async (e: EncodedRecord) => {
    const out = Buffer.alloc(e.size);
    await e.writeTo({ write: async (b, off, len, pos) => ({ bytesWritten: Buffer.from(b.buffer, b.byteOffset + off, len).copy(out, pos) }) }, 0);
    return out;
  };

  it.each([[false], [true]])("small and large, sl field %s: valid gzip, read back by warcio", async (skipLength) => {
    for (const n of [5000, 3_000_000]) {
      const payload = randomBytes(n);
      const h = head(n);
      const e = n < 60_000 ? encodeRecordSync(h, [payload], { gzip: true, skipLength })! : await encodeRecord(h, [source(payload)], { gzip: true, skipLength });
      const member = await bytesOf(e);
      expect(member.length).toBe(e.size);
      expect(member.length).toBe(storedMemberSize(e.recordSize) + (skipLength ? 14 : 0));
      if (skipLength) expect([member.readUInt32LE(16), member.readUInt32LE(20)]).toEqual([e.size, e.recordSize]);
      expect(gunzipSync(member).equals(Buffer.concat([h, payload, RECORD_TRAILER]))).toBe(true);
      const records = [];
      for await (const r of new WARCParser(Readable.from([member]))) records.push(Buffer.from(await r.readFully(false)));
      expect(records).toHaveLength(1);
      expect(records[0]!.equals(payload)).toBe(true);
      await e.dispose();
    }
  });

  it("compressible payloads still deflate", async () => {
    const text = Buffer.from("<p>hello, archive</p>\n".repeat(200_000));
    const e = await encodeRecord(head(text.length), [source(text)], { gzip: true });
    expect(e.size).toBeLessThan(text.length / 20);
    await e.dispose();
  });
});
