/**
 * WACZs of what a real in-process lathe recorded (src/wacz/), checked by readers that are not
 * lathe's (test/helpers/wacz.ts): the ZIP (Python's zipfile), every datapackage.json hash
 * recomputed, every index line read back at its offset inside archive/ with warcio, the index
 * equal to `lathe index --cdxj`'s, the WARCs byte for byte; and pages.jsonl by each rule —
 * navigations (Sec-Fetch-Dest: document), declared pages (urn:view: resources with titles),
 * given pages (by record id), and every text/html 200 answer when nothing says more.
 */
import { createHash } from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";
import { mkdtemp, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildIndex } from "../../src/index/build.js";
import { readWarcRecords } from "../../src/warc/reader.js";
import { writeWaczFile } from "../../src/wacz/output.js";
import { viaProxy } from "../helpers/client.js";
import { startTestLathe, type TestLathe } from "../helpers/lathe.js";
import { startHttpOrigin, type Origin } from "../helpers/origin.js";
import { describeUsing, sharedDir } from "../helpers/shared.js";
import { checkWacz, dataOffset, sha256 } from "../helpers/wacz.js";
import { warcFiles } from "../helpers/warcs.js";

const CONFORMANCE = sharedDir("conformance/warcs", "LATHE_CONFORMANCE_WARCS");

let lathe: TestLathe;
let origin: Origin;
let tmp = "";
/** The default collection's files (browser-like traffic) and the "shots" collection's (screenshots declared). */
let crawl: string[] = [];
let shots: string[] = [];
const navigations: string[] = [];
const declared: Array<{ url: string; title: string }> = [];

const get = (url: string, dest: string, mode: string) => viaProxy(lathe.proxyUrl, url, { headers: { Host: new URL(url).host, "Sec-Fetch-Dest": dest, "Sec-Fetch-Mode": mode } });

beforeAll(async () => {
  tmp = await mkdtemp(join(tmpdir(), "lathe-wacz-"));
  origin = await startHttpOrigin();
  lathe = await startTestLathe();
  const o = origin.url;
  for (const n of [1, 2, 3]) {
    const url = `${o}/text/${600 + n}?page=${n}`;
    expect((await get(url, "document", "navigate")).status).toBe(200);
    navigations.push(url);
    expect((await get(`${o}/bytes/${3000 + n}`, "image", "no-cors")).status).toBe(200);
  }
  // HTML that is not a top-level navigation, the same image again (a revisit), an HTML 404.
  expect((await get(`${o}/text/700?frame=1`, "iframe", "navigate")).status).toBe(200);
  expect((await get(`${o}/bytes/3001`, "image", "no-cors")).status).toBe(200);
  expect((await get(`${o}/nothing-here`, "document", "navigate")).status).toBe(404);
  // Another collection: pages declared by screenshots, as `lathe record` and the resources API write them.
  lathe.facade.createCollection({ name: "shots" });
  const png = Buffer.from("89504e470d0a1a0a", "hex");
  for (const n of [1, 2]) {
    const url = `${o}/text/${800 + n}?shot=${n}`;
    const title = `Shot ${n} — ✓`;
    expect((await viaProxy(lathe.proxyUrl, url, { headers: { Host: new URL(url).host, "Warcprox-Meta": JSON.stringify({ lathe: { collection: "shots" } }) } })).status).toBe(200);
    await lathe.facade.writeResource({ collection: "shots", kind: "view", page: url, contentType: "image/png", body: Readable.from([png]), length: png.length, context: { mode: "parallel", extra: { title } } });
    declared.push({ url, title });
  }
  await lathe.stop();
  const all = warcFiles(lathe.dir);
  shots = all.filter((f) => f.includes("/shots-"));
  crawl = all.filter((f) => !shots.includes(f));
  expect(shots.length).toBeGreaterThan(0);
  expect(crawl.length).toBeGreaterThan(0);
});

afterAll(async () => {
  await lathe?.stop().catch(() => {});
  await origin?.close();
  await rm(tmp, { recursive: true, force: true });
  if (lathe) await rm(lathe.dir, { recursive: true, force: true });
});

/** `lathe index --cdxj`'s lines for the same files. */
async function cdxjOf(files: string[]): Promise<string[]> {
  const out: string[] = [];
  for await (const l of buildIndex(files, { format: "cdxj" })) out.push(l.slice(0, -1));
  return out;
}

