/**
 * Hybrid compression (issue #24) when things go wrong: an uncompressed `.warc.open` torn in the
 * middle of a media record is cut back to its complete records at start-up, its index and dedup
 * entries with it; a disk that fills up while media goes to the uncompressed series loses
 * nothing a client received (rollover durability; a real tmpfs, skipped when it cannot be
 * mounted, i.e. not root).
 */
import { mkdtempSync, readFileSync, readdirSync, renameSync, rmSync, truncateSync, writeFileSync } from "node:fs";
import { rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { checkArchive, sha1, type Received } from "../helpers/archiveCheck.js";
import { viaProxy } from "../helpers/client.js";
import { startTestLathe, type TestLathe } from "../helpers/lathe.js";
import { startHttpOrigin, type Origin } from "../helpers/origin.js";
import { fill, mountTmpfs, unmount } from "../helpers/tmpfs.js";
import { checkDigests, readAllWarcs, readWarc } from "../helpers/warcs.js";

const HYBRID = { warc: { compression: "hybrid" as const } };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const js = (l: string) => JSON.parse(l.slice(l.indexOf("{"))) as Record<string, string>;

async function waitForCaptures(lathe: TestLathe, n: number): Promise<void> {
  for (let i = 0; i < 500 && lathe.archiver.stats.captures < n; i++) await sleep(10);
  expect(lathe.archiver.stats.captures).toBe(n);
}

let origin: Origin;
beforeAll(async () => {
  origin = await startHttpOrigin();
});
afterAll(async () => {
  await origin?.close();
});

describe("crash recovery of the uncompressed series", () => {
  const dirs: string[] = [];
  afterAll(async () => {
    for (const d of dirs) await rm(d, { recursive: true, force: true });
  });

  it("a .warc.open torn inside a media record keeps its complete records; index and dedup entries of the cut one go", async () => {
    const first = await startTestLathe(HYBRID);
    dirs.push(first.dir, first.certsDir);
    // /bytes/N is incompressible octet-stream: the uncompressed series. /text/N: the gzip series.
    const urls = [`${origin.url}/bytes/200001`, `${origin.url}/text/30000`, `${origin.url}/bytes/300001`];
    for (const u of urls) expect((await viaProxy(first.proxyUrl, u)).status).toBe(200);
    await waitForCaptures(first, 3);
    await first.stop();

    // As a crash would leave it: still `.open`, no sorted index, its journal beside it, and
    // torn in the middle of the last media capture's response.
    const plain = readdirSync(first.dir).find((f) => f.endsWith(".warc"))!;
    const path = join(first.dir, plain);
    const lines = readFileSync(`${path}.cdxj`, "utf8").split("\n").filter(Boolean);
    const cut = lines.map(js).find((j) => j.url === urls[2])!;
    rmSync(`${path}.cdxj`);
    writeFileSync(`${path}.cdxj.open`, lines.join("\n") + "\n");
    renameSync(path, `${path}.open`);
    truncateSync(`${path}.open`, Number(cut.offset) + Math.floor(Number(cut.length) / 2));

    const second = await startTestLathe(HYBRID, { warcDir: first.dir });
    dirs.push(second.certsDir);
    try {
      expect(readdirSync(first.dir).filter((f) => f.endsWith(".open"))).toEqual([]);
      const kept = await readWarc(path);
      for (const r of kept) expect(checkDigests(r)).toEqual([]);
      expect(kept.filter((r) => r.type === "response").map((r) => r.get("WARC-Target-URI"))).toEqual([urls[0]]);
      expect(readFileSync(path).length).toBeLessThanOrEqual(Number(cut.offset));
      const cdx = async (u: string) => (await (await fetch(`${second.controlUrl}/cdx?url=${encodeURIComponent(u)}`)).text()).split("\n").filter(Boolean);
      expect(await cdx(urls[0]!)).toHaveLength(1);
      expect(await cdx(urls[2]!)).toHaveLength(0);
      expect(readFileSync(`${path}.cdxj`, "utf8").split("\n").filter(Boolean).map((l) => js(l).url)).toEqual([urls[0]]);
      // The kept payload deduplicates (a revisit, in the gzip series); the cut one does not.
      expect((await viaProxy(second.proxyUrl, `${urls[0]}?again`)).status).toBe(200);
      expect((await viaProxy(second.proxyUrl, `${urls[2]}?again`)).status).toBe(200);
      await waitForCaptures(second, 2);
      await second.stop();
      const all = await readAllWarcs(first.dir);
      const again = (u: string) => all.find((r) => r.get("WARC-Target-URI") === `${u}?again` && (r.type === "response" || r.type === "revisit"))!;
      expect(again(urls[0]!).type).toBe("revisit");
      expect(again(urls[0]!).file).toMatch(/\.warc\.gz$/);
      expect(again(urls[2]!).type).toBe("response");
      expect(again(urls[2]!).file).toMatch(/\.warc$/);
    } finally {
      await second.stop();
    }
  }, 60_000);
});

const canMount = (() => {
  const d = mountTmpfs(64 * 1024);
  if (d) unmount(d);
  return d !== null;
})();

describe.skipIf(!canMount)("disk full while media goes to the uncompressed series (a small tmpfs; skipped when it cannot be mounted, i.e. not root)", () => {
  const mounts: string[] = [];
  afterAll(() => {
    for (const m of mounts.reverse()) unmount(m);
  });

  it("every response a client got is archived, in both series, once space is back", async () => {
    const mnt = mountTmpfs(4 * 1024 * 1024)!;
    mounts.push(mnt);
    const warcDir = join(mnt, "warcs");
    const side = mkdtempSync(join(tmpdir(), "lathe-side-"));
    const lathe = await startTestLathe({ ...HYBRID, dedup: { dbPath: join(side, "dedup.sqlite3") }, capture: { spoolDir: side } }, { warcDir });
    try {
      fill(mnt, 600_000);
      const received: Received[] = [];
      let held = 0;
      const watch = setInterval(() => (held = Math.max(held, lathe.writers.get("lathe")?.state().waiting.captures ?? 0)), 20);
      // Two clients of media (70–90 KB each, 1.9 MB in all: more than the disk has left), one of text.
      await Promise.all(
        [0, 1, 2].map(async (w) => {
          for (let i = 0; i < 12; i++) {
            const url = w < 2 ? `${origin.url}/bytes/${70_000 + w * 10_000 + i * 13}?w=${w}` : `${origin.url}/text/${20_000 + i}?w=${w}`;
            const r = await viaProxy(lathe.proxyUrl, url).catch(() => null);
            if (r?.status === 200) received.push({ url, sha1: sha1(r.body) });
          }
        }),
      );
      clearInterval(watch);
      expect(held, "captures waited for the full disk").toBeGreaterThan(0);
      expect(lathe.writers.get("lathe")!.state().failed?.message).toMatch(/disk full|no space/i);

      rmSync(join(mnt, "filler"));
      for (let i = 0; i < 150 && lathe.writers.get("lathe")!.state().waiting.captures > 0; i++) await sleep(100);
      expect(lathe.writers.get("lathe")!.state().waiting.captures).toBe(0);
      await lathe.stop();
      await checkArchive(warcDir, received, { dedupDb: join(side, "dedup.sqlite3") });
      const names = readdirSync(warcDir);
      expect(names.some((f) => f.endsWith(".warc"))).toBe(true);
      expect(names.some((f) => f.endsWith(".warc.gz"))).toBe(true);
    } finally {
      await lathe.stop();
    }
  }, 90_000);
});
