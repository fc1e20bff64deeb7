/**
 * GET /cdx on the control port of a running lathe (issue "CDXJ index"): answers from open files
 * (memory), closed files not merged yet, and the merged per-collection index; the same answers
 * before and after a merge and after a restart; one collection or all; related=true; 400 naming
 * the parameter; a recovered `.open` WARC gets its index regenerated at start-up.
 */
import { copyFileSync, existsSync, readdirSync, writeFileSync } from "node:fs";
import { readFile, rm } from "node:fs/promises";
import { basename, dirname, join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { rebuiltLines } from "../../src/index/live.js";
import { viaProxy } from "../helpers/client.js";
import { startTestLathe, type TestLathe } from "../helpers/lathe.js";
import { startHttpOrigin, type Origin } from "../helpers/origin.js";
import { warcFiles } from "../helpers/warcs.js";

let lathe: TestLathe;
let origin: Origin;
let page = "";
const dirs: string[] = [];

const cdx = async (query: string) => {
  const r = await fetch(`${lathe.controlUrl}/cdx?${query}`);
  const text = await r.text();
  return { status: r.status, type: r.headers.get("content-type"), text, lines: text.split("\n").filter(Boolean) };
};
const js = (l: string) => JSON.parse(l.slice(l.indexOf("{"))) as Record<string, string>;

beforeAll(async () => {
  origin = await startHttpOrigin();
  lathe = await startTestLathe();
  dirs.push(lathe.dir, lathe.certsDir);
  page = `${origin.url}/text/100`;
  const c = await fetch(`${lathe.controlUrl}/api/v1/collections`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ name: "coll-b" }) });
  expect(c.status).toBe(201);
  for (let i = 0; i < 3; i++) expect((await viaProxy(lathe.proxyUrl, page)).status).toBe(200);
  expect((await viaProxy(lathe.proxyUrl, `${origin.url}/text/200`)).status).toBe(200);
  const host = new URL(origin.url).host;
  expect((await viaProxy(lathe.proxyUrl, page, { headers: { Host: host, "Warcprox-Meta": '{"lathe": {"collection": "coll-b"}}' } })).status).toBe(200);
  // The client has its answer before the capture is written: wait for the five.
  for (let i = 0; i < 200 && lathe.archiver.stats.captures < 5; i++) await new Promise((r) => setTimeout(r, 10));
  expect(lathe.archiver.stats.captures).toBe(5);
  const r = await fetch(`${lathe.controlUrl}/api/v1/resources?kind=view&page=${encodeURIComponent(page)}`, { method: "POST", body: new Uint8Array([1, 2, 3]), headers: { "Content-Type": "image/png" } });
  expect(r.status).toBe(201);
});

afterAll(async () => {
  await lathe?.stop().catch(() => {});
  await origin?.close();
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});

/** The answers every state of the index must give. */
async function checkAnswers(): Promise<void> {
  const q = `url=${encodeURIComponent(page)}`;
  const everywhere = await cdx(q);
  expect(everywhere.status).toBe(200);
  expect(everywhere.type).toMatch(/^text\/plain/);
  expect(everywhere.lines).toHaveLength(4);
  expect(everywhere.lines.every((l) => js(l).url === page)).toBe(true);
  expect([...everywhere.lines].sort()).toEqual(everywhere.lines);
  expect((await cdx(`${q}&collection=default`)).lines).toHaveLength(3);
  const b = await cdx(`${q}&collection=coll-b`);
  expect(b.lines).toHaveLength(1);
  expect(js(b.lines[0]!).filename).toMatch(/^coll-b-/);
  const rel = await cdx(`${q}&collection=default&related=true`);
  expect(rel.lines).toHaveLength(4);
  expect(js(rel.lines[3]!).url).toBe(`urn:view:${page}`);
  expect(js(rel.lines[3]!).mime).toBe("image/png");
  const json = await cdx(`${q}&output=json&fl=url,status&limit=2&sort=reverse`);
  expect(json.type).toMatch(/^application\/x-ndjson/);
  expect(json.lines.map((l) => JSON.parse(l))).toEqual([
    { url: page, status: "200" },
    { url: page, status: "200" },
  ]);
  const host = await cdx(`url=${encodeURIComponent(origin.url)}&matchType=host&collection=default&output=text&fl=url`);
  expect(new Set(host.lines)).toEqual(new Set([page, `${origin.url}/text/200`]));
}

