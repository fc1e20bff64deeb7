import { randomBytes } from "node:crypto";
import { gunzipSync, gzipSync } from "node:zlib";
import { describe, expect, it } from "vitest";
import { gzipMemberSync } from "../../src/warc/deflate.js";
import { encodeRecordSync } from "../../src/warc/gzipMember.js";

const text = (n: number) => Buffer.from("WARC-Type: response\r\nWARC-Target-URI: http://example.com/\r\n".repeat(Math.ceil(n / 57)).slice(0, n));

describe("gzipMemberSync (one reused deflate stream per level)", () => {
  it.each([0, 1, 6, 9])("is byte for byte zlib.gzipSync at level %i, over many calls and sizes", (level) => {
    for (const n of [0, 1, 466, 4096, 65_535, 65_536, 200_000]) {
      for (const data of [text(n), randomBytes(n)]) {
        const parts = n > 10 ? [data.subarray(0, 7), data.subarray(7, n >> 1), data.subarray(n >> 1)] : [data];
        const m = gzipMemberSync(parts, level);
        expect(m.equals(gzipSync(data, { level })), `level ${level}, ${n} bytes`).toBe(true);
        expect(gunzipSync(m).equals(data)).toBe(true);
      }
    }
  });

  it("writes a valid empty member for no parts", () => {
    expect(gunzipSync(gzipMemberSync([], 6)).length).toBe(0);
  });
});

describe("encodeRecordSync", () => {
  const head = Buffer.from("WARC/1.1\r\nWARC-Type: resource\r\nContent-Length: 11\r\n\r\n");
  const record = Buffer.concat([head, Buffer.from("hello world"), Buffer.from("\r\n\r\n")]);

  it("encodes in-memory parts and in-memory sources, with or without the sl field", () => {
    const source = { size: 5, createReadStream: () => { throw new Error("must not stream"); }, memory: () => [Buffer.from("wor"), Buffer.from("ld")] };
    for (const skipLength of [false, true]) {
      const e = encodeRecordSync(head, [Buffer.from("hello "), source], { gzip: true, skipLength })!;
      expect(e).not.toBeNull();
      expect(gunzipSync(Buffer.concat(e.parts!)).equals(record)).toBe(true);
      expect(e.size).toBe(Buffer.concat(e.parts!).length);
      if (skipLength) expect(Buffer.concat(e.parts!).readUInt32LE(16)).toBe(e.size);
    }
    const plain = encodeRecordSync(head, [Buffer.from("hello "), source], { gzip: false })!;
    expect(Buffer.concat(plain.parts!).equals(record)).toBe(true);
  });

  it("declines a source that is not in memory, and refuses one whose chunks disagree with its size", () => {
    const onDisk = { size: 5, createReadStream: () => { throw new Error("x"); }, memory: () => null };
    expect(encodeRecordSync(head, [onDisk], { gzip: true })).toBeNull();
    const liar = { size: 9, createReadStream: () => { throw new Error("x"); }, memory: () => [Buffer.from("abc")] };
    expect(() => encodeRecordSync(head, [liar], { gzip: true })).toThrow(/shorter than its declared 9 bytes/);
  });
});
