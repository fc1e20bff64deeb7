/**
 * The golden example written through the writer: same records, same warcinfo inputs (clock,
 * ids, host, metadata) → the same file. `.warc` byte for byte; `.warc.gz` compared inflated,
 * member by member, since deflate bytes depend on the zlib build (warc-files.md §3).
 */
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { Readable } from "node:stream";
import { gunzipSync } from "node:zlib";
import { WARCParser } from "warcio";
import { afterAll, expect, it } from "vitest";
import { fixedClock } from "../../src/core/clock.js";
import type { IdSource } from "../../src/core/ids.js";
import type { RecordDraft, WrittenRecord } from "../../src/warc/types.js";
import { createWarcWriter } from "../../src/warc/writer.js";
import { describeUsing } from "../helpers/shared.js";
import { GOLDEN, GOLDEN_WARCINFO_UUID, goldenBytes, goldenDrafts, goldenInfo, goldenRecords } from "./golden.js";
import { START, get, removeTempDirs, tempDir, verifyFile, writerOpts } from "./helpers.js";

afterAll(removeTempDirs);

/** Golden ids first, then fresh ones (the writer pre-draws the next file's warcinfo id). */
const goldenIds = (): IdSource => {
  let n = 0;
  return { uuid: () => (n++ === 0 ? GOLDEN_WARCINFO_UUID : `00000000-0000-4000-8000-${String(n).padStart(12, "0")}`) };
};

/** The captures of the example as the pipeline would hand them over (records.txt numbering). */
function groups(): RecordDraft[][] {
  const d = goldenDrafts().map((x, i) =>
    i % 2 === 0 ? x : { ...x, block: [{ size: (x.block[0] as Buffer).length, createReadStream: () => Readable.from([(x.block[0] as Buffer)]) }] },
  );
  return [d.slice(0, 3), d.slice(3, 5), d.slice(5, 7), d.slice(7, 9), d.slice(9, 10), d.slice(10, 11)];
}

async function writeGolden(over: Parameters<typeof writerOpts>[1]) {
  const dir = await tempDir();
  const w = createWarcWriter(writerOpts(dir, { hostname: "example-host", ip: "192.0.2.17", warcinfo: goldenInfo().info, clock: fixedClock(START, 0n), ids: goldenIds(), ...over }));
  const written: WrittenRecord[] = [];
  for (const g of groups()) written.push(...(await w.write(g)));
  await w.close();
  return { dir, written, path: join(dir, written[0]!.filename) };
}

describeUsing(GOLDEN, "golden example", () => {
  it(".warc: byte-identical to the example", async () => {
    const { path, written } = await writeGolden({ gzip: false });
    expect(path.endsWith("lathe-20261203104507123-00000-example-host.warc")).toBe(true);
    expect((await readFile(path)).equals(goldenBytes(".warc"))).toBe(true);
    await verifyFile(path, written, false);
  });

  for (const [suffix, over] of [
    [".warc.gz", {}],
    ["-sl.warc.gz", { skipLength: true, template: "{prefix}-{timestamp17}-{serial}-{hostname}-sl" }],
  ] as const) {
    it(`${suffix}: same name, same inflated members, same member count`, async () => {
      const { path, written } = await writeGolden(over);
      expect(path.endsWith(`lathe-20261203104507123-00000-example-host${suffix}`)).toBe(true);
      const mine = await readFile(path);
      const golden = goldenBytes(suffix);
      const records = await verifyFile(path, written);
      expect(records.length).toBe(goldenRecords().length);
      const gold = await goldenMembers(suffix);
      const ours = [0, ...written.map((w) => w.offset), mine.length];
      expect(gold.length).toBe(ours.length - 1);
      for (let i = 0; i < gold.length; i++) {
        const g = gunzipSync(golden.subarray(gold[i]![0], gold[i]![1]));
        const m = gunzipSync(mine.subarray(ours[i]!, ours[i + 1]!));
        expect(m.equals(g)).toBe(true);
        expect(mine.subarray(ours[i]!, ours[i]! + (suffix.includes("sl") ? 16 : 10)).equals(golden.subarray(gold[i]![0], gold[i]![0] + (suffix.includes("sl") ? 16 : 10)))).toBe(true);
      }
      expect(get(records[0]!, "WARC-Filename")).toBe(path.split("/").pop());
      // Not asserted (zlib-build dependent): with Node 20's bundled zlib even the deflate bytes
      // match the golden file, streaming or not.
    });
  }
});

/** Member boundaries of a golden .warc.gz as npm warcio reports them (an independent reader). */
async function goldenMembers(suffix: string): Promise<Array<[number, number]>> {
  const parser = new WARCParser(Readable.from([goldenBytes(suffix)]));
  const out: Array<[number, number]> = [];
  for await (const rec of parser) {
    await rec.skipFully();
    out.push([parser.offset, parser.offset + parser.recordLength]);
  }
  return out;
}
