/**
 * The WACZ index pass that trusts lathe's own per-file CDXJ (src/wacz/guidedPass.ts): on lathe's
 * closed WARCs (gzip and plain) it gives the very same package as reading every record, without
 * inflating payloads; whenever the index does not fit its file (missing, older than the file,
 * offsets that do not lead to records, a truncated file) the package is made by reading every
 * record instead — and a damaged file is then refused as before.
 */
import { copyFileSync, mkdirSync, readFileSync, rmSync, statSync, truncateSync, utimesSync, writeFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import { Readable } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readWarcRecords } from "../../src/warc/reader.js";
import { writeWaczFile, type WaczSummary } from "../../src/wacz/output.js";
import type { PageSource } from "../../src/wacz/pages.js";
import { viaProxy } from "../helpers/client.js";
import { startTestLathe, type TestLathe } from "../helpers/lathe.js";
import { startHttpOrigin, type Origin } from "../helpers/origin.js";
import { checkWacz, unzipEntry } from "../helpers/wacz.js";
import { warcFiles } from "../helpers/warcs.js";

let origin: Origin;
let tmp = "";
const dirs: string[] = [];

/** What a browser-like crawl and a screenshot collection leave: lathe's closed WARCs with their `.cdxj`. */
async function record(gzip: boolean): Promise<{ crawl: string[]; shots: string[] }> {
  const lathe: TestLathe = await startTestLathe({ warc: { gzip } });
  dirs.push(lathe.dir);
  const o = origin.url;
  const get = (url: string, dest: string, mode: string, extra: Record<string, string> = {}) => viaProxy(lathe.proxyUrl, url, { headers: { Host: new URL(url).host, "Sec-Fetch-Dest": dest, "Sec-Fetch-Mode": mode, ...extra } });
  for (const n of [1, 2, 3]) {
    expect((await get(`${o}/text/${600 + n}?page=${n}`, "document", "navigate")).status).toBe(200);
    expect((await get(`${o}/bytes/${200_000 + n}`, "image", "no-cors")).status).toBe(200);
  }
  expect((await get(`${o}/bytes/200001`, "image", "no-cors")).status).toBe(200); // a revisit
  expect((await get(`${o}/text/700?frame=1`, "iframe", "navigate")).status).toBe(200);
  expect((await get(`${o}/nothing-here`, "document", "navigate")).status).toBe(404);
  lathe.facade.createCollection({ name: "shots" });
  const png = Buffer.from("89504e470d0a1a0a", "hex");
  for (const n of [1, 2]) {
    const url = `${o}/text/${800 + n}?shot=${n}`;
    expect((await get(url, "document", "navigate", { "Warcprox-Meta": JSON.stringify({ lathe: { collection: "shots" } }) })).status).toBe(200);
    await lathe.facade.writeResource({ collection: "shots", kind: "view", page: url, contentType: "image/png", body: Readable.from([png]), length: png.length, context: { mode: "parallel", extra: { title: `Shot ${n}` } } });
  }
  await lathe.stop();
  const all = warcFiles(lathe.dir);
  const shots = all.filter((f) => basename(f).startsWith("shots-"));
  return { crawl: all.filter((f) => !shots.includes(f)), shots };
}

/** The package's index, index blocks and pages (read by Info-ZIP's unzip): what the two passes must agree on. */
function contentOf(path: string): { cdx: Buffer; idx: Buffer; pages: Buffer } {
  return { cdx: unzipEntry(path, "indexes/index.cdx.gz"), idx: unzipEntry(path, "indexes/index.idx"), pages: unzipEntry(path, "pages/pages.jsonl") };
}

async function both(files: string[], pages: PageSource, name: string): Promise<{ own: WaczSummary; read: WaczSummary; ownPath: string; readPath: string }> {
  const ownPath = join(tmp, `${name}-own.wacz`);
  const readPath = join(tmp, `${name}-read.wacz`);
  const own = await writeWaczFile({ files, pages, title: name, ownIndexes: true }, ownPath);
  const read = await writeWaczFile({ files, pages, title: name }, readPath);
  return { own, read, ownPath, readPath };
}

