/**
 * The WACZ's ZIP writer (src/wacz/zipWriter.ts) read back by Python's zipfile and Info-ZIP's
 * unzip: stored entries with data descriptors, sizes announced by zipLength to the byte, names in
 * UTF-8; ZIP64 forced on small entries (the records a > 4 GiB WACZ gets, without writing 4 GiB);
 * more than 65 535 entries (the ZIP64 end records the count alone calls for); misuse refused.
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { ZipWriter, zipLength, type ZipOptions } from "../../src/wacz/zipWriter.js";
import { dataOffset, pythonZip, unzipEntry } from "../helpers/wacz.js";

const dir = mkdtempSync(join(tmpdir(), "lathe-zip-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

interface Spec {
  name: string;
  data: Buffer;
}

/** Write the entries into memory (chunks of `chunk` bytes), then to a file. */
async function writeZip(file: string, specs: Spec[], o: ZipOptions = {}, chunk = 7): Promise<Buffer> {
  const parts: Buffer[] = [];
  const zip = new ZipWriter(async (b) => void parts.push(Buffer.from(b)), o);
  const mtime = new Date(2026, 11, 3, 10, 45, 8);
  for (const s of specs) {
    await zip.begin({ name: s.name, size: s.data.length, mtime });
    for (let i = 0; i < s.data.length; i += chunk) await zip.data(s.data.subarray(i, i + chunk));
    await zip.end();
  }
  const n = await zip.finish();
  const all = Buffer.concat(parts);
  expect(all.length).toBe(n);
  expect(zipLength(specs.map((s) => ({ name: s.name, size: s.data.length })), o)).toBe(n);
  writeFileSync(file, all);
  return all;
}

const SPECS: Spec[] = [
  { name: "archive/a.warc.gz", data: Buffer.from("first entry, a few bytes\n".repeat(40)) },
  { name: "empty.txt", data: Buffer.alloc(0) },
  { name: "pages/späße ✓.jsonl", data: Buffer.from('{"url": "https://example.com/"}\n') },
  { name: "datapackage.json", data: Buffer.from("{}\n") },
];

describe("ZipWriter", () => {
  for (const forceZip64 of [false, true]) {
    it(`writes stored entries Python's zipfile and unzip read back${forceZip64 ? " (ZIP64 forced)" : ""}`, async () => {
      const file = join(dir, `plain-${forceZip64}.zip`);
      const all = await writeZip(file, SPECS, { forceZip64 });
      const { entries, bad } = pythonZip(file);
      expect(bad).toBeNull();
      expect(entries.map((e) => [e.name, e.compress, e.size])).toEqual(SPECS.map((s) => [s.name, 0, s.data.length]));
      for (const [i, s] of SPECS.entries()) {
        expect(unzipEntry(file, s.name).equals(s.data)).toBe(true);
        // Stored: the entry's bytes sit in the archive as they are, where a range request finds them.
        const at = dataOffset(file, entries[i]!.headerOffset);
        expect(all.subarray(at, at + s.data.length).equals(s.data)).toBe(true);
      }
      const test = execFileSync("unzip", ["-t", file]).toString();
      expect(test).toContain("No errors detected");
      // The ZIP64 end records are there exactly when forced (zipinfo names the archive's ZIP64 end record).
      expect(all.includes(Buffer.from([0x50, 0x4b, 0x06, 0x06]))).toBe(forceZip64);
      if (forceZip64) {
        const v = execFileSync("zipinfo", ["-v", file]).toString();
        expect(v.match(/minimum software version required to extract:\s+4\.5/g)?.length).toBe(SPECS.length);
      }
    });
  }

  it("goes to ZIP64 end records past 65 535 entries, and both readers list them all", async () => {
    const file = join(dir, "many.zip");
    const specs = Array.from({ length: 70_000 }, (_, i) => ({ name: `e/${i}`, data: Buffer.from(String(i)) }));
    const all = await writeZip(file, specs, {}, 64);
    expect(all.includes(Buffer.from([0x50, 0x4b, 0x06, 0x06]))).toBe(true);
    const { entries, bad } = pythonZip(file);
    expect(bad).toBeNull();
    expect(entries.length).toBe(70_000);
    expect(entries[69_999]).toMatchObject({ name: "e/69999", size: 5 });
    expect(unzipEntry(file, "e/65536").toString()).toBe("65536");
    expect(execFileSync("unzip", ["-l", file], { maxBuffer: 64 * 1024 * 1024 }).toString()).toMatch(/\s70000 files\n/);
  }, 120_000);

  it("refuses an entry whose bytes differ from the size announced, and overlapping entries", async () => {
    const zip = new ZipWriter(async () => {});
    const mtime = new Date();
    await zip.begin({ name: "a", size: 3, mtime });
    await zip.data(Buffer.from("ab"));
    expect(() => zip.end()).toThrow(/a has 2 bytes, not the 3 announced/);
    const z2 = new ZipWriter(async () => {});
    await z2.begin({ name: "b", size: 1, mtime });
    expect(() => z2.data(Buffer.from("xy"))).toThrow(/longer than the 1 bytes announced/);
    expect(() => z2.begin({ name: "c", size: 0, mtime })).toThrow(/b is not finished/);
  });
});
