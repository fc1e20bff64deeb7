/**
 * The live CDXJ index (issue "CDXJ index"): a running lathe records GETs, POST/PUT (form, JSON,
 * binary), DELETE, a 404, an HTTPS capture (with its TLS metadata record), a truncated body,
 * revisits, pushed screenshots and WARCPROX_WRITE_RECORD records. While the file is open its
 * lines are answered by GET /cdx from memory and journalled in `.cdxj.open`; once closed, every
 * `NAME.warc.gz.cdxj` equals `lathe index --cdxj NAME.warc.gz` byte for byte, and each line
 * points at the right gzip member (checked with warcio).
 */
import { existsSync, readdirSync } from "node:fs";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ProxyAgent, fetch as undiciFetch } from "undici";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { indexCommand } from "../../src/cli/index.js";
import { originCerts } from "../helpers/certs.js";
import { viaProxy } from "../helpers/client.js";
import { startTestLathe, type TestLathe } from "../helpers/lathe.js";
import { startHttpOrigin, startHttpsOrigin, type Origin } from "../helpers/origin.js";
import { readWarc, warcFiles } from "../helpers/warcs.js";

let lathe: TestLathe;
let origin: Origin;
let secure: Origin;
let tmp = "";
let openLines: string[] = [];
let journal = "";

const cdx = async (query: string): Promise<{ status: number; text: string }> => {
  const r = await fetch(`${lathe.controlUrl}/cdx?${query}`);
  return { status: r.status, text: await r.text() };
};

beforeAll(async () => {
  tmp = await mkdtemp(join(tmpdir(), "lathe-live-index-"));
  const certs = originCerts();
  origin = await startHttpOrigin();
  secure = await startHttpsOrigin(certs);
  lathe = await startTestLathe({ upstream: { caFile: certs.caFile }, capture: { maxBodyBytes: 5000 }, dedup: { policy: "digest" } });
  const o = origin.url;
  const host = new URL(o).host;
  const p = lathe.proxyUrl;
  expect((await viaProxy(p, `${o}/text/500?b=2&a=1`)).status).toBe(200);
  expect((await viaProxy(p, `${o}/text/500?b=2&a=1`)).status).toBe(200); // revisit (same URL)
  expect((await viaProxy(p, `${o}/text/500?other`)).status).toBe(200); // revisit (other URL)
  expect((await viaProxy(p, `${o}/chunked/3000`)).status).toBe(200);
  expect((await viaProxy(p, `${o}/bytes/20000`)).status).toBe(200); // cut at 5000: WARC-Truncated
  expect((await viaProxy(p, `${o}/nothing-here`)).status).toBe(404);
  const post = (path: string, method: string, type: string | null, body: string | Buffer) =>
    viaProxy(p, `${o}${path}`, { method, headers: { Host: host, ...(type ? { "Content-Type": type } : {}) }, body });
  expect((await post("/echo?src=form", "POST", "application/x-www-form-urlencoded", "name=Lathe+Tester&comment=hello%20world")).status).toBe(200);
  expect((await post("/echo", "PUT", "application/json", '{"a":[1,2],"b":{"c":"d é"}}')).status).toBe(200);
  expect((await post("/echo/bin", "POST", "application/octet-stream", Buffer.from([0, 1, 2, 250, 255]))).status).toBe(200);
  expect((await post("/echo/gone", "DELETE", null, "")).status).toBe(200);
  const agent = new ProxyAgent({ uri: p, requestTls: { ca: lathe.ca.caCertPem } });
  const r = await undiciFetch(`${secure.url}/text/300`, { dispatcher: agent });
  expect(r.status).toBe(200);
  await r.arrayBuffer();
  await agent.close();
  const page = `${o}/text/500?b=2&a=1`;
  for (const kind of ["view", "thumbnail", "fullPage"]) {
    const res = await fetch(`${lathe.controlUrl}/api/v1/resources?kind=${kind}&page=${encodeURIComponent(page)}`, {
      method: "POST",
      body: new Uint8Array([0x89, 0x50, 0x4e, 0x47, kind.length]),
      headers: { "Content-Type": kind === "thumbnail" ? "image/jpeg" : "image/png" },
    });
    expect(res.status).toBe(201);
  }
  // A WARCPROX_WRITE_RECORD resource (brozzler's screenshot: form).
  const wr = await viaProxy(p, `screenshot:${page}`, { method: "WARCPROX_WRITE_RECORD", headers: { Host: host, "Content-Type": "image/png", "WARC-Type": "resource" }, body: Buffer.from("png bytes") });
  expect(wr.status).toBe(204);
  // While open: the lines are in memory and in the journal.
  // Captures are written after the client has its answer; the journal behind the writer's queue.
  for (let i = 0; i < 200 && lathe.archiver.stats.captures + lathe.archiver.stats.failed < 11; i++) await new Promise((r) => setTimeout(r, 10));
  expect(lathe.archiver.stats.captures).toBe(11);
  await new Promise((r) => setTimeout(r, 200));
  const open = readdirSync(lathe.dir).filter((n) => n.endsWith(".cdxj.open"));
  expect(open.length).toBe(1);
  journal = await readFile(join(lathe.dir, open[0]!), "utf8");
  openLines = (await cdx(`url=${encodeURIComponent(`${o}/`)}&matchType=prefix`)).text.split("\n").filter(Boolean);
  await lathe.stop();
});