describe("a WACZ of lathe's own WARCs", () => {
  for (const forceZip64 of [false, true]) {
    it(`holds the WARCs as they are, lathe's index of them, every hash right${forceZip64 ? " (ZIP64 forced)" : ""}`, async () => {
      const out = join(tmp, `crawl-${forceZip64}.wacz`);
      const summary = await writeWaczFile({ files: crawl, pages: { kind: "detect" }, title: "crawl", forceZip64 }, out);
      const { wacz, problems } = await checkWacz(out);
      expect(problems).toEqual([]);
      expect(summary.size).toBe(readFileSync(out).length);
      // The archive/ entries are the files, byte for byte.
      const names = crawl.map((f) => `archive/${f.split("/").pop()}`);
      expect(wacz.entries.map((e) => e.name)).toEqual([...names, "indexes/index.cdx.gz", "indexes/index.idx", "pages/pages.jsonl", "datapackage.json", "datapackage-digest.json"]);
      for (const f of crawl) expect(wacz.datapackage.resources.find((r) => r.path === `archive/${f.split("/").pop()}`)?.hash).toBe(sha256(readFileSync(f)));
      // The index is lathe's own CDXJ of those files, and every line was read back at its offset.
      expect(wacz.lines.map((l) => l.text)).toEqual(await cdxjOf(crawl));
      expect(wacz.resolved).toBe(wacz.lines.length);
      expect(wacz.lines.some((l) => l.json.mime === "warc/revisit")).toBe(true);
      // Pages: the three navigations, not the iframe, the images or the 404.
      expect(summary.pageRule).toBe("navigation");
      expect(wacz.pages.map((p) => p.url)).toEqual(navigations);
      expect(wacz.datapackage.title).toBe("crawl");
    });
  }

  it("the checks themselves catch a damaged package: one byte changed in a WARC", async () => {
    const out = join(tmp, "damaged.wacz");
    await writeWaczFile({ files: crawl, pages: { kind: "detect" }, title: "crawl" }, out);
    const bytes = readFileSync(out);
    const { wacz } = await checkWacz(out);
    const line = wacz.lines.find((l) => l.json.mime === "text/html")!;
    const entry = wacz.entries.find((e) => e.name === `archive/${line.json.filename}`)!;
    // Inside that record's gzip member: the record no longer reads back, the hash and CRC no longer match.
    const at = dataOffset(out, entry.headerOffset) + Number(line.json.offset) + 20;
    bytes[at] = bytes[at]! ^ 0xff;
    writeFileSync(out, bytes);
    const { problems } = await checkWacz(out);
    expect(problems.join("\n")).toMatch(/testzip: bad CRC in archive\//);
    expect(problems.join("\n")).toMatch(/archive\/.*: hash sha256:/);
    expect(problems.join("\n")).toContain(line.text);
  });

  it("lists the pages a crawler declared, with the titles their metadata gives", async () => {
    const out = join(tmp, "shots.wacz");
    const summary = await writeWaczFile({ files: shots, pages: { kind: "detect" }, title: "shots" }, out);
    const { wacz, problems } = await checkWacz(out);
    expect(problems).toEqual([]);
    expect(summary.pageRule).toBe("declared");
    expect(wacz.pages.map((p) => ({ url: p.url, title: p.title }))).toEqual(declared);
    // A declared page's timestamp is its capture's: the urn:view: record took the page record's date.
    for (const p of wacz.pages) expect(wacz.lines.some((l) => l.json.url === p.url && l.timestamp === p.ts.replace(/\D/g, "").slice(0, 14))).toBe(true);
  });

  it("lists exactly the pages it is given, by their records' dates, and leaves out those without a record", async () => {
    const ids = new Map<string, { id: string; date: string }>();
    for (const f of crawl) for await (const r of readWarcRecords(f)) if (r.warcType === "response" && r.targetUri) ids.set(r.targetUri, { id: r.recordId!, date: r.date! });
    const given = [
      { url: navigations[1]!, title: "Second", recordId: ids.get(navigations[1]!)!.id },
      { url: navigations[0]!, title: "First", recordId: ids.get(navigations[0]!)!.id },
      { url: `${origin.url}/never`, title: "Never recorded", recordId: null },
      { url: `${origin.url}/lost`, title: "Lost", recordId: "<urn:uuid:00000000-0000-4000-8000-000000000000>" },
    ];
    const out = join(tmp, "given.wacz");
    const summary = await writeWaczFile({ files: crawl, pages: { kind: "given", pages: given }, title: "given" }, out);
    const { wacz, problems } = await checkWacz(out);
    expect(problems).toEqual([]);
    expect(summary.pageRule).toBe("given");
    expect(wacz.pages).toEqual([
      { id: expect.any(String), url: navigations[0], ts: ids.get(navigations[0]!)!.date, title: "First" },
      { id: expect.any(String), url: navigations[1], ts: ids.get(navigations[1]!)!.date, title: "Second" },
    ]);
  });

  describeUsing(CONFORMANCE, "on a conformance WARC", () => {
    it("falls back to every text/html 200 answer when no request says what was a navigation", async () => {
      const f = join(CONFORMANCE.path, "pywb-example2.warc.gz");
      const out = join(tmp, "other.wacz");
      const summary = await writeWaczFile({ files: [f], pages: { kind: "detect" }, title: "other" }, out);
      const { wacz, problems } = await checkWacz(out);
      expect(problems).toEqual([]);
      expect(summary.pageRule).toBe("html");
      const html = wacz.lines.filter((l) => l.json.mime === "text/html" && l.json.status === "200").map((l) => l.json.url);
      expect(wacz.pages.map((p) => p.url).sort()).toEqual([...new Set(html)].sort());
      expect(wacz.pages.length).toBeGreaterThan(0);
      // Nothing of the work is left beside the output.
      expect((await readdir(tmp)).filter((n) => n.startsWith("."))).toEqual([]);
      expect(createHash("sha256").update(readFileSync(out)).digest("hex")).toMatch(/^[0-9a-f]{64}$/);
    });
  });
});
