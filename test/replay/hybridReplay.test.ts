/**
 * Hybrid compression (issue #24) replays: the replay site recorded by `lathe record` with
 * `warc.compression: "hybrid"` (no size threshold, so its small images count as media), then
 * opened in ReplayWeb.page through lathe's CDXJ of both files: the images come from the `.warc`
 * series by HTTP ranges at their plain offsets and lengths, the pages from the `.warc.gz` series;
 * and the WACZ `lathe record --wacz` made of both series replays the same (issue #23 with #24).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { existsSync } from "node:fs";
import { basename, relative } from "node:path";
import { originCerts } from "../helpers/certs.js";
import { CHROMIUM, checkArchive } from "../helpers/replay.js";
import { lineOf, zipEntries } from "./damage.js";
import { startRecordedReplay, type RecordedReplay } from "./fixture.js";
import type { Recording } from "./recording.js";
import type { Site } from "./site.js";

const hasChromium = existsSync(CHROMIUM);

describe.skipIf(!hasChromium)(`a hybrid recording replays in ReplayWeb.page${hasChromium ? "" : ` (skipped: ${CHROMIUM} not installed)`}`, () => {
  const certs = originCerts();
  let fixture: RecordedReplay | undefined;
  let site: Site;
  let rec: Recording;

  beforeAll(async () => {
    fixture = await startRecordedReplay(certs, "lathe-hybrid-replay", { warc: { compression: "hybrid", hybridMinPayloadBytes: 0 } });
    ({ site, rec } = fixture);
  }, 120_000);

  afterAll(async () => {
    await fixture?.close();
  });

  it("the images went to the .warc series, the pages to the .warc.gz series", () => {
    expect(rec.warcs.map((w) => w.replace(/.*\.warc/, ".warc")).sort()).toEqual([".warc", ".warc.gz"]);
    const photo = lineOf(rec.lines, site.revisit.original);
    expect(photo.filename).toMatch(/\.warc$/);
    expect(lineOf(rec.lines, site.pages[0]!.url).filename).toMatch(/\.warc\.gz$/);
  });

  it("every page replays from lathe's CDXJ, its images read from the .warc by offset and length", async () => {
    const { server, rb, work } = fixture!;
    const before = server.requests.length;
    const c = await checkArchive(rb, server, server.archiveUrl(relative(work, rec.cdxj)), site.pages.map((p) => ({ expect: p, ts: rec.pageTs[p.url]! })));
    expect(c.problems).toEqual(Object.fromEntries(site.pages.map((p) => [p.url, []])));
    const plain = basename(rec.warcs.find((w) => w.endsWith(".warc"))!);
    const ranges = server.requests.slice(before).filter((r) => r.path.endsWith(plain));
    expect(ranges.length).toBeGreaterThan(0);
    const indexed = new Set(rec.lines.filter((l) => l.filename === plain).map((l) => `bytes=${l.offset}-${Number(l.offset) + Number(l.length) - 1}`));
    for (const r of ranges) expect(indexed.has(r.range!), `${r.range} is one index line's record`).toBe(true);
  });

  it("the WACZ of a hybrid recording holds both series, made from lathe's own indexes, and replays every page", async () => {
    const { server, rb, work } = fixture!;
    expect(rec.stdout).toMatch(/index from: +lathe's own index/);
    const archived = zipEntries(rec.wacz).filter((n) => n.startsWith("archive/")).map((n) => n.replace(/.*\.warc/, ".warc")).sort();
    expect(archived).toEqual([".warc", ".warc.gz"]);
    const c = await checkArchive(rb, server, server.archiveUrl(relative(work, rec.wacz)), site.pages.map((p) => ({ expect: p, ts: rec.pageTs[p.url]! })));
    expect(c.problems).toEqual(Object.fromEntries(site.pages.map((p) => [p.url, []])));
    expect(c.pageList.map((p) => p.url).sort()).toEqual(site.pages.map((p) => p.url).sort());
  });
});
