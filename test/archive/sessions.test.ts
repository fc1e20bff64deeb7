import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Readable } from "node:stream";
import { readdirSync } from "node:fs";
import { startHttpOrigin, type Origin } from "../helpers/origin.js";
import { startTestLathe, type TestLathe } from "../helpers/lathe.js";
import { viaProxy } from "../helpers/client.js";
import { captureOf, checkDigests, readAllWarcs } from "../helpers/warcs.js";

let origin: Origin;
let lathe: TestLathe;
beforeAll(async () => {
  origin = await startHttpOrigin();
  lathe = await startTestLathe();
});
afterAll(async () => {
  await lathe.stop();
  await origin.close();
});

const basic = (u: string, p: string) => `Basic ${Buffer.from(`${u}:${p}`).toString("base64")}`;

describe("collections and sessions", () => {
  it("a session port records into its collection's own series, with its warcinfo", async () => {
    const f = lathe.facade;
    f.createCollection({ name: "news", warcinfo: { operator: "News desk", isPartOf: "news-2026" }, dedup: { policy: "off" } });
    const s = await f.openSession({ collection: "news" });
    expect(s.proxy.port).toBeGreaterThan(0);
    for (const n of [100, 200, 200]) expect((await viaProxy(s.proxyUrl, `${origin.url}/text/${n}`)).body.length).toBe(n);
    // The same session through the main port, selected by its credentials.
    const viaCreds = await viaProxy(lathe.proxyUrl, `${origin.url}/text/300`, { headers: { Host: "x", "Proxy-Authorization": basic(s.username, s.password!) } });
    expect(viaCreds.status).toBe(200);
    const wrong = await viaProxy(lathe.proxyUrl, `${origin.url}/text/301`, { headers: { Host: "x", "Proxy-Authorization": basic(s.username, "nope") } });
    expect(wrong.status).toBe(407);
    expect(wrong.rawHeaders).toContain('Basic realm="lathe"');
    // Unrelated traffic on the main port goes to the default collection.
    await viaProxy(lathe.proxyUrl, `${origin.url}/text/400`);

    const summary = await f.closeSession(s.id);
    expect(summary).toMatchObject({ id: s.id, collection: "news", captures: 4, revisits: 0, failed: 0 });
    await new Promise((r) => setTimeout(r, 100)); // the default collection's capture, archived just after its response
    await lathe.writers.get("lathe")!.rollover();
    // Its files are closed and renamed by the time the summary comes back.
    expect(readdirSync(lathe.dir).filter((x) => x.startsWith("news-") && x.endsWith(".open"))).toEqual([]);
    const recs = await readAllWarcs(lathe.dir);
    for (const r of recs) expect(checkDigests(r)).toEqual([]);
    const newsRecs = recs.filter((r) => summary.files.some((file) => r.file.endsWith(file)));
    expect(newsRecs[0]!.type).toBe("warcinfo");
    expect(newsRecs[0]!.block.toString()).toContain("operator: News desk\r\nisPartOf: news-2026\r\n");
    expect(newsRecs.filter((r) => r.type === "response").length).toBe(4);
    expect(summary.bytes).toBeGreaterThan(0);
    expect(summary.files.every((file) => file.startsWith("news-"))).toBe(true);
    const def = captureOf(recs, `${origin.url}/text/400`).response;
    expect(def.file).toMatch(/\/lathe-/);
    // A closed session's port and credentials no longer work.
    const after = await viaProxy(s.proxyUrl, `${origin.url}/text/10`).catch((e: Error) => e);
    expect(after).toBeInstanceOf(Error);
  });

  it("changing a collection's metadata starts a new file whose warcinfo tells the truth", async () => {
    const f = lathe.facade;
    f.createCollection({ name: "meta", warcinfo: { description: "first" } });
    const s = await f.openSession({ collection: "meta" });
    await viaProxy(s.proxyUrl, `${origin.url}/text/11`);
    await new Promise((r) => setTimeout(r, 100));
    await f.updateCollection("meta", { warcinfo: { description: "second" } });
    await viaProxy(s.proxyUrl, `${origin.url}/text/12`);
    const summary = await f.closeSession(s.id);
    expect(summary.files.length).toBe(2);
    const recs = await readAllWarcs(lathe.dir);
    const infos = recs.filter((r) => r.type === "warcinfo" && summary.files.some((file) => r.file.endsWith(file)));
    expect(infos.map((r) => /description: (\w+)/.exec(r.block.toString())![1]).sort()).toEqual(["first", "second"]);
  });

  it("writes an associated resource linked to its page, and refuses an http URI", async () => {
    const f = lathe.facade;
    await viaProxy(lathe.proxyUrl, `${origin.url}/text/77`);
    const page = `${origin.url}/text/77`;
    const png = Buffer.from("89504e470d0a1a0a" + "00".repeat(100), "hex");
    const w = await f.writeResource({ collection: "default", kind: "view", page, contentType: "image/png", body: Readable.from([png]), context: { mode: "parallel", browser: { name: "Chromium" } } });
    expect(w.uri).toBe(`urn:view:${page}`);
    await expect(f.writeResource({ collection: "default", uri: "https://example.com/x.png", contentType: "image/png", body: Readable.from([png]) })).rejects.toThrow(/never gets an http/);
    await lathe.writers.get("lathe")!.rollover();
    const recs = await readAllWarcs(lathe.dir);
    const pageRec = captureOf(recs, page).response;
    const res = recs.find((r) => r.get("WARC-Record-ID") === w.recordId)!;
    expect(res.type).toBe("resource");
    expect(res.get("WARC-Concurrent-To")).toBe(pageRec.get("WARC-Record-ID"));
    expect(res.get("WARC-Date")).toBe(pageRec.get("WARC-Date"));
    const meta = JSON.parse(res.get("WARC-JSON-Metadata")!);
    expect(Object.keys(meta)).toEqual(["mode", "capturedAt", "browser", "page"]);
    expect(res.block.equals(png)).toBe(true);
  });
});