afterAll(async () => {
  await lathe?.stop().catch(() => {});
  await origin?.close();
  await secure?.close();
  await rm(tmp, { recursive: true, force: true });
  if (lathe) await rm(lathe.dir, { recursive: true, force: true });
});

const json = (l: string) => JSON.parse(l.slice(l.indexOf("{"))) as Record<string, string>;

describe("live CDXJ index", () => {
  it("equals `lathe index --cdxj` of each closed file, byte for byte, and leaves no journal", async () => {
    const warcs = warcFiles(lathe.dir);
    expect(warcs.length).toBeGreaterThan(0);
    for (const w of warcs) {
      const out = join(tmp, "rebuilt.cdxj");
      const code = await indexCommand(["--cdxj", "--output", out, w], () => {}, { err: () => {}, isTTY: false });
      expect(code).toBe(0);
      const live = await readFile(`${w}.cdxj`, "utf8");
      expect(live).toBe(await readFile(out, "utf8"));
      expect(live.length).toBeGreaterThan(0);
    }
    expect(readdirSync(lathe.dir).filter((n) => n.endsWith(".open"))).toEqual([]);
  });

  it("answered the open file's lines from memory, and journalled every one", async () => {
    const [w] = warcFiles(lathe.dir);
    const closed = (await readFile(`${w}.cdxj`, "utf8")).split("\n").filter(Boolean);
    const o = origin.url;
    const http = closed.filter((l) => json(l).url?.startsWith(`${o}/`));
    expect(openLines).toEqual(http);
    for (const l of closed) expect(journal).toContain(l + "\n");
  });

  it("has the right fields: POST/PUT keys, revisits, resources, TLS metadata, truncation", async () => {
    const lines = (await Promise.all(warcFiles(lathe.dir).map(async (w) => (await readFile(`${w}.cdxj`, "utf8")).split("\n")))).flat().filter(Boolean);
    const o = origin.url;
    const by = (pred: (j: Record<string, string>, l: string) => boolean) => lines.filter((l) => pred(json(l), l));
    const form = by((j) => j.url === `${o}/echo?src=form`);
    expect(form).toHaveLength(1);
    expect(form[0]).toMatch(/^1,0,0,127:\d+\)\/echo\?__wb_method=post&comment=hello%20world&name=lathe%20tester&src=form /);
    expect(json(form[0]!)).toMatchObject({ requestBody: "name=Lathe Tester&comment=hello world", method: "POST", status: "200" });
    const put = by((j) => j.url === `${o}/echo`)[0]!;
    expect(put).toMatch(/\)\/echo\?__wb_method=put&a=1&a\.2_=2&c=d\+%c3%a9 /);
    expect(json(put).method).toBe("PUT");
    const bin = by((j) => j.url === `${o}/echo/bin`)[0]!;
    expect(json(bin).requestBody).toBe("__wb_post_data=AAEC+v8=");
    const del = by((j) => j.url === `${o}/echo/gone`)[0]!;
    expect(del).toMatch(/\)\/echo\/gone \d{14} /);
    expect(json(del).method).toBeUndefined();
    const revisits = by((j) => j.mime === "warc/revisit");
    expect(revisits.length).toBe(2);
    for (const r of revisits) expect(json(r)).toMatchObject({ status: "200", digest: json(by((j) => j.url === `${o}/text/500?b=2&a=1` && j.mime === "text/html")[0]!).digest });
    expect(by((j) => j.url === `${o}/nothing-here`)[0]).toMatch(/"status": "404"/);
    const page = `${o}/text/500?b=2&a=1`;
    const view = by((j) => j.url === `urn:view:${page}`)[0]!;
    expect(view.startsWith(`urn:view:http://127.0.0.1:${origin.port}/text/500?a=1&b=2 `)).toBe(true);
    expect(json(view)).toMatchObject({ mime: "image/png" });
    expect(json(view).status).toBeUndefined();
    expect(json(by((j) => j.url === `urn:thumbnail:${page}`)[0]!).mime).toBe("image/jpeg");
    expect(by((j) => j.url === `urn:fullPage:${page}`)).toHaveLength(1);
    expect(by((j) => j.url === `screenshot:${page}`)).toHaveLength(1);
    expect(by((j) => j.url === `${secure.url}/text/300`)[0]).toMatch(/"mime": "text\/html", "status": "200"/);
    expect(by((j) => j.url === `${o}/bytes/20000`)).toHaveLength(1);
  });

  it("points every line at its gzip member (read back with warcio)", async () => {
    for (const w of warcFiles(lathe.dir)) {
      const records = await readWarc(w);
      const byId = new Map(records.map((r) => [r.get("WARC-Record-ID"), r]));
      expect(byId.size).toBe(records.length);
      const { openSync, readSync, closeSync } = await import("node:fs");
      const { gunzipSync } = await import("node:zlib");
      const fd = openSync(w, "r");
      try {
        for (const l of (await readFile(`${w}.cdxj`, "utf8")).split("\n").filter(Boolean)) {
          const j = json(l);
          const buf = Buffer.alloc(Number(j.length));
          readSync(fd, buf, 0, buf.length, Number(j.offset));
          const text = gunzipSync(buf).toString("latin1");
          expect(text.startsWith("WARC/1.1\r\n")).toBe(true);
          const uri = /\r\nWARC-Target-URI: ([^\r]*)\r\n/.exec(text)![1];
          expect(uri).toBe(j.url);
          const id = /\r\nWARC-Record-ID: ([^\r]*)\r\n/.exec(text)![1];
          const rec = byId.get(id);
          expect(rec, id).toBeDefined();
          expect(["response", "revisit", "resource", "metadata"]).toContain(rec!.type);
          expect(j.filename).toBe(w.split("/").pop());
        }
      } finally {
        closeSync(fd);
      }
    }
  });

  it("indexes the TLS metadata record of the HTTPS capture", async () => {
    const lines = (await Promise.all(warcFiles(lathe.dir).map(async (w) => (await readFile(`${w}.cdxj`, "utf8")).split("\n")))).flat().filter(Boolean);
    const all = (await Promise.all(warcFiles(lathe.dir).map((w) => readWarc(w)))).flat();
    const meta = all.filter((r) => r.type === "metadata");
    expect(meta.length).toBeGreaterThan(0);
    for (const m of meta) {
      const indexed = m.get("Content-Type") !== "application/warc-fields";
      expect(lines.some((l) => l.includes(`"url": ${JSON.stringify(m.get("WARC-Target-URI"))}`) && !l.includes('"status"'))).toBe(indexed);
    }
    expect(existsSync(join(lathe.dir, "lathe-cdx", "files.tsv"))).toBe(true);
  });
});
