import { readFile, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { gunzipSync } from "node:zlib";
import { afterAll, describe, expect, it } from "vitest";
import type { WrittenRecord } from "../../src/warc/types.js";
import { createWarcWriter } from "../../src/warc/writer.js";
import { captureGroup, get, listDir, makeDraft, noise, parseRecord, removeTempDirs, splitPlain, tempDir, verifyFile, writerOpts } from "./helpers.js";

afterAll(removeTempDirs);

const NAME0 = "lathe-20261203104507123-00000-crawl7.example.org.warc.gz";
const byFile = (ws: WrittenRecord[]) => {
  const m = new Map<string, WrittenRecord[]>();
  for (const w of ws) m.set(w.filename, [...(m.get(w.filename) ?? []), w]);
  return m;
};

describe("WARC writer", () => {
  it("writes groups to NAME.open, warcinfo first, and renames on close", async () => {
    const dir = await tempDir();
    const closed: string[] = [];
    const w = createWarcWriter(writerOpts(dir, { onFileClosed: (p) => closed.push(p) }));
    expect(await listDir(dir)).toEqual([]); // opened only when the first group arrives
    const a = await w.write(captureGroup("https://example.com/a", Buffer.from("<html>a</html>")));
    const b = await w.write([
      ...captureGroup("https://example.com/b", noise(5000)),
      makeDraft("metadata", "https://example.com/b", [Buffer.from("tls-protocol: tls/1.3\r\n")]),
    ]);
    expect(await listDir(dir)).toEqual([`${NAME0}.open`]);
    expect(w.state()).toMatchObject({ currentFile: NAME0, failed: null, recordsWritten: 5, filesWritten: [] });
    expect([...a, ...b].every((r) => r.filename === NAME0)).toBe(true);
    expect(a[0]).toMatchObject({ type: "response", targetUri: "https://example.com/a", date: "2026-12-03T10:45:06.850113Z" });
    await w.close();
    expect(await listDir(dir)).toEqual([NAME0]);
    expect(closed).toEqual([join(dir, NAME0)]);
    expect(w.state()).toMatchObject({ currentFile: null, filesWritten: [NAME0] });
    expect(w.state().bytesWritten).toBe((await stat(join(dir, NAME0))).size);

    const recs = await verifyFile(join(dir, NAME0), [...a, ...b]);
    expect(recs.map((r) => get(r, "WARC-Type"))).toEqual(["warcinfo", "response", "request", "response", "request", "metadata"]);
    const info = recs[0]!;
    expect(get(info, "WARC-Date")).toBe("2026-12-03T10:45:07.123456Z"); // the open instant, = timestamp17
    expect(get(info, "WARC-Record-ID")).toBe("<urn:uuid:00000000-0000-4000-8000-000000000001>");
    expect(info.block.toString()).toContain("hostname: crawl7.example.org\r\nip: 192.0.2.17\r\n");
    await expect(w.write(captureGroup("https://example.com/c", Buffer.from("x")))).rejects.toMatchObject({ code: "ERR_WARC_WRITE" });
  });

  it("resolves an empty group without opening a file", async () => {
    const dir = await tempDir();
    const w = createWarcWriter(writerOpts(dir));
    expect(await w.write([])).toEqual([]);
    await w.close();
    expect(await listDir(dir)).toEqual([]);
  });

  it("rolls over by size: groups never split, no warcinfo-only file, a big group alone", async () => {
    const dir = await tempDir();
    const closed: string[] = [];
    const max = 12_000;
    const w = createWarcWriter(writerOpts(dir, { maxFileBytes: max, onFileClosed: (p) => closed.push(p) }));
    const groups: WrittenRecord[][] = [];
    for (let i = 0; i < 7; i++) groups.push(await w.write(captureGroup(`https://example.com/${i}`, noise(3000, i + 1))));
    // bigger than the limit: lands alone in a new file, which is closed right after it
    const big = await w.write(captureGroup("https://example.com/big", noise(30_000, 99)));
    expect(w.state().currentFile).toBeNull();
    expect(closed.at(-1)).toBe(join(dir, big[0]!.filename));
    groups.push(big);
    groups.push(await w.write(captureGroup("https://example.com/after", noise(3000, 100))));
    await w.close();

    const files = await listDir(dir);
    expect(files.length).toBeGreaterThanOrEqual(4);
    expect(files.every((f) => f.endsWith(".warc.gz"))).toBe(true);
    expect(files.map((f) => f.split("-")[2])).toEqual(files.map((_, i) => String(i).padStart(5, "0")));
    for (const g of groups) expect(new Set(g.map((r) => r.filename)).size).toBe(1); // contiguous, one file
    const per = byFile(groups.flat());
    expect([...per.keys()].sort()).toEqual(files); // no file without a group
    for (const f of files) {
      const recs = per.get(f)!;
      await verifyFile(join(dir, f), recs);
      const size = (await stat(join(dir, f))).size;
      const groupsIn = groups.filter((g) => g[0]!.filename === f).length;
      if (size > max) expect(groupsIn).toBe(1);
    }
    expect(per.get(big[0]!.filename)!.length).toBe(2);
    // The group that did not fit was compressed for the old file first: its records must still
    // name the warcinfo of the file they landed in (checked by verifyFile for every file).
  });

  it("closes a file after idleRolloverMs without records; the next record opens a new one", async () => {
    const dir = await tempDir();
    const w = createWarcWriter(writerOpts(dir, { idleRolloverMs: 200 }));
    const a = await w.write(captureGroup("https://example.com/a", Buffer.from("a")));
    await sleep(120);
    const b = await w.write(captureGroup("https://example.com/b", Buffer.from("b"))); // resets the timer
    await sleep(100);
    expect(await listDir(dir)).toEqual([`${NAME0}.open`]);
    await sleep(300);
    expect(await listDir(dir)).toEqual([NAME0]);
    expect(w.state().currentFile).toBeNull();
    const c = await w.write(captureGroup("https://example.com/c", Buffer.from("c")));
    expect(c[0]!.filename).not.toBe(NAME0);
    await w.close();
    await verifyFile(join(dir, NAME0), [...a, ...b]);
    await verifyFile(join(dir, c[0]!.filename), c);
  });

  it("rollover() closes the current file; the next group opens the next serial", async () => {
    const dir = await tempDir();
    const w = createWarcWriter(writerOpts(dir));
    await w.write(captureGroup("https://example.com/a", Buffer.from("a")));
    await w.rollover();
    await w.rollover(); // nothing open: no-op, no empty file
    const b = await w.write(captureGroup("https://example.com/b", Buffer.from("b")));
    await w.close();
    expect(await listDir(dir)).toEqual([NAME0, "lathe-20261203104507124-00001-crawl7.example.org.warc.gz"]);
    expect(b[0]!.offset).toBeGreaterThan(0);
  });

  it("names files from the template", async () => {
    const dir = await tempDir();
    const w = createWarcWriter(writerOpts(dir, { template: "{prefix}-{timestamp14}-{serial}-{shorthostname}-{pid}-{port}-{randomtoken}", port: 8000, prefix: "news" }));
    const r = await w.write(captureGroup("https://example.com/a", Buffer.from("a")));
    await w.close();
    expect(r[0]!.filename).toMatch(new RegExp(`^news-20261203104507-00000-crawl7-${process.pid}-8000-[a-z0-9]{8}\\.warc\\.gz$`));
    expect(await listDir(dir)).toEqual([r[0]!.filename]);
    expect(() => createWarcWriter(writerOpts(dir, { template: "{prefix}-{serial}-{port}" }))).toThrow(expect.objectContaining({ code: "ERR_CONFIG" }));
    expect(() => createWarcWriter(writerOpts(dir, { template: "{prefix}-{timestamp17}" }))).toThrow(/serial/);
  });

  it("never overwrites: an existing NAME or NAME.open bumps the serial", async () => {
    const dir = await tempDir();
    await writeFile(join(dir, NAME0), "precious");
    await writeFile(join(dir, "lathe-20261203104507123-00001-crawl7.example.org.warc.gz.open"), "also precious");
    const w = createWarcWriter(writerOpts(dir));
    const r = await w.write(captureGroup("https://example.com/a", Buffer.from("a")));
    await w.close();
    expect(r[0]!.filename).toBe("lathe-20261203104507123-00002-crawl7.example.org.warc.gz");
    expect(await readFile(join(dir, NAME0), "utf8")).toBe("precious");
    expect(await readFile(join(dir, "lathe-20261203104507123-00001-crawl7.example.org.warc.gz.open"), "utf8")).toBe("also precious");
    await verifyFile(join(dir, r[0]!.filename), r);
  });

  it("writes the 'sl' field in every member, warcinfo included", async () => {
    const dir = await tempDir();
    const w = createWarcWriter(writerOpts(dir, { skipLength: true }));
    const r = [...(await w.write(captureGroup("https://example.com/a", noise(20_000)))), ...(await w.write(captureGroup("https://example.com/b", Buffer.from("b"))))];
    await w.close();
    const buf = await readFile(join(dir, NAME0));
    const members: Array<[number, number]> = [[0, r[0]!.offset], ...r.map((x): [number, number] => [x.offset, x.length])];
    for (const [o, l] of members) {
      expect(buf.subarray(o, o + 4).toString("hex")).toBe("1f8b0804");
      expect(buf.subarray(o + 10, o + 16).toString("hex")).toBe("0c00736c0800");
      expect(buf.readUInt32LE(o + 16)).toBe(l);
      expect(buf.readUInt32LE(o + 20)).toBe(gunzipSync(buf.subarray(o, o + l)).length);
    }
    await verifyFile(join(dir, NAME0), r);
  });

  it("gzip: false writes a .warc: records back to back, lengths without the CRLF CRLF", async () => {
    const dir = await tempDir();
    const w = createWarcWriter(writerOpts(dir, { gzip: false }));
    const r = [...(await w.write(captureGroup("https://example.com/a", noise(10_000)))), ...(await w.write(captureGroup("https://example.com/b", Buffer.from("b"))))];
    await w.close();
    const name = NAME0.replace(/\.gz$/, "");
    expect(await listDir(dir)).toEqual([name]);
    const buf = await readFile(join(dir, name));
    for (const x of r) expect(buf.subarray(x.offset + x.length, x.offset + x.length + 4).toString()).toBe("\r\n\r\n");
    expect(r.at(-1)!.offset + r.at(-1)!.length + 4).toBe(buf.length);
    await verifyFile(join(dir, name), r, false);
  });

  it("WARC/1.0: version lines and seconds-only warcinfo date", async () => {
    const dir = await tempDir();
    const w = createWarcWriter(writerOpts(dir, { version: "1.0" }));
    const r = await w.write(captureGroup("https://example.com/a", Buffer.from("a")));
    await w.close();
    const recs = await verifyFile(join(dir, NAME0), r);
    expect(recs.map((x) => x.version)).toEqual(["WARC/1.0", "WARC/1.0", "WARC/1.0"]);
    expect(get(recs[0]!, "WARC-Date")).toBe("2026-12-03T10:45:07Z");
    expect(recs[0]!.block.toString()).toContain("format: WARC File Format 1.0\r\n");
  });

  it("keeps call order and contiguity under concurrent writes, with strict durability", async () => {
    const dir = await tempDir();
    const w = createWarcWriter(writerOpts(dir, { durability: "strict", maxFileBytes: 40_000, encodeConcurrency: 3 }));
    const results = await Promise.all(Array.from({ length: 20 }, (_, i) => w.write(captureGroup(`https://example.com/${i}`, noise(1000 + i * 400, i + 7)))));
    await w.close();
    // call order = file order: serials and offsets never go backwards
    const flat = results.flat();
    for (let i = 1; i < flat.length; i++) {
      const [p, c] = [flat[i - 1]!, flat[i]!];
      expect(c.filename > p.filename || (c.filename === p.filename && c.offset === p.offset + p.length)).toBe(true);
    }
    for (const [f, recs] of byFile(flat)) await verifyFile(join(dir, f), recs);
    expect((await listDir(dir)).length).toBeGreaterThan(1);
  });

  it("setWarcinfo closes the file; the next file carries the new metadata", async () => {
    const dir = await tempDir();
    const w = createWarcWriter(writerOpts(dir));
    const a = await w.write(captureGroup("https://example.com/a", Buffer.from("a")));
    await w.setWarcinfo({ ...writerOpts(dir).warcinfo, description: "Second crawl", extra: { "x-k": "v" } });
    const b = await w.write(captureGroup("https://example.com/b", Buffer.from("b")));
    await w.close();
    expect(a[0]!.filename).not.toBe(b[0]!.filename);
    const [info] = await verifyFile(join(dir, b[0]!.filename), b);
    expect(info!.block.toString()).toContain("description: Second crawl\r\n");
    expect(info!.block.toString().endsWith("x-k: v\r\n")).toBe(true);
  });

  it("refuses a group holding a warcinfo record without failing the writer", async () => {
    const dir = await tempDir();
    const w = createWarcWriter(writerOpts(dir));
    const bad = { ...makeDraft("resource", "urn:x", [Buffer.from("x")]), type: "warcinfo" as const };
    await expect(w.write([bad])).rejects.toMatchObject({ code: "ERR_INTERNAL" });
    expect(w.state().failed).toBeNull();
    await w.close();
  });

  it("inflated members hold exactly the serialized record (plain and gzip agree)", async () => {
    const [d1, d2] = [await tempDir(), await tempDir()];
    const group = () => captureGroup("https://example.com/same", Buffer.from("same body"));
    const g = createWarcWriter(writerOpts(d1));
    const p = createWarcWriter(writerOpts(d2, { gzip: false }));
    const grp = group();
    const rg = await g.write(grp);
    const rp = await p.write(grp);
    await g.close();
    await p.close();
    const gz = await readFile(join(d1, NAME0));
    const plain = await readFile(join(d2, NAME0.replace(/\.gz$/, "")));
    for (let i = 0; i < rg.length; i++) {
      const inflated = gunzipSync(gz.subarray(rg[i]!.offset, rg[i]!.offset + rg[i]!.length));
      expect(inflated.equals(plain.subarray(rp[i]!.offset, rp[i]!.offset + rp[i]!.length + 4))).toBe(true);
      parseRecord(inflated);
    }
    expect(splitPlain(plain).length).toBe(3);
  });
});
