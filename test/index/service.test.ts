/**
 * The per-collection index (decisions.md §6) without a proxy: closed files are merged in the
 * background once enough wait (or after a delay), answers stay the same through every state, and
 * a new service on the same directory picks up the merged index and the files not merged yet.
 */
import { existsSync } from "node:fs";
import { mkdtemp, readFile, readdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { silentLogger } from "../../src/core/log.js";
import { parseCdxQuery } from "../../src/index/query.js";
import { CdxService, type CdxServiceOptions } from "../../src/index/service.js";
import { formatWarcDate } from "../../src/warc/date.js";
import type { RecordDraft } from "../../src/warc/types.js";
import { createWarcWriter } from "../../src/warc/writer.js";
import { writerOpts } from "../warc/helpers.js";

const dirs: string[] = [];
afterAll(async () => {
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});

let n = 0;
function resource(uri: string, micros: bigint): RecordDraft {
  const id = `<urn:uuid:00000000-0000-4000-8000-${String(++n).padStart(12, "0")}>`;
  return {
    type: "resource",
    id,
    fields: [["WARC-Type", "resource"], ["WARC-Record-ID", id], ["WARC-Date", formatWarcDate(micros, "1.1")], ["WARC-Target-URI", uri], ["WARC-Payload-Digest", "sha1:X"], ["Content-Type", "text/plain"]],
    block: [Buffer.from(`capture ${n}`)],
  };
}

const answer = async (svc: CdxService, query: string): Promise<string[]> => {
  const out: string[] = [];
  for await (const l of svc.query(parseCdxQuery(new URLSearchParams(query)))) out.push(l.line);
  return out;
};

interface State {
  runs: Array<{ file: string; files: string[]; bytes: number }>;
  generation: number;
}
const stateOf = async (dir: string): Promise<State> => JSON.parse(await readFile(join(dir, "lathe-cdx", "c", "state.json"), "utf8"));

/** A fresh WARC directory, a started service for collection "c" and a writer of "c" files feeding it. */
async function serviceWithWriter(merge: Pick<CdxServiceOptions, "mergeAfterFiles" | "mergeAfterMs" | "liveSpillLines">) {
  const dir = await mkdtemp(join(tmpdir(), "lathe-cdx-service-"));
  dirs.push(dir);
  const svc = new CdxService({ warcDir: dir, log: silentLogger, collections: () => ["c"], ...merge });
  await svc.start();
  const w = createWarcWriter(writerOpts(dir, { prefix: "c", index: svc.hookFor("c") }));
  return { dir, svc, w };
}

describe("CdxService", () => {
  it("merges closed files after mergeAfterFiles, keeps answers, and reloads from disk", async () => {
    const { dir, svc, w } = await serviceWithWriter({ mergeAfterFiles: 3, mergeAfterMs: 0 });
    const base = 1_780_000_000_000_000n;
    const want: string[] = [];
    for (let f = 0; f < 5; f++) {
      for (let i = 0; i < 4; i++) await w.write([resource(`http://example.com/p${i}`, base + BigInt(f * 4 + i) * 1_000_000n)]);
      // Open: from memory.
      const got = await answer(svc, "url=example.com/&matchType=prefix");
      expect(got).toHaveLength((f + 1) * 4);
      await w.rollover();
      await new Promise((r) => setTimeout(r, 50));
      want.splice(0, want.length, ...(await answer(svc, "url=example.com/&matchType=prefix")));
      expect(want).toEqual(got);
      expect([...want].sort()).toEqual(want);
    }
    // Three closed files triggered a merge; two wait.
    const state = await stateOf(dir);
    expect(state.runs).toHaveLength(1);
    expect(state.runs[0]!.files).toHaveLength(3);
    expect(existsSync(join(dir, "lathe-cdx", "c", state.runs[0]!.file))).toBe(true);
    expect(await answer(svc, "url=http://example.com/p2&sort=reverse&limit=2")).toEqual(want.filter((l) => l.includes("/p2")).reverse().slice(0, 2));
    await w.close();
    await svc.close();

    const again = new CdxService({ warcDir: dir, log: silentLogger, collections: () => ["c"] });
    await again.start();
    expect(await answer(again, "url=example.com/&matchType=prefix")).toEqual(want);
    await again.mergeNow("c");
    expect((await stateOf(dir)).runs.flatMap((r) => r.files)).toHaveLength(5);
    expect(await answer(again, "url=example.com/&matchType=prefix")).toEqual(want);
    expect(await answer(again, "url=example.com/&matchType=prefix&collection=c")).toEqual(want);
    await again.close();
  });

  for (const spill of [undefined, 1000]) {
  it(`answers an open file with thousands of lines in order (sorted part + recent part${spill ? ", and sorted runs on disk past 1,000 lines" : ""})`, async () => {
    const { dir, svc, w } = await serviceWithWriter({ mergeAfterMs: 0, liveSpillLines: spill });
    let total = 0;
    let runsSeen = 0;
    for (let g = 0; g < 110; g++) {
      const group: RecordDraft[] = [];
      for (let i = 0; i < 50; i++) group.push(resource(`http://example.com/${(g * 7919 + i * 104729) % 1000}`, 1_780_000_000_000_000n + BigInt(g * 50 + i) * 1_000_000n));
      await w.write(group);
      total += 50;
      if (g % 37 === 0 || g === 109) {
        const got = await answer(svc, "url=example.com/&matchType=prefix");
        expect(got).toHaveLength(total);
        expect([...got].sort()).toEqual(got);
        const rev = await answer(svc, "url=example.com/&matchType=prefix&sort=reverse");
        expect(rev).toEqual([...got].reverse());
        runsSeen = Math.max(runsSeen, (await readdir(dir)).filter((f) => /\.cdxj\.open\.run-\d+$/.test(f)).length);
      }
    }
    // 5,500 lines: spilled every 1,000 (the last run may still be on its way to disk at a check).
    if (spill) expect(runsSeen).toBeGreaterThanOrEqual(4);
    else expect(runsSeen).toBe(0);
    const open = await answer(svc, "url=example.com/&matchType=prefix");
    await w.close();
    expect(await answer(svc, "url=example.com/&matchType=prefix")).toEqual(open);
    const runs = async () => (await readdir(dir)).filter((f) => f.includes(".cdxj.open.run-"));
    // Kept a while for queries that took them before the file closed; gone once the service closes.
    if (spill) expect((await runs()).length).toBeGreaterThanOrEqual(5);
    await svc.close();
    expect(await runs()).toEqual([]);
  });
  }

  it("merges after mergeAfterMs", async () => {
    const { dir, svc, w } = await serviceWithWriter({ mergeAfterFiles: 100, mergeAfterMs: 100 });
    await w.write([resource("http://example.com/x", 1_780_000_000_000_000n)]);
    await w.close();
    for (let i = 0; i < 100 && !existsSync(join(dir, "lathe-cdx", "c", "state.json")); i++) await new Promise((r) => setTimeout(r, 20));
    expect((await stateOf(dir)).runs.flatMap((r) => r.files)).toHaveLength(1);
    expect(await answer(svc, "url=http://example.com/x")).toHaveLength(1);
    await svc.close();
  });
  it("merges in tiers: a run absorbs only runs at most twice its size, so runs stay few and old lines are not rewritten at every merge", async () => {
    const { dir, svc, w } = await serviceWithWriter({ mergeAfterFiles: 1, mergeAfterMs: 0 });
    const base = 1_780_000_000_000_000n;
    const N = 12;
    let rewritten = 0;
    let most = 0;
    let all: string[] = [];
    for (let f = 0; f < N; f++) {
      for (let i = 0; i < 4; i++) await w.write([resource(`http://example.com/f${f}/p${i}`, base + BigInt(f * 4 + i) * 1_000_000n)]);
      await w.rollover();
      await svc.mergeNow("c");
      const st = await stateOf(dir);
      const files = st.runs.flatMap((r) => r.files);
      expect(new Set(files).size).toBe(f + 1); // every closed file in exactly one run
      for (let k = 1; k < st.runs.length; k++) expect(st.runs[k - 1]!.bytes).toBeGreaterThan(st.runs[k]!.bytes); // largest first
      rewritten += st.runs.at(-1)!.bytes; // the run this merge wrote
      most = Math.max(most, st.runs.length);
      all = await answer(svc, "url=example.com/&matchType=prefix");
      expect(all).toHaveLength((f + 1) * 4);
      expect([...all].sort()).toEqual(all);
    }
    const st = await stateOf(dir);
    const total = st.runs.reduce((a, r) => a + r.bytes, 0);
    expect(most).toBeGreaterThan(1);
    expect(most).toBeLessThanOrEqual(4);
    // One merged file rewritten whole at every merge would write total × (N + 1) / 2.
    expect(rewritten).toBeLessThan((total * (N + 1)) / 2 / 1.5);
    await w.close();
    await svc.close();

    // Leftovers of a merge that did not finish, and a run no state names, go at the next start;
    // the runs in the state stay and answer the same.
    const cdir = join(dir, "lathe-cdx", "c");
    await writeFile(join(cdir, "merged-999.cdxj"), "stale\n");
    await writeFile(join(cdir, ".merged-1000.cdxj.tmp-1-2"), "partial\n");
    const again = new CdxService({ warcDir: dir, log: silentLogger, collections: () => ["c"] });
    await again.start();
    expect(await answer(again, "url=example.com/&matchType=prefix")).toEqual(all);
    expect((await readdir(cdir)).filter((n) => n.startsWith("merged-") || n.startsWith(".merged-")).sort()).toEqual(st.runs.map((r) => r.file).sort());
    await again.close();
  });

  it("reads the first version's state (one merged file) as one run", async () => {
    const { dir, svc, w } = await serviceWithWriter({ mergeAfterFiles: 100, mergeAfterMs: 0 });
    await w.write([resource("http://example.com/a", 1_780_000_000_000_000n)]);
    await w.rollover();
    await svc.mergeNow("c");
    await w.write([resource("http://example.com/b", 1_780_000_001_000_000n)]);
    await w.close();
    const want = await answer(svc, "url=example.com/&matchType=prefix");
    await svc.close();
    const st = await stateOf(dir);
    await writeFile(join(dir, "lathe-cdx", "c", "state.json"), JSON.stringify({ merged: st.runs[0]!.file, files: st.runs[0]!.files, generation: st.generation }) + "\n");
    const again = new CdxService({ warcDir: dir, log: silentLogger, collections: () => ["c"], mergeAfterMs: 0 });
    await again.start();
    expect(want).toHaveLength(2);
    expect(await answer(again, "url=example.com/&matchType=prefix")).toEqual(want);
    await again.mergeNow("c");
    const after = await stateOf(dir);
    expect(after.runs.flatMap((r) => r.files)).toHaveLength(2);
    expect(await answer(again, "url=example.com/&matchType=prefix")).toEqual(want);
    await again.close();
  });
});
