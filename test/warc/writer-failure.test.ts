import { mkdir, rename, rm, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { Readable } from "node:stream";
import { afterAll, describe, expect, it } from "vitest";
import { scanCompleteRecords } from "../../src/warc/recovery.js";
import { createWarcWriter } from "../../src/warc/writer.js";
import { captureGroup, limitedFs, listDir, noise, removeTempDirs, tempDir, verifyFile, writerOpts } from "./helpers.js";

afterAll(removeTempDirs);

const NAME0 = "lathe-20261203104507123-00000-crawl7.example.org.warc.gz";

describe("WARC writer failures", () => {
  it("disk full mid-record: rejects ERR_WARC_WRITE, truncates the group away, heals on the next write", async () => {
    const dir = await tempDir();
    const { ctl, fs } = limitedFs();
    const w = createWarcWriter(writerOpts(dir, { fs }));
    const a = await w.write(captureGroup("https://example.com/a", noise(4000, 1)));
    const sizeA = (await stat(join(dir, `${NAME0}.open`))).size;

    ctl.budget = 1500; // part of the next response fits, then the disk is full
    const err = await w.write(captureGroup("https://example.com/b", noise(8000, 2))).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: "ERR_WARC_WRITE" });
    expect((err as Error).message).toMatch(new RegExp(`${NAME0}\\.open.*disk full.*ENOSPC`));
    expect(w.state().failed).toMatchObject({ code: "ERR_WARC_WRITE" });
    expect((await stat(join(dir, `${NAME0}.open`))).size).toBe(sizeA); // no half record left
    // still failing while the disk is full
    await expect(w.write(captureGroup("https://example.com/b2", noise(100, 3)))).rejects.toMatchObject({ code: "ERR_WARC_WRITE" });

    ctl.budget = null; // space is back
    const c = await w.write(captureGroup("https://example.com/c", noise(3000, 4)));
    expect(w.state().failed).toBeNull();
    expect(c[0]!.offset).toBe(a[1]!.offset + a[1]!.length);
    await w.close();
    await verifyFile(join(dir, NAME0), [...a, ...c]);
  });

  it("failure in a fresh file removes it; the next file opens cleanly", async () => {
    const dir = await tempDir();
    const { ctl, fs } = limitedFs();
    const w = createWarcWriter(writerOpts(dir, { fs }));
    ctl.budget = 200; // not even the warcinfo fits
    await expect(w.write(captureGroup("https://example.com/a", noise(1000)))).rejects.toMatchObject({ code: "ERR_WARC_WRITE" });
    expect(await listDir(dir)).toEqual([]);
    ctl.budget = 900; // warcinfo fits, the group does not
    await expect(w.write(captureGroup("https://example.com/a", noise(1000)))).rejects.toMatchObject({ code: "ERR_WARC_WRITE" });
    expect(await listDir(dir)).toEqual([]);
    ctl.budget = null;
    const r = await w.write(captureGroup("https://example.com/a", noise(1000)));
    await w.close();
    expect(await listDir(dir)).toEqual([r[0]!.filename]);
    await verifyFile(join(dir, r[0]!.filename), r);
  });

  it("strict durability: an fsync failure rejects, abandons the file to start-up recovery, and the writer moves on", async () => {
    const dir = await tempDir();
    const { ctl, fs } = limitedFs();
    const w = createWarcWriter(writerOpts(dir, { fs, durability: "strict" }));
    const a = await w.write(captureGroup("https://example.com/a", noise(500)));
    ctl.failSync = true;
    await expect(w.write(captureGroup("https://example.com/b", noise(500)))).rejects.toMatchObject({ code: "ERR_WARC_WRITE", message: expect.stringMatching(/fsync.*I\/O error/) });
    expect(w.state().currentFile).toBeNull();
    ctl.failSync = false;
    const c = await w.write(captureGroup("https://example.com/c", noise(500)));
    await w.close();
    expect(c[0]!.filename).not.toBe(a[0]!.filename);
    // the abandoned file stays .open, its complete records intact for recovery
    expect(await listDir(dir)).toEqual([`${NAME0}.open`, c[0]!.filename]);
    expect((await scanCompleteRecords(join(dir, `${NAME0}.open`))).records).toBeGreaterThanOrEqual(3);
  });

  it("real condition: the WARC directory replaced by a file fails the open, and writing resumes when it is back", async () => {
    const root = await tempDir();
    const dir = join(root, "warcs");
    await mkdir(dir);
    const w = createWarcWriter(writerOpts(dir));
    const a = await w.write(captureGroup("https://example.com/a", Buffer.from("a")));
    await w.rollover();
    await rename(dir, `${dir}.away`);
    await writeFile(dir, "not a directory");
    const err = await w.write(captureGroup("https://example.com/b", Buffer.from("b"))).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: "ERR_WARC_WRITE" });
    expect((err as Error).message).toContain(dir);
    expect(w.state().failed).not.toBeNull();
    await rm(dir);
    await rename(`${dir}.away`, dir);
    const c = await w.write(captureGroup("https://example.com/c", Buffer.from("c")));
    expect(w.state().failed).toBeNull();
    await w.close();
    await verifyFile(join(dir, a[0]!.filename), a);
    await verifyFile(join(dir, c[0]!.filename), c);
  });

  it("real condition: a rename failure at close rejects ERR_WARC_WRITE and leaves the .open file", async () => {
    const root = await tempDir();
    const dir = join(root, "warcs");
    await mkdir(dir);
    const w = createWarcWriter(writerOpts(dir));
    await w.write(captureGroup("https://example.com/a", Buffer.from("a")));
    await rename(dir, `${dir}.away`); // the open fd keeps working, the rename cannot
    await expect(w.close()).rejects.toMatchObject({ code: "ERR_WARC_WRITE", message: expect.stringMatching(/cannot rename/) });
    expect(await listDir(`${dir}.away`)).toEqual([`${NAME0}.open`]);
  });
});

describe("WARC writer and broken sources", () => {
  for (const gzip of [true, false]) {
    it(`a source shorter than its size rejects ERR_SPOOL, leaves nothing, and does not fail the writer (gzip ${gzip})`, async () => {
      const dir = await tempDir();
      const spoolDir = await tempDir();
      const w = createWarcWriter(writerOpts(dir, { gzip, spoolDir, spoolMemoryBytes: 1024 }));
      const a = await w.write(captureGroup("https://example.com/a", noise(5000, 1)));
      const bad = captureGroup("https://example.com/b", noise(5000, 2));
      bad[0]!.block[1] = { size: 6000, createReadStream: () => Readable.from([noise(5000, 2)]) };
      await expect(w.write(bad)).rejects.toMatchObject({ code: "ERR_SPOOL" });
      expect(w.state().failed).toBeNull();
      const c = await w.write(captureGroup("https://example.com/c", noise(5000, 3)));
      await w.close();
      expect(await listDir(spoolDir)).toEqual([]);
      await verifyFile(join(dir, a[0]!.filename), [...a, ...c], gzip);
    });
  }
});
