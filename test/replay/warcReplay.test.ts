/**
 * What lathe writes replays in a real replay tool (issue #23): a local multi-page site recorded
 * by `lathe record`, then opened in ReplayWeb.page (npm `replaywebpage`, served from loopback) in
 * headless Chromium with no route to the site, which is stopped and its ports held by tripwires.
 * For every page, in replay: its title and text, every image's natural size, computed styles
 * from the shared stylesheet, the JSON a script fetch()ed and wrote into the page, and the
 * revisit resolving (the image under the revisit's URL has the original's size).
 *
 * Three ways in, all from the same recording:
 * - the WARC file itself (`?source=….warc.gz`): ReplayWeb.page downloads and indexes it;
 * - the CDXJ `lathe index --cdxj --output` wrote beside it, as lathe record's summary says (the
 *   same bytes as the live index lathe keeps as `<warc>.cdxj`): given `?source=….cdxj`,
 *   ReplayWeb.page reads the index and fetches each record from the WARC named in its
 *   `filename`, in the same directory, by an HTTP range at its `offset` and `length`;
 * - the WACZ `lathe record --wacz` packaged (`?source=….wacz`): read on demand by ranges, its
 *   page list (pages.jsonl) shown as is.
 * A JSON collection description is not tried: wabac reads one only as a list of WACZ files.
 *
 * The check must fail on broken archives: a page's record cut out of the WARC, the revisit's
 * original cut out, a record's bytes corrupted, a CDXJ line pointing at the wrong offset; in the
 * WACZ (rebuilt with python3's zipfile), one index offset damaged, the WARC dropped from archive/.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { existsSync, mkdirSync, readFileSync } from "node:fs";
import { basename, dirname, join, relative } from "node:path";
import { originCerts } from "../helpers/certs.js";
import { CHROMIUM, type ArchiveCheck, type ReplayBrowser, type ReplayServer, type Tripwire, checkArchive } from "../helpers/replay.js";
import { copyInto, corruptRecord, lineOf, misdirect, misdirectLine, removeRecord, rezip, rezipWithIndex, waczIndex, zipEntries } from "./damage.js";
import { startRecordedReplay, type RecordedReplay } from "./fixture.js";
import type { Recording } from "./recording.js";
import type { Site } from "./site.js";

const hasChromium = existsSync(CHROMIUM);
if (!hasChromium) console.warn(`warcReplay.test.ts skipped: ${CHROMIUM} does not exist (apt-get install -y chromium; npm test's pretest installs it)`);

describe.skipIf(!hasChromium)(`lathe's WARC, CDXJ and WACZ replay in ReplayWeb.page${hasChromium ? "" : ` (skipped: ${CHROMIUM} not installed)`}`, () => {
  const certs = originCerts();
  let work: string;
  let site: Site;
  let rec: Recording;
  let held: Tripwire[] = [];
  let server: ReplayServer;
  let rb: ReplayBrowser;

  const pages = () => site.pages.map((p) => ({ expect: p, ts: rec.pageTs[p.url]! }));
  const url = (path: string) => server.archiveUrl(relative(work, path));
  const check = async (source: string) => {
    const started = Date.now();
    const c = await checkArchive(rb, server, source, pages());
    if (process.env.LATHE_TEST_LOG) console.log(`${source}: indexed in ${c.loadMs} ms, checked in ${Date.now() - started} ms`, c.problems);
    return c;
  };
  const [home, about, gallery, plain] = [0, 1, 2, 3].map((k) => () => site.pages[k]!.url);
  /** A copy of the recording's WARC and CDXJ in a directory of its own (its own URLs, its own collection). */
  const variant = (name: string) => copyInto(join(work, name), [...rec.warcs, rec.cdxj]);
  const warcOf = (files: Record<string, string>) => files[basename(rec.warcs[0]!)]!;
  const failing = (c: ArchiveCheck) => Object.keys(c.problems).filter((u) => c.problems[u]!.length > 0);

  let fixture: RecordedReplay | undefined;
  beforeAll(async () => {
    fixture = await startRecordedReplay(certs, "lathe-replay");
    ({ work, site, rec, server, rb, held } = fixture);
  }, 120_000);

  afterAll(async () => {
    await fixture?.close();
  });

  it("lathe recorded one WARC, every page, and the second photo URL as a revisit of the first", () => {
    expect(rec.warcs.length, rec.stdout).toBe(1);
    for (const p of site.pages) expect(rec.stdout).toMatch(new RegExp(`^ok +200 ${p.url.replace(/[.?*+()[\]\\/]/g, "\\$&")} `, "m"));
    const revisit = lineOf(rec.lines, site.revisit.url, "revisit");
    expect(revisit.digest).toBe(lineOf(rec.lines, site.revisit.original).digest);
    expect(rec.lines.some((l) => l.url === site.revisit.url && l.mime !== "warc/revisit"), "no full copy of the revisit's payload").toBe(false);
    // The index lathe keeps beside the WARC is that same CDXJ: what replays from one replays from the other.
    expect(readFileSync(`${rec.warcs[0]}.cdxj`, "utf8")).toBe(readFileSync(rec.cdxj, "utf8"));
  });

  it("the WARC replays every page as recorded", async () => {
    const before = server.requests.length;
    const c = await check(url(rec.warcs[0]!));
    expect(c.problems).toEqual(Object.fromEntries(site.pages.map((p) => [p.url, []])));
    // No index given: ReplayWeb.page read the whole file once (`bytes=0-`) and indexed it itself.
    expect(server.requests.slice(before).filter((r) => r.path.endsWith(".warc.gz")).map((r) => `${r.range} ${r.status}`)).toEqual(["bytes=0- 206"]);
  });

  it("lathe's CDXJ replays every page, each record read from the WARC by its offset and length", async () => {
    const before = server.requests.length;
    const c = await check(url(rec.cdxj));
    expect(c.problems).toEqual(Object.fromEntries(site.pages.map((p) => [p.url, []])));
    const ranges = server.requests.slice(before).filter((r) => r.path.endsWith(".warc.gz"));
    const indexed = new Set(rec.lines.map((l) => `bytes=${l.offset}-${Number(l.offset) + Number(l.length) - 1}`));
    expect(ranges.length).toBeGreaterThan(0);
    for (const r of ranges) expect(indexed.has(r.range!), `${r.range} is one index line's record`).toBe(true);
  });

  it("fails the pages whose records are cut out of the WARC: a page's own, and the revisit's original", async () => {
    const v = variant("cut");
    // Cut from the end first: each cut moves the bytes after it.
    const cuts = [lineOf(rec.lines, about()), lineOf(rec.lines, site.revisit.original)].sort((x, y) => Number(y.offset) - Number(x.offset));
    for (const line of cuts) removeRecord(warcOf(v), line);
    const c = await check(url(warcOf(v)));
    expect(failing(c)).toEqual([home(), about(), gallery()]);
    expect(c.problems[about()]!.join("\n")).toMatch(/^title "Archived Page Not Found"/);
    expect(c.problems[home()]!.join("\n")).toMatch(/^image #photo is 0×0, expected 41×29/);
    expect(c.problems[gallery()]!.join("\n"), "the revisit no longer resolves").toMatch(/^image #copy is 0×0, expected 41×29/);
  });

  it("fails the page whose record's bytes are corrupted in the WARC (ReplayWeb.page stops indexing there)", async () => {
    const v = variant("corrupt");
    corruptRecord(warcOf(v), lineOf(rec.lines, about()));
    const c = await check(url(warcOf(v)));
    expect(failing(c)).toContain(about());
    expect(failing(c)).not.toContain(home());
  });

  it("fails the pages behind a damaged CDXJ: a line pointing at another record, a record corrupted in the WARC", async () => {
    const v = variant("cdxj");
    misdirectLine(v["default.cdxj"]!, about(), lineOf(rec.lines, plain()));
    corruptRecord(warcOf(v), lineOf(rec.lines, gallery()));
    const c = await check(url(v["default.cdxj"]!));
    expect(failing(c)).toEqual([about(), gallery()]);
  });

  it("the WACZ lathe record packaged replays every page as recorded, read by ranges, and lists exactly its pages", async () => {
    const before = server.requests.length;
    const c = await check(url(rec.wacz));
    expect(c.problems).toEqual(Object.fromEntries(site.pages.map((p) => [p.url, []])));
    expect(c.pageList.map((p) => `${p.url} ${p.title}`).sort()).toEqual(site.pages.map((p) => `${p.url} ${p.title}`).sort());
    // On demand: every read of the package is a bounded range (the ZIP's end, an entry, a record).
    const reads = server.requests.slice(before).filter((r) => r.path.endsWith(".wacz") && r.method === "GET");
    expect(reads.length).toBeGreaterThan(0);
    for (const r of reads) expect(r.range).toMatch(/^bytes=(\d+-\d+|-\d+)$/);
  });

  it("fails the page whose line in the WACZ's index points at another record's offset, and only that page", async () => {
    const lines = waczIndex(rec.wacz);
    const damaged = join(work, "wacz-index", "site.wacz");
    mkdirSync(dirname(damaged));
    rezipWithIndex(rec.wacz, damaged, (cdxj) => misdirect(cdxj, about(), lineOf(lines, plain())));
    const c = await check(url(damaged));
    expect(failing(c)).toEqual([about()]);
  });

  it("fails every page when the WARC is dropped from the WACZ's archive/", async () => {
    const entries = zipEntries(rec.wacz);
    const warcEntries = entries.filter((e) => e.startsWith("archive/"));
    expect(warcEntries).toEqual(rec.warcs.map((w) => `archive/${basename(w)}`));
    const damaged = join(work, "wacz-no-warc", "site.wacz");
    mkdirSync(dirname(damaged));
    rezip(rec.wacz, damaged, { drop: warcEntries });
    const c = await check(url(damaged));
    expect(failing(c)).toEqual(site.pages.map((p) => p.url));
  });

  it("never reached the live site", async () => {
    expect(held.flatMap((t) => t.hits), "connections to the recorded origins' ports").toEqual([]);
    const recorded = site.ports.map((p) => `127.0.0.1:${p}`);
    const leaks = rb.proxy.hits.filter((h) => recorded.some((o) => h.includes(o)) || h.includes("127.0.0.1") || h.includes("localhost"));
    expect(leaks, "requests for the recorded origins at the proxy").toEqual([]);
    // The tripwire is live: a page asking for the site directly ends there, not at the site.
    const ctx = await rb.browser.newContext();
    try {
      const page = await ctx.newPage();
      await page.goto(`${server.origin}/`);
      const got = await page.evaluate((u) => fetch(u, { mode: "no-cors" }).then(() => "fetched", (e) => `failed: ${e}`), home());
      expect(got).toMatch(/^failed/);
      expect(rb.proxy.hits.some((h) => h.includes(`CONNECT 127.0.0.1:${site.ports[0]}`))).toBe(true);
    } finally {
      await ctx.close();
    }
  });
});