describe("GET /cdx", () => {
  it("answers from the open files' lines in memory", async () => {
    expect(readdirSync(lathe.dir).filter((n) => n.endsWith(".cdxj.open")), readdirSync(lathe.dir).join(" ")).toHaveLength(2);
    await checkAnswers();
  });

  it("answers the same from closed files, then from the merged index", async () => {
    for (const w of lathe.writers.values()) await w.rollover();
    expect(readdirSync(lathe.dir).filter((n) => n.endsWith(".cdxj")).length).toBe(2);
    await checkAnswers();
    await lathe.cdx.mergeNow("default");
    await lathe.cdx.mergeNow("coll-b");
    const state = JSON.parse(await readFile(join(lathe.dir, "lathe-cdx", "default", "state.json"), "utf8"));
    expect(state.runs).toHaveLength(1);
    expect(state.runs[0].files).toHaveLength(1);
    const merged = await readFile(join(lathe.dir, "lathe-cdx", "default", state.runs[0].file), "utf8");
    expect(merged).toBe(await readFile(join(lathe.dir, state.runs[0].files[0]) + ".cdxj", "utf8"));
    await checkAnswers();
  });

  it("answers the same after a restart, and regenerates the index of a recovered .open WARC", async () => {
    await lathe.stop();
    // A file left `.open` by a crash, with a stale journal: recovery renames it, its index is rebuilt.
    const [w] = warcFiles(lathe.dir).filter((f) => f.includes("/lathe-"));
    const crashed = w!.replace(/\.warc\.gz$/, "-crashed.warc.gz");
    copyFileSync(w!, crashed + ".open");
    writeFileSync(crashed + ".cdxj.open", "stale\n");
    // …and the sorted runs its lines had gone to, one of them cut off while written.
    const runs = [crashed + ".cdxj.open.run-0", crashed + ".cdxj.open.run-1", `${dirname(crashed)}/.${basename(crashed)}.cdxj.open.run-2.tmp-1-2`];
    for (const r of runs) writeFileSync(r, "stale\n");
    // An index removed (or never written) is read again from its WARC; a stale journal goes.
    const b = warcFiles(lathe.dir).find((f) => f.includes("/coll-b-"))!;
    const bIndex = await readFile(`${b}.cdxj`, "utf8");
    await rm(`${b}.cdxj`);
    writeFileSync(`${b}.cdxj.open`, "stale\n");
    const old = lathe;
    lathe = await startTestLathe({}, { warcDir: old.dir, certsDir: old.certsDir });
    expect(await readFile(`${b}.cdxj`, "utf8")).toBe(bIndex);
    expect(existsSync(`${b}.cdxj.open`)).toBe(false);
    expect(existsSync(crashed + ".cdxj.open")).toBe(false);
    for (const r of runs) expect(existsSync(r), r).toBe(false);
    const want: string[] = [];
    for await (const l of rebuiltLines(crashed)) want.push(l);
    expect(await readFile(crashed + ".cdxj", "utf8")).toBe(want.join(""));
    expect(want.join("")).toContain(`"filename": "${crashed.split("/").pop()}"`);
    await checkAnswers();
  });

  it("400 names the bad parameter; an unknown collection is 404", async () => {
    for (const [query, field] of [
      ["", "url"],
      ["url=x&matchType=nope", "matchType"],
      ["url=x&limit=-1", "limit"],
      ["url=x&sort=closest", "closest"],
      ["url=x&filter=" + encodeURIComponent("status:["), "filter"],
      ["url=x&colection=default", "colection"],
    ] as const) {
      const r = await cdx(query);
      expect(r.status, query).toBe(400);
      const body = JSON.parse(r.text);
      expect(body.error.code).toBe("ERR_BAD_REQUEST");
      expect(body.error.field).toBe(field);
      expect(body.error.message.startsWith(`${field}: `)).toBe(true);
    }
    const nf = await cdx("url=x&collection=nope");
    expect(nf.status).toBe(404);
    expect(JSON.parse(nf.text).error.code).toBe("ERR_NOT_FOUND");
    const doc = await (await fetch(`${lathe.controlUrl}/openapi.json`)).json();
    expect(doc.paths["/cdx"].get.operationId).toBe("queryCdx");
  });
});
