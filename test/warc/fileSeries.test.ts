/**
 * The files of a series on their own: the rollover decision, a file's life from `.open` to its
 * final name as the index hears of it, closing when full, and what a failed group leaves.
 */
import { stat } from "node:fs/promises";
import { join } from "node:path";
import { Readable } from "node:stream";
import { afterAll, describe, expect, it } from "vitest";
import { fixedClock } from "../../src/core/clock.js";
import { sequentialIds } from "../../src/core/ids.js";
import { silentLogger } from "../../src/core/log.js";
import { Durability } from "../../src/warc/durability.js";
import { WarcFileSeries, needsNewFile, type FileSeriesOptions } from "../../src/warc/fileSeries.js";
import { GroupEncoder } from "../../src/warc/groupEncoder.js";
import { DEFAULT_TEMPLATE } from "../../src/warc/naming.js";
import type { RecordDraft } from "../../src/warc/types.js";
import { fileNamer } from "../../src/warc/warcFile.js";
import { buildWarcinfo } from "../../src/warc/warcinfo.js";
import { WriterFailure } from "../../src/warc/writerFailure.js";
import { nodeWriterFs } from "../../src/warc/writerFs.js";
import { GuardedIndexHook, type WriterIndexHook } from "../../src/warc/writerIndexHook.js";
import { INFO, START, captureGroup, listDir, noise, removeTempDirs, tempDir, verifyFile } from "./helpers.js";

afterAll(removeTempDirs);

const NAME0 = "lathe-20261203104507123-00000-crawl7.example.org.warc";
const NAME1 = "lathe-20261203104507124-00001-crawl7.example.org.warc";
const enc = { gzip: false, level: 6, skipLength: false };
const encoder = new GroupEncoder("1.1", enc);

/** A series of plain `.warc` files in `dir`, with an index hook that notes what it hears. */
function series(dir: string, over: Partial<FileSeriesOptions> = {}) {
  const heard: string[] = [];
  const index: WriterIndexHook = {
    opened: async (f) => void heard.push(`opened ${f.name}`),
    written: async (name, records) => void heard.push(`written ${name} ${records.length}`),
    closing: async (name) => void heard.push(`closing ${name}`),
    closed: (name) => void heard.push(`closed ${name}`),
    abandoned: (name, removed) => void heard.push(`abandoned ${name} removed=${removed}`),
  };
  const failure = new WriterFailure(nodeWriterFs, dir, silentLogger);
  const s = new WarcFileSeries({
    dir,
    gzip: false,
    version: "1.1",
    enc,
    maxFileBytes: 1e9,
    idleRolloverMs: 0,
    clock: fixedClock(START, 1000n),
    ids: sequentialIds(),
    log: silentLogger,
    fs: nodeWriterFs,
    nextName: fileNamer({ template: DEFAULT_TEMPLATE, prefix: "lathe", hostname: "crawl7.example.org", token: "abcdefgh", gzip: false }),
    warcinfo: (id, micros, filename) =>
      buildWarcinfo({ id, dateMicros: micros, filename, version: "1.1", digest: "sha1", software: "lathe/test", hostname: "crawl7.example.org", info: INFO }),
    durability: new Durability("rollover", nodeWriterFs, dir),
    failure,
    index: new GuardedIndexHook(index, silentLogger),
    schedule: (task) => task(),
    ...over,
  });
  return { s, heard, failure };
}

/** A capture whose response body source delivers fewer bytes than it says: its write fails. */
function shortCapture(uri: string): RecordDraft[] {
  const g = captureGroup(uri, noise(5000, 2));
  g[0]!.block[1] = { size: 6000, createReadStream: () => Readable.from([noise(5000, 2)]) };
  return g;
}

describe("needsNewFile", () => {
  it.each([
    ["no file yet", null, 500, false],
    ["room left", { size: 400, records: 1 }, 600, false],
    ["exactly full after it", { size: 400, records: 1 }, 600, false],
    ["would overflow", { size: 400, records: 1 }, 601, true],
    ["would overflow a file holding only its warcinfo: the group goes in alone", { size: 400, records: 0 }, 5000, false],
  ])("%s", (_, current, groupSize, expected) => {
    expect(needsNewFile(current, groupSize as number, 1000)).toBe(expected);
  });
});

describe("file series", () => {
  it("a file lives as NAME.open from its warcinfo to its close, then as NAME; the index hears each step", async () => {
    const dir = await tempDir();
    const { s, heard } = series(dir);
    const id = s.warcinfoId; // drawn before the file exists, so a group can be compressed for it
    const g = await encoder.encode(captureGroup("https://example.com/a", Buffer.from("a")), id);
    const f = await s.open();
    expect(f).toMatchObject({ name: NAME0, warcinfoId: id, records: 0 });
    expect(await listDir(dir)).toEqual([`${NAME0}.open`]);
    const [out] = await s.append(f, [g], true);
    expect(out![0]!.offset).toBe((await stat(join(dir, `${NAME0}.open`))).size - g.size);
    await s.close();
    expect(await listDir(dir)).toEqual([NAME0]);
    expect(s.current).toBeNull();
    expect(s.warcinfoId).not.toBe(id); // the next file gets the next warcinfo
    expect(s.counts()).toEqual({ filesWritten: [NAME0], recordsWritten: 2, bytesWritten: (await stat(join(dir, NAME0))).size });
    expect(heard).toEqual([`opened ${NAME0}`, `written ${NAME0} 2`, `closing ${NAME0}`, `closed ${NAME0}`]);
    await verifyFile(join(dir, NAME0), out!, false);
  });

  it("a group that fills the file closes it at once", async () => {
    const dir = await tempDir();
    const closed: string[] = [];
    const { s } = series(dir, { maxFileBytes: 2000, onFileClosed: (p) => closed.push(p) });
    const g = await encoder.encode(captureGroup("https://example.com/a", noise(2000)), s.warcinfoId);
    await s.append(await s.open(), [g], true);
    expect(s.current).toBeNull();
    expect(closed).toEqual([join(dir, NAME0)]);
    expect(s.needsNewFile(1e9)).toBe(false); // no current file to roll over
  });

  it("a failed group in a fresh file removes the file; in a used one it is cut back to where it was", async () => {
    const dir = await tempDir();
    const { s, heard, failure } = series(dir);
    const bad = await encoder.encode(shortCapture("https://example.com/bad"), s.warcinfoId);
    await expect(s.append(await s.open(), [bad], true)).rejects.toMatchObject({ code: "ERR_SPOOL" });
    expect(await listDir(dir)).toEqual([]);
    expect(s.current).toBeNull();
    expect(heard.at(-1)).toBe(`abandoned ${NAME0} removed=true`);

    const good = await encoder.encode(captureGroup("https://example.com/a", Buffer.from("a")), s.warcinfoId);
    const f = await s.open();
    const [a] = await s.append(f, [good], true);
    const size = f.size;
    const bad2 = await encoder.encode(shortCapture("https://example.com/bad2"), s.warcinfoId);
    await expect(s.append(f, [bad2], false)).rejects.toMatchObject({ code: "ERR_SPOOL" });
    expect((await stat(join(dir, `${NAME1}.open`))).size).toBe(size);
    expect(s.current).toBe(f); // still the file to write to
    expect(failure.current).toBeNull(); // a broken source is not a broken disk
    await s.close();
    await verifyFile(join(dir, NAME1), a!, false);
  });
});
