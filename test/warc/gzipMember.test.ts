import { createReadStream, readFileSync } from "node:fs";
import { open, readdir, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { gunzipSync, gzipSync } from "node:zlib";
import { afterAll, describe, expect, it } from "vitest";
import { encodeRecord, slExtraField, writevFully, type EncodedRecord } from "../../src/warc/gzipMember.js";
import { bufferSource, fileSource, noise, removeTempDirs, tempDir } from "./helpers.js";

afterAll(removeTempDirs);

const head = Buffer.from("WARC/1.1\r\nWARC-Type: resource\r\nContent-Length: 11\r\n\r\n");
const body = Buffer.from("hello world");
const record = Buffer.concat([head, body, Buffer.from("\r\n\r\n")]);

async function bytesOf(e: EncodedRecord, at = 0): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let end = 0;
  await e.writeTo(
    {
      async write(b, o, l, p) {
        chunks.push(Buffer.from(b.subarray(o, o + l)));
        expect(p).toBe(at + end);
        end += l;
        return { bytesWritten: l };
      },
    },
    at,
  );
  return Buffer.concat(chunks);
}

describe("encodeRecord", () => {
  it.each([1, 6, 9])("writes the exact gzip header zlib.gzipSync writes at level %i", async (level) => {
    const e = await encodeRecord(head, [body], { gzip: true, level });
    const b = await bytesOf(e, 100);
    expect(b.subarray(0, 10).equals(gzipSync(record, { level }).subarray(0, 10))).toBe(true);
    if (level === 6) expect(b.subarray(0, 10).toString("hex")).toBe("1f8b0800000000000003");
    expect(gunzipSync(b).equals(record)).toBe(true);
    expect(e.size).toBe(b.length);
    expect(e.recordSize).toBe(record.length);
  });

  it("adds the 'sl' extra field with the member's on-disk and inflated lengths", async () => {
    const e = await encodeRecord(head, [bufferSource(body, 3)], { gzip: true, skipLength: true });
    const b = await bytesOf(e);
    expect(b.subarray(0, 10).toString("hex")).toBe("1f8b0804000000000003");
    expect(b.readUInt16LE(10)).toBe(12);
    expect(b.subarray(12, 14).toString("latin1")).toBe("sl");
    expect(b.readUInt16LE(14)).toBe(8);
    expect(b.readUInt32LE(16)).toBe(b.length);
    expect(b.readUInt32LE(20)).toBe(record.length);
    expect(gunzipSync(b).equals(record)).toBe(true);
    expect(slExtraField(1, 2).toString("hex")).toBe("0c00736c08000100000002000000");
  });

  it("streams a large StreamSource through a temp-file spool and removes it", async () => {
    const dir = await tempDir();
    const spoolDir = await tempDir();
    // Text that deflates by a quarter only: still above the memory bound once compressed.
    const big = Buffer.from(noise(3 * 1024 * 1024 + 17).toString("base64").slice(0, 3 * 1024 * 1024 + 17));
    const src = join(dir, "body");
    await writeFile(src, big);
    const e = await encodeRecord(head, [fileSource(src, big.length)], { gzip: true, spoolDir, spoolMemoryBytes: 64 * 1024, skipLength: true });
    // the spool file is unlinked as soon as it is created: nothing to leave behind after a crash
    expect(await readdir(spoolDir)).toEqual([]);
    const out = join(dir, "out.gz");
    const fh = await open(out, "w");
    await e.writeTo(fh, 5);
    await fh.close();
    await e.dispose();
    const b = readFileSync(out).subarray(5);
    expect(b.length).toBe(e.size);
    expect((await stat(out)).size).toBe(5 + e.size);
    expect(b.readUInt32LE(16)).toBe(e.size);
    expect(gunzipSync(b).equals(Buffer.concat([head, big, Buffer.from("\r\n\r\n")]))).toBe(true);
    expect(await readdir(spoolDir)).toEqual([]);
  });

  it("keeps a medium record in memory as pieces (no joined copy) and writes them all with pwritev", async () => {
    const mid = Buffer.from(noise(700 * 1024).toString("base64").slice(0, 700 * 1024)); // compressible; above the synchronous path, below the 1 MiB memory bound
    const e = await encodeRecord(head, [bufferSource(mid, 16 * 1024)], { gzip: true, skipLength: true });
    expect(e.parts!.length).toBeGreaterThan(2);
    expect(e.parts!.reduce((n, p) => n + p.byteLength, 0)).toBe(e.size);
    const dir = await tempDir();
    const out = join(dir, "mid.gz");
    const fh = await open(out, "w");
    await e.writeTo(fh, 3);
    await fh.close();
    const b = readFileSync(out).subarray(3);
    expect(b.length).toBe(e.size);
    expect(b.readUInt32LE(16)).toBe(e.size);
    expect(gunzipSync(b).equals(Buffer.concat([head, mid, Buffer.from("\r\n\r\n")]))).toBe(true);
  });

  it("writevFully resumes short pwritev writes mid-buffer and never writes a byte twice", async () => {
    const parts = [Buffer.from("abc"), Buffer.alloc(0), Buffer.from("defgh"), Buffer.from("ij"), Buffer.from("klmnopq")];
    const disk = Buffer.alloc(40, ".");
    const calls: number[] = [];
    const writer = {
      async write(): Promise<{ bytesWritten: number }> {
        throw new Error("writev expected");
      },
      async writev(bufs: Uint8Array[], pos: number) {
        // at most 4 bytes per call: every split point lands inside or between buffers
        const joined = Buffer.concat(bufs).subarray(0, 4);
        joined.copy(disk, pos);
        calls.push(pos);
        return { bytesWritten: joined.length };
      },
    };
    await writevFully(writer, parts, 2);
    expect(disk.toString("latin1", 2, 19)).toBe("abcdefghijklmnopq");
    expect(disk.toString("latin1", 19)).toBe(".".repeat(21));
    expect(calls).toEqual([2, 6, 10, 14, 18]);
    const stuck = { write: writer.write, writev: async () => ({ bytesWritten: 0 }) };
    await expect(writevFully(stuck, parts, 0)).rejects.toThrow(/no progress/);
  });

  it("writes .warc records uncompressed with their CRLF CRLF", async () => {
    const e = await encodeRecord(head, [Buffer.from("hello "), bufferSource(Buffer.from("world"), 2)], { gzip: false });
    expect(e.size).toBe(record.length);
    expect((await bytesOf(e)).equals(record)).toBe(true);
  });

  it.each([true, false])("refuses a stream that is not its declared size (gzip %s)", async (gzip) => {
    const short = bufferSource(body, 4, body.length + 1);
    const long = bufferSource(body, 4, body.length - 1);
    for (const src of [short, long]) {
      const run = async () => bytesOf(await encodeRecord(head, [src], { gzip }));
      await expect(run()).rejects.toMatchObject({ code: "ERR_SPOOL" });
    }
  });

  it("reports a failing source as ERR_SPOOL", async () => {
    const bad = { size: 5, createReadStream: () => createReadStream("/nonexistent/lathe") };
    await expect(encodeRecord(head, [bad], { gzip: true })).rejects.toMatchObject({ code: "ERR_SPOOL" });
  });
});
