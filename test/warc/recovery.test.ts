import { copyFile, readFile, stat, truncate, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { createLogger } from "../../src/core/log.js";
import { recoverOpenFiles, scanCompleteRecords } from "../../src/warc/recovery.js";
import type { WrittenRecord } from "../../src/warc/types.js";
import { createWarcWriter, type WarcWriterOptions } from "../../src/warc/writer.js";
import { captureGroup, checkWithWarcio, listDir, makeDraft, noise, parseRecord, removeTempDirs, splitPlain, tempDir, writerOpts } from "./helpers.js";
import { gunzipSync } from "node:zlib";

afterAll(removeTempDirs);

interface Source {
  path: string;
  name: string;
  /** [start, end) of every record on disk, warcinfo first (end includes a .warc's CRLF CRLF). */
  spans: Array<[number, number]>;
}

/** A `.open` file as a crash leaves it: written, never closed. */
async function openFile(over: Partial<WarcWriterOptions>, bodies: Buffer[]): Promise<Source> {
  const dir = await tempDir();
  const w = createWarcWriter(writerOpts(dir, over));
  const written: WrittenRecord[] = [];
  for (const [i, b] of bodies.entries()) written.push(...(await w.write(captureGroup(`https://example.com/${i}`, b))));
  const name = written[0]!.filename;
  const trailer = over.gzip === false ? 4 : 0;
  const spans: Array<[number, number]> = [[0, written[0]!.offset], ...written.map((r): [number, number] => [r.offset, r.offset + r.length + trailer])];
  // snapshot NAME.open as a crash would leave it, then let the writer finish normally
  const snapshot = join(await tempDir(), `${name}.open`);
  await copyFile(join(dir, `${name}.open`), snapshot);
  await w.close();
  return { path: snapshot, name, spans };
}

/** Copy the source cut at `cut` bytes into a fresh dir, recover it, check the outcome. */
async function cutAndRecover(src: Source, cut: number) {
  const dir = await tempDir();
  const p = join(dir, `${src.name}.open`);
  await copyFile(src.path, p);
  await truncate(p, cut);
  const complete = src.spans.filter(([, e]) => e <= cut);
  const kept = complete.at(-1)?.[1] ?? 0;
  const [report] = await recoverOpenFiles(dir, createLogger({ write: () => {} }));
  expect(report).toMatchObject({ file: src.name, keptBytes: kept, droppedBytes: cut - kept, recordsKept: complete.length });
  if (kept === 0) {
    expect(report!.deleted).toBe(true);
    expect(await listDir(dir)).toEqual([]);
  } else {
    expect(await listDir(dir)).toEqual([src.name]);
    expect((await stat(join(dir, src.name))).size).toBe(kept);
    const original = await readFile(src.path);
    expect((await readFile(join(dir, src.name))).equals(original.subarray(0, kept))).toBe(true);
  }
  return { dir, report: report! };
}

/** Cut points: every boundary ±1, inside each gzip / 'sl' / WARC header, mid-member, plus random. */
function cutPoints(src: Source, size: number): number[] {
  const pts = new Set<number>([0, 1, size]);
  let seed = 12345;
  const rnd = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
  for (const [s, e] of src.spans) {
    for (const d of [-1, 0, 1, 5, 10, 12, 20, 24, 40, 200]) pts.add(s + d);
    pts.add(Math.floor((s + e) / 2));
    pts.add(e - 1);
    pts.add(e - 4);
    pts.add(e - 8);
  }
  for (let i = 0; i < 20; i++) pts.add(Math.floor(rnd() * size));
  return [...pts].filter((p) => p >= 0 && p <= size).sort((a, b) => a - b);
}

describe("recovery of .open files", () => {
  for (const [label, over] of [
    ["gzip", {}],
    ["gzip with 'sl'", { skipLength: true }],
    ["plain .warc", { gzip: false }],
  ] as Array<[string, Partial<WarcWriterOptions>]>) {
    it(`${label}: keeps exactly the complete records wherever the file was cut`, async () => {
      const src = await openFile(over, [Buffer.from("<html>small</html>"), noise(9000, 3), Buffer.from("x".repeat(20000)), Buffer.alloc(0)]);
      const size = (await stat(src.path)).size;
      expect(src.spans.at(-1)![1]).toBe(size);
      for (const cut of cutPoints(src, size)) await cutAndRecover(src, cut);
      // the whole file: everything kept, and warcio reads the result
      const { dir, report } = await cutAndRecover(src, size);
      expect(report.recordsKept).toBe(9);
      const buf = await readFile(join(dir, src.name));
      const recs = over.gzip === false ? splitPlain(buf) : src.spans.map(([s, e]) => parseRecord(gunzipSync(buf.subarray(s, e))));
      await checkWithWarcio(join(dir, src.name), recs, null);
    });
  }

  it("stops at a corrupt member (CRC mismatch) and keeps what precedes it", async () => {
    const src = await openFile({}, [Buffer.from("a"), Buffer.from("b".repeat(5000))]);
    const dir = await tempDir();
    const p = join(dir, `${src.name}.open`);
    const buf = await readFile(src.path);
    const [s, e] = src.spans[3]!; // the second response
    buf[e - 6] = buf[e - 6]! ^ 0xff; // inside its CRC32
    await writeFile(p, buf);
    const [r] = await recoverOpenFiles(dir, createLogger({ write: () => {} }));
    expect(r).toMatchObject({ keptBytes: s, recordsKept: 3, droppedBytes: buf.length - s });
    // deflate data damaged instead: also refused
    const buf2 = await readFile(src.path);
    buf2[Math.floor((s + e) / 2)] ^= 0x55;
    expect((await scanCompleteRecords(await (async () => { const q = join(await tempDir(), "x.warc.gz"); await writeFile(q, buf2); return q; })())).keptBytes).toBe(s);
  });

  it("walks a multi-MB member through the bounded read window", async () => {
    const src = await openFile({}, [noise(9 * 1024 * 1024, 5), Buffer.from("after")]);
    const size = (await stat(src.path)).size;
    expect((await scanCompleteRecords(src.path)).records).toBe(5);
    await cutAndRecover(src, size - 3);
    await cutAndRecover(src, src.spans[1]![0] + 5 * 1024 * 1024);
  });

  it("refuses a member holding something other than exactly one record", async () => {
    const dir = await tempDir();
    const w = createWarcWriter(writerOpts(dir, { gzip: false }));
    const r = await w.write([makeDraft("resource", "urn:x", [Buffer.from("payload")])]);
    await w.close();
    const plain = await readFile(join(dir, r[0]!.filename));
    const { gzipSync } = await import("node:zlib");
    const two = gzipSync(plain); // warcinfo + resource in one member
    const q = join(dir, "two.warc.gz");
    await writeFile(q, two);
    expect((await scanCompleteRecords(q)).keptBytes).toBe(0);
  });

  it("logs one warc-recovered event per file, handles several files, and ignores finished ones", async () => {
    const a = await openFile({}, [Buffer.from("a")]);
    const dir = await tempDir();
    await copyFile(a.path, join(dir, `${a.name}.open`));
    await writeFile(join(dir, "empty.warc.open"), "");
    await writeFile(join(dir, "done.warc.gz"), "not touched");
    const lines: string[] = [];
    const reports = await recoverOpenFiles(dir, createLogger({ json: true, write: (l) => lines.push(l) }));
    expect(reports.map((r) => [r.file, r.deleted ?? false])).toEqual([
      ["empty.warc", true],
      [a.name, false],
    ]);
    expect(lines.map((l) => JSON.parse(l).event)).toEqual(["warc-recovered", "warc-recovered"]);
    expect(JSON.parse(lines[1]!)).toMatchObject({ file: a.name, keptBytes: a.spans.at(-1)![1], droppedBytes: 0, recordsKept: 3 });
    expect(await listDir(dir)).toEqual([a.name, "done.warc.gz"].sort());
    expect(await recoverOpenFiles(join(dir, "missing"), createLogger({ write: () => {} }))).toEqual([]);
  });

  it("stops with ERR_WARC_RECOVERY naming both files when NAME already exists", async () => {
    const a = await openFile({}, [Buffer.from("a")]);
    const dir = await tempDir();
    await copyFile(a.path, join(dir, `${a.name}.open`));
    await writeFile(join(dir, a.name), "someone else's");
    const err = await recoverOpenFiles(dir, createLogger({ write: () => {} })).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: "ERR_WARC_RECOVERY" });
    expect((err as Error).message).toContain(`${a.name}.open`);
    expect((err as Error).message).toContain(join(dir, a.name));
    expect(await readFile(join(dir, a.name), "utf8")).toBe("someone else's");
    expect((await stat(join(dir, `${a.name}.open`))).size).toBe(a.spans.at(-1)![1]);
  });
});
