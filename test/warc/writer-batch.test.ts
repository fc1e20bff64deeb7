import { stat } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { createWarcWriter } from "../../src/warc/writer.js";
import { captureGroup, interceptedFs, noise, removeTempDirs, tempDir, verifyFile, writerOpts } from "./helpers.js";

afterAll(removeTempDirs);

/** The real file system, counting writes to WARC files; write number `failAt` fails with ENOSPC. */
function countingFs() {
  const ctl = { writes: 0, failAt: 0 };
  const fs = interceptedFs({
    async write(fh, b, o, l, pos) {
      ctl.writes++;
      if (ctl.writes === ctl.failAt) {
        // half of it lands, as on a filling disk
        await fh.write(b, o, Math.floor(l / 2), pos);
        throw Object.assign(new Error("ENOSPC: simulated, write"), { code: "ENOSPC" });
      }
      return fh.write(b, o, l, pos);
    },
  });
  return { ctl, fs };
}

const NAME0 = "lathe-20261203104507123-00000-crawl7.example.org.warc.gz";

describe("WARC writer: groups queued together are appended together", () => {
  it("concurrent writes share write(2) calls, in call order, contiguous", async () => {
    const dir = await tempDir();
    const { ctl, fs } = countingFs();
    const w = createWarcWriter(writerOpts(dir, { fs }));
    const results = await Promise.all(Array.from({ length: 40 }, (_, i) => w.write(captureGroup(`https://example.com/${i}`, noise(500 + i * 10, i + 1)))));
    const flat = results.flat();
    for (let i = 1; i < flat.length; i++) expect(flat[i]!.offset).toBe(flat[i - 1]!.offset + flat[i - 1]!.length);
    results.forEach((r, i) => expect(r[1]!.targetUri).toBe(`https://example.com/${i}`));
    expect(ctl.writes).toBeLessThan(40); // the warcinfo, then batches
    await w.close();
    await verifyFile(join(dir, NAME0), flat);
  });

  it("a failed batch rejects every group in it and leaves none of them; later writes land after the last good one", async () => {
    const dir = await tempDir();
    const { ctl, fs } = countingFs();
    const w = createWarcWriter(writerOpts(dir, { fs }));
    const a = await w.write(captureGroup("https://example.com/a", noise(800, 1)));
    const sizeA = (await stat(join(dir, `${NAME0}.open`))).size;
    // The first of these writes goes alone (nothing else is compressed yet), the rest together.
    ctl.failAt = ctl.writes + 2;
    const settled = await Promise.allSettled(Array.from({ length: 10 }, (_, i) => w.write(captureGroup(`https://example.com/b${i}`, noise(700, i + 2)))));
    const rejected = settled.filter((s) => s.status === "rejected");
    expect(rejected.length).toBeGreaterThan(1);
    for (const r of rejected) expect((r as PromiseRejectedResult).reason).toMatchObject({ code: "ERR_WARC_WRITE" });
    const ok = settled.flatMap((s) => (s.status === "fulfilled" ? s.value : []));
    // the failed batch came first: whatever was written after it starts where `a` ended
    if (ok.length) expect(ok[0]!.offset).toBe(sizeA);
    const c = await w.write(captureGroup("https://example.com/c", noise(600, 20)));
    await w.close();
    const all = [...a, ...ok, ...c];
    for (let i = 1; i < all.length; i++) expect(all[i]!.offset).toBe(all[i - 1]!.offset + all[i - 1]!.length);
    await verifyFile(join(dir, NAME0), all);
  });
});
