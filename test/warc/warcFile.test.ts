/** One file of a series on its own: its names, its exclusive creation, groups written at its end. */
import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { silentLogger } from "../../src/core/log.js";
import { GroupEncoder } from "../../src/warc/groupEncoder.js";
import { DEFAULT_TEMPLATE } from "../../src/warc/naming.js";
import { createExclusive, fileNamer, writeGroups } from "../../src/warc/warcFile.js";
import { WriterFailure } from "../../src/warc/writerFailure.js";
import { nodeWriterFs } from "../../src/warc/writerFs.js";
import { START, captureGroup, listDir, removeTempDirs, splitPlain, tempDir } from "./helpers.js";

afterAll(removeTempDirs);

const names = () => fileNamer({ template: DEFAULT_TEMPLATE, prefix: "lathe", hostname: "crawl7.example.org", token: "abcdefgh", gzip: true });

describe("warc file", () => {
  it("each name drawn takes the next serial; {port} comes from the options", () => {
    const next = names();
    expect([next(START), next(START)]).toEqual([
      "lathe-20261203104507123-00000-crawl7.example.org.warc.gz",
      "lathe-20261203104507123-00001-crawl7.example.org.warc.gz",
    ]);
    const withPort = fileNamer({ template: "{prefix}-{serial}-{port}", prefix: "p", port: 8000, hostname: "h", token: "t", gzip: false });
    expect(withPort(START)).toBe("p-00000-8000.warc");
  });

  it("creates NAME.open under the first name free as NAME and as NAME.open", async () => {
    const dir = await tempDir();
    const next = names();
    await writeFile(join(dir, next(START)), "precious");
    await writeFile(join(dir, `${next(START)}.open`), "also precious");
    const retry = names();
    const f = await createExclusive(nodeWriterFs, dir, () => retry(START), new WriterFailure(nodeWriterFs, dir, silentLogger));
    await f.fh.close();
    expect(f.name).toBe("lathe-20261203104507123-00002-crawl7.example.org.warc.gz");
    expect(f.openPath).toBe(join(dir, `${f.name}.open`));
    expect(await readFile(join(dir, "lathe-20261203104507123-00000-crawl7.example.org.warc.gz"), "utf8")).toBe("precious");
    expect(await listDir(dir)).toHaveLength(3);
  });

  it("a directory it cannot create in fails the writer with ERR_WARC_WRITE", async () => {
    const dir = join(await tempDir(), "warcs");
    await writeFile(dir, "not a directory");
    const failure = new WriterFailure(nodeWriterFs, dir, silentLogger);
    await expect(createExclusive(nodeWriterFs, dir, () => "x.warc", failure)).rejects.toMatchObject({ code: "ERR_WARC_WRITE", message: expect.stringMatching(/^cannot create WARC file/) });
    expect(failure.current).not.toBeNull();
  });

  it("writes groups back to back from the file's end and reports where each record landed", async () => {
    const dir = await tempDir();
    const created = await createExclusive(nodeWriterFs, dir, () => "x.warc", new WriterFailure(nodeWriterFs, dir, silentLogger));
    await created.fh.write(Buffer.from("head"), 0, 4, 0);
    const f = { ...created, warcinfoId: "<urn:uuid:info>", size: 4, records: 0 };
    const encoder = new GroupEncoder("1.1", { gzip: false, level: 6, skipLength: false });
    const groups = [
      await encoder.encode(captureGroup("https://example.com/a", Buffer.from("a")), f.warcinfoId),
      await encoder.encode(captureGroup("https://example.com/b", Buffer.from("bb")), f.warcinfoId),
    ];
    const { outs, end } = await writeGroups(f, groups, false);
    await f.fh.close();
    expect(f.size).toBe(4); // left to the caller
    expect(end).toBe(4 + groups[0]!.size + groups[1]!.size);
    const bytes = await readFile(f.openPath);
    expect(bytes.length).toBe(end);
    const records = splitPlain(bytes.subarray(4));
    expect(outs.flat().map((w) => [w.offset, w.length, w.targetUri])).toEqual(records.map((r, i) => [r.offset + 4, r.length, `https://example.com/${i < 2 ? "a" : "b"}`]));
  });
});