beforeAll(async () => {
  tmp = await mkdtemp(join(tmpdir(), "lathe-guided-"));
  origin = await startHttpOrigin();
});

afterAll(async () => {
  await origin?.close();
  await rm(tmp, { recursive: true, force: true });
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});

describe.each([true, false])("lathe's own index of each file (gzip %s)", (gzip) => {
  let crawl: string[] = [];
  let shots: string[] = [];
  beforeAll(async () => {
    ({ crawl, shots } = await record(gzip));
    for (const f of [...crawl, ...shots]) expect(statSync(`${f}.cdxj`).isFile()).toBe(true);
  });

  it("gives the same package as reading every record, for each page rule", async () => {
    const ids = new Map<string, string>();
    for (const f of crawl) for await (const r of readWarcRecords(f)) if (r.warcType === "response" && r.targetUri) ids.set(r.targetUri, r.recordId!);
    const given: PageSource = { kind: "given", pages: [...ids].filter(([u]) => u.includes("page=")).map(([url, recordId]) => ({ url, title: `T ${url}`, recordId })) };
    const cases: Array<[string[], PageSource, string]> = [
      [crawl, { kind: "detect" }, "navigation"],
      [shots, { kind: "detect" }, "declared"],
      [crawl, given, "given"],
    ];
    for (const [files, pages, rule] of cases) {
      const r = await both(files, pages, `${gzip}-${rule}`);
      expect(r.own.indexedFrom).toBe("own-indexes");
      expect(r.read.indexedFrom).toBe("records");
      expect(r.own.pageRule).toBe(rule);
      expect(r.own.pages).toBeGreaterThan(0);
      expect(contentOf(r.ownPath)).toEqual(contentOf(r.readPath));
      expect((await checkWacz(r.ownPath)).problems).toEqual([]);
    }
  });

  it("reads every record instead when an index is missing, older than its file, or does not fit it", async () => {
    const f = crawl[0]!;
    const copy = join(tmp, `misfit-${gzip}`);
    copyFileSync(`${f}.cdxj`, copy);
    try {
      rmSync(`${f}.cdxj`);
      expect((await both(crawl, { kind: "detect" }, `${gzip}-missing`)).own.indexedFrom).toBe("records");
      copyFileSync(copy, `${f}.cdxj`);
      const old = new Date(statSync(f).mtimeMs - 60_000);
      utimesSync(`${f}.cdxj`, old, old);
      expect((await both(crawl, { kind: "detect" }, `${gzip}-older`)).own.indexedFrom).toBe("records");
      // An offset moved by one byte: it no longer leads to a record.
      const text = readFileSync(copy, "utf8");
      const shifted = text.replace(/"offset": "(\d+)"/, (_m, o: string) => `"offset": "${Number(o) + 1}"`);
      expect(shifted).not.toBe(text);
      writeFileSync(`${f}.cdxj`, shifted);
      const r = await both(crawl, { kind: "detect" }, `${gzip}-shifted`);
      expect(r.own.indexedFrom).toBe("records");
      expect(contentOf(r.ownPath)).toEqual(contentOf(r.readPath));
    } finally {
      copyFileSync(copy, `${f}.cdxj`);
    }
  });

  it("refuses a truncated file as reading every record does, leaving nothing behind", async () => {
    const f = crawl[crawl.length - 1]!;
    const cut = join(tmp, `cut-${gzip}`, basename(f));
    mkdirSync(join(tmp, `cut-${gzip}`));
    copyFileSync(f, cut);
    copyFileSync(`${f}.cdxj`, `${cut}.cdxj`);
    truncateSync(cut, statSync(cut).size - 7);
    const out = join(tmp, `cut-${gzip}.wacz`);
    await expect(writeWaczFile({ files: [cut], pages: { kind: "detect" }, title: "cut", ownIndexes: true }, out)).rejects.toThrow(/damaged|truncated/);
    expect(() => statSync(out)).toThrow();
  });
});
