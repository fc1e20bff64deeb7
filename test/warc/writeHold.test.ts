/**
 * A writer that holds failed writes (issue #26, rollover durability): a write that fails waits
 * and is tried again, every later one behind it, until space comes back; then they land in call
 * order with the records as drafted. A closing writer tries once more, then gives each waiting
 * capture a WARC file of its own in lost/.
 */
import { readdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { Readable } from "node:stream";
import { afterAll, describe, expect, it } from "vitest";
import { LostCapture } from "../../src/warc/lostFile.js";
import type { WrittenRecord } from "../../src/warc/types.js";
import { createWarcWriter, nodeWriterFs } from "../../src/warc/writer.js";
import { checkDigests, readWarc } from "../helpers/warcs.js";
import { captureGroup, limitedFs, listDir, noise, removeTempDirs, tempDir, verifyFile, writerOpts } from "./helpers.js";

afterAll(removeTempDirs);

const settled = <T>(p: Promise<T>) => {
  const s: { done: boolean; value?: T; error?: unknown } = { done: false };
  p.then(
    (v) => Object.assign(s, { done: true, value: v }),
    (e: unknown) => Object.assign(s, { done: true, error: e }),
  );
  return s;
};
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe("a writer that holds failed writes", () => {
  it("disk full: the writes wait (none rejects), then land in call order with their drafted ids once space is back", async () => {
    const dir = await tempDir();
    const { ctl, fs } = limitedFs();
    const w = createWarcWriter(writerOpts(dir, { fs, holdFailedWrites: true }));
    const a = await w.write(captureGroup("https://example.com/a", noise(4000, 1)));
    ctl.budget = 1500;
    const held: string[] = [];
    const groups = ["b", "c", "d", "e"].map((n, i) => captureGroup(`https://example.com/${n}`, noise(3000 + i * 500, 10 + i)));
    const writes = groups.map((g, i) => settled(w.write(g, { onHeld: () => held.push(String(i)) })));
    await sleep(600);
    expect(writes.map((s) => s.done)).toEqual([false, false, false, false]);
    expect(held.sort()).toEqual(["0", "1", "2", "3"]);
    const st = w.state();
    expect(st.failed).toMatchObject({ code: "ERR_WARC_WRITE", message: expect.stringMatching(/disk full/) });
    expect(st.waiting.captures).toBe(4);
    expect(st.waiting.bytes).toBeGreaterThan(3000 * 4);
    expect(st.waiting.since).not.toBeNull();
    // A write called while the writer cannot write is held at once and waits behind the others.
    let lateHeld = false;
    const late = settled(w.write(captureGroup("https://example.com/f", noise(100, 20)), { onHeld: () => (lateHeld = true) }));
    expect(lateHeld).toBe(true);

    ctl.budget = null;
    for (let i = 0; i < 100 && !late.done; i++) await sleep(50);
    const all = [...writes, late];
    for (const s of all) expect(s.error).toBeUndefined();
    const landed = all.map((s) => s.value as WrittenRecord[]);
    // Call order: each group right after the one before, in the same file as the first.
    for (let i = 1; i < landed.length; i++) expect(landed[i]![0]!.offset).toBe(landed[i - 1]![1]!.offset + landed[i - 1]![1]!.length);
    expect(landed[0]![0]!.offset).toBe(a[1]!.offset + a[1]!.length);
    landed.slice(0, 4).forEach((l, i) => expect(l.map((r) => r.id)).toEqual(groups[i]!.map((d) => d.id)));
    expect(w.state().failed).toBeNull();
    expect(w.state().waiting).toEqual({ captures: 0, bytes: 0, since: null });
    await w.close();
    await verifyFile(join(dir, a[0]!.filename), [...a, ...landed.flat()]);
  });

  it("closing while writes wait: one more try, then each waiting capture is a complete WARC of its own in lost/", async () => {
    const groups = ["b", "c", "d"].map((n, i) => captureGroup(`https://example.com/${n}`, noise(2000, 5 + i)));
    /** A writer whose disk is full once it wrote one capture; `lostFits`: lost/ is elsewhere, with room. */
    const closeFull = async (lostFits: boolean) => {
      const dir = await tempDir();
      const { ctl, fs } = limitedFs();
      const open: typeof fs.open = (p, f, m) => (lostFits && p.includes("/lost/") ? nodeWriterFs.open(p, f, m) : fs.open(p, f, m));
      const w = createWarcWriter(writerOpts(dir, { fs: { ...fs, open }, holdFailedWrites: true }));
      await w.write(captureGroup("https://example.com/a", noise(2000, 1)));
      ctl.budget = 0;
      const writes = groups.map((g) => w.write(g).then(() => null, (e: unknown) => e as LostCapture));
      await sleep(300);
      await w.close().catch(() => undefined);
      return { dir, errors: await Promise.all(writes) };
    };

    const full = await closeFull(false);
    for (const e of full.errors) expect(e).toBeInstanceOf(LostCapture);
    expect(full.errors.map((e) => e!.file)).toEqual([null, null, null]);
    expect(full.errors[0]!.message).toMatch(/could not be written to lost\/ either/);

    const { dir, errors } = await closeFull(true);
    const files = errors.map((e) => e!.file);
    for (const f of files) expect(f).toMatch(/\/lost\/lathe-\d{17}-lost-.*\.warc\.gz$/);
    expect((await readdir(join(dir, "lost"))).sort()).toEqual(files.map((f) => f!.split("/").pop()).sort());
    for (let i = 0; i < groups.length; i++) {
      const recs = await readWarc(files[i]!);
      expect(recs.map((r) => r.type)).toEqual(["warcinfo", "response", "request"]);
      expect(recs.slice(1).map((r) => r.get("WARC-Record-ID"))).toEqual(groups[i]!.map((d) => d.id));
      expect(recs[1]!.get("WARC-Warcinfo-ID")).toBe(recs[0]!.get("WARC-Record-ID"));
      expect(recs[1]!.get("WARC-Date")).toBe(groups[i]![0]!.fields.find(([k]) => k === "WARC-Date")![1]);
      for (const r of recs) expect(checkDigests(r)).toEqual([]);
    }
  });

  it("closing while writes wait, and space is back: the one more try writes them", async () => {
    const dir = await tempDir();
    const { ctl, fs } = limitedFs();
    const w = createWarcWriter(writerOpts(dir, { fs, holdFailedWrites: true }));
    ctl.budget = 0;
    const writes = ["b", "c"].map((n) => w.write(captureGroup(`https://example.com/${n}`, noise(1000))));
    await sleep(300);
    ctl.budget = null;
    await w.close();
    const landed = await Promise.all(writes);
    expect(await listDir(dir)).toEqual([landed[0]![0]!.filename]);
    await verifyFile(join(dir, landed[0]![0]!.filename), landed.flat());
  });

  it("a source that cannot be read is not retried: it rejects ERR_SPOOL at once and the writes behind it land", async () => {
    const dir = await tempDir();
    const w = createWarcWriter(writerOpts(dir, { holdFailedWrites: true, spoolMemoryBytes: 1024 }));
    const bad = captureGroup("https://example.com/bad", noise(5000, 2));
    bad[0]!.block[1] = { size: 6000, createReadStream: () => Readable.from([noise(5000, 2)]) };
    const badWrite = w.write(bad);
    const good = w.write(captureGroup("https://example.com/good", noise(5000, 3)));
    await expect(badWrite).rejects.toMatchObject({ code: "ERR_SPOOL" });
    const g = await good;
    await w.close();
    await verifyFile(join(dir, g[0]!.filename), g);
  });

  it("a spool directory that cannot be written: large members are spooled in the WARC directory instead (and never show there)", async () => {
    const dir = await tempDir();
    const notADir = join(await tempDir(), "file");
    await writeFile(notADir, "x");
    const w = createWarcWriter(writerOpts(dir, { holdFailedWrites: true, spoolDir: notADir, spoolMemoryBytes: 1024 }));
    const r = await w.write(captureGroup("https://example.com/big", noise(300_000, 4)));
    expect(w.state().failed).toBeNull();
    await w.close();
    expect(await listDir(dir)).toEqual([r[0]!.filename]);
    await verifyFile(join(dir, r[0]!.filename), r);
  });
});
