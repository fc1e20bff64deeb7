/**
 * Hybrid compression (issue #24) through a real lathe: a mixed corpus (HTML, CSS, JSON, media
 * types, a gzip-encoded body, a spooled video, generic types with random and with text bytes,
 * a small image, a repeat that becomes a revisit) crawled with `warc.compression: "hybrid"`.
 * Both series read back with warcio, every digest checked; each capture's records in one file;
 * index lines resolve to their record in both kinds of file; each file's CDXJ equals `lathe
 * index` of it; GET /cdx answers from both.
 */
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import { gunzipSync, gzipSync } from "node:zlib";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { indexCommand } from "../../src/cli/index.js";
import { viaProxy } from "../helpers/client.js";
import { startTestLathe, type TestLathe } from "../helpers/lathe.js";
import { captureOf, checkDigests, readWarc, warcFiles, type ReadRecord } from "../helpers/warcs.js";

/** Text (compressible), different for each `tag`: equal payloads would become revisits. */
const text = (n: number, tag: string) => Buffer.from(`<p>${tag}: the quick brown fox jumps over the lazy dog.</p>\n`.repeat(Math.ceil(n / 40))).subarray(0, n);
/** path → [content type, body, content encoding, the series it must land in] */
const CORPUS: Record<string, [string | null, Buffer, string | null, "gz" | "plain"]> = {
  "/index.html": ["text/html; charset=utf-8", text(40_000, "html"), null, "gz"],
  "/site.css": ["text/css", text(30_000, "css"), null, "gz"],
  "/data.json": ["application/json", text(25_000, "json"), null, "gz"],
  "/photo.jpg": ["image/jpeg", randomBytes(100_000), null, "plain"],
  "/logo.png": ["image/png", randomBytes(80_000), null, "plain"],
  "/icon.png": ["image/png", randomBytes(30_000), null, "gz"], // under the threshold: headers weigh
  "/font.woff2": ["font/woff2", randomBytes(70_000), null, "plain"],
  "/drawing.svg": ["image/svg+xml", text(30_000, "svg"), null, "gz"],
  "/api.json.gz": ["application/json", gzipSync(randomBytes(90_000).toString("base64")), "gzip", "plain"],
  "/video.mp4": ["video/mp4", randomBytes(3_000_000), null, "plain"], // spooled to disk
  "/blob.bin": ["application/octet-stream", randomBytes(2_000_000), null, "plain"], // spooled: sample read from disk
  "/notes.bin": ["application/octet-stream", text(200_000, "notes"), null, "gz"],
  "/untyped": [null, randomBytes(100_000), null, "plain"],
};

let lathe: TestLathe;
let origin: Server;
let base = "";
let tmp = "";
let files: string[] = [];
const records = new Map<string, ReadRecord[]>();

beforeAll(async () => {
  tmp = await mkdtemp(join(tmpdir(), "lathe-hybrid-"));
  origin = createServer((req, res) => {
    const path = req.url!.replace(/^\/again/, "");
    const entry = CORPUS[path];
    if (!entry) return void res.writeHead(404).end();
    const [type, body, encoding] = entry;
    const headers: Record<string, string | number> = { "Content-Length": body.length };
    if (type) headers["Content-Type"] = type;
    if (encoding) headers["Content-Encoding"] = encoding;
    res.writeHead(200, headers).end(body);
  });
  await new Promise<void>((r) => origin.listen(0, "127.0.0.1", r));
  base = `http://127.0.0.1:${(origin.address() as { port: number }).port}`;
  lathe = await startTestLathe({ warc: { compression: "hybrid" }, capture: { spoolMemoryBytes: 512 * 1024 } });
  for (const path of Object.keys(CORPUS)) expect((await viaProxy(lathe.proxyUrl, base + path)).status, path).toBe(200);
  // The same photo under another URL: a revisit, which goes to the gzip series.
  expect((await viaProxy(lathe.proxyUrl, `${base}/again/photo.jpg`)).status).toBe(200);
  const want = Object.keys(CORPUS).length + 1;
  for (let i = 0; i < 500 && lathe.archiver.stats.captures < want; i++) await new Promise((r) => setTimeout(r, 10));
  expect(lathe.archiver.stats.captures).toBe(want);
  await lathe.stop();
  files = warcFiles(lathe.dir);
  for (const f of files) records.set(f, await readWarc(f));
}, 60_000);

afterAll(async () => {
  await lathe?.stop().catch(() => {});
  await new Promise((r) => origin?.close(r));
  await rm(tmp, { recursive: true, force: true });
  if (lathe) await rm(lathe.dir, { recursive: true, force: true });
});

const fileOf = (uri: string, type = "response") => [...records].find(([, rs]) => rs.some((r) => r.type === type && r.get("WARC-Target-URI") === uri))?.[0];

describe("a hybrid crawl", () => {
  it("writes one .warc.gz and one .warc file, each opening with its own warcinfo", () => {
    expect(files.map((f) => f.replace(/.*\.warc/, ".warc")).sort()).toEqual([".warc", ".warc.gz"]);
    for (const [f, rs] of records) {
      expect(rs[0]!.type, f).toBe("warcinfo");
      expect(rs[0]!.get("WARC-Filename")).toBe(basename(f));
      expect(rs.filter((r) => r.type === "warcinfo")).toHaveLength(1);
    }
    const plain = files.find((f) => f.endsWith(".warc"))!;
    expect(readFileSync(plain).subarray(0, 9).toString()).toBe("WARC/1.1\r");
  });

  it("routes each capture by type, encoding, size and first bytes; the revisit to the gzip series", () => {
    for (const [path, [, , , series]] of Object.entries(CORPUS)) expect(fileOf(base + path) ?? `${path}: ${[...records.values()].flat().map((r) => `${r.type} ${r.get("WARC-Target-URI")}`).join(", ")}`, path).toMatch(series === "gz" ? /\.warc\.gz$/ : /\.warc$/);
    expect(fileOf(`${base}/again/photo.jpg`, "revisit")).toMatch(/\.warc\.gz$/);
  });

  it("reads back with warcio: every digest right, every payload the origin's, requests beside their responses", () => {
    for (const [f, rs] of records) {
      for (const r of rs) expect(checkDigests(r), `${f} ${r.type} ${r.get("WARC-Target-URI")}`).toEqual([]);
      for (const r of rs) if (r.type !== "warcinfo") expect(r.get("WARC-Warcinfo-ID")).toBe(rs[0]!.get("WARC-Record-ID"));
    }
    for (const [path, [, body]] of Object.entries(CORPUS)) {
      const f = fileOf(base + path)!;
      const { response, request } = captureOf(records.get(f)!, base + path);
      expect(response.body!.equals(body), path).toBe(true);
      expect(request.file).toBe(f);
    }
  });

  it("each file's CDXJ (the live index) equals `lathe index` of it, and every line resolves to its record", async () => {
    for (const f of files) {
      const live = (await readFile(`${f}.cdxj`, "utf8")).split("\n").filter(Boolean);
      const out = join(tmp, basename(f) + ".cdxj");
      expect(await indexCommand(["--cdxj", "--output", out, f], () => {}, { err: () => {}, isTTY: false })).toBe(0);
      expect(live).toEqual((await readFile(out, "utf8")).split("\n").filter(Boolean));
      const bytes = readFileSync(f);
      for (const line of live) {
        const j = JSON.parse(line.slice(line.indexOf("{"))) as Record<string, string>;
        let rec = bytes.subarray(Number(j.offset), Number(j.offset) + Number(j.length));
        if (f.endsWith(".gz")) rec = gunzipSync(rec);
        const head = rec.subarray(0, rec.indexOf("\r\n\r\n")).toString("latin1");
        expect(head, line).toMatch(/^WARC\/1\.1\r\n/);
        expect(head).toContain(`WARC-Target-URI: ${j.url}`);
        const length = Number(/Content-Length: (\d+)/.exec(head)![1]);
        // A plain record's length is its header and block, without the CRLF CRLF after it.
        if (!f.endsWith(".gz")) expect(rec.length).toBe(head.length + 4 + length);
      }
    }
  });
});

describe("GET /cdx over both series", () => {
  let restarted: TestLathe;
  afterAll(async () => {
    await restarted?.stop().catch(() => {});
    if (restarted) await rm(restarted.certsDir, { recursive: true, force: true });
  });

  it("finds captures in the .warc and in the .warc.gz file after a restart", async () => {
    restarted = await startTestLathe({ warc: { compression: "hybrid" } }, { warcDir: lathe.dir });
    for (const [path, series] of [["/video.mp4", /\.warc$/], ["/index.html", /\.warc\.gz$/]] as const) {
      const r = await fetch(`${restarted.controlUrl}/cdx?url=${encodeURIComponent(base + path)}`);
      const lines = (await r.text()).split("\n").filter(Boolean);
      expect(lines, path).toHaveLength(1);
      expect(JSON.parse(lines[0]!.slice(lines[0]!.indexOf("{"))).filename).toMatch(series);
    }
  });
});

describe("hybrid for one collection, set through the control API", () => {
  let other: TestLathe;
  afterAll(async () => {
    await other?.stop().catch(() => {});
    if (other) for (const d of [other.dir, other.certsDir]) await rm(d, { recursive: true, force: true });
  });

  it("a collection created with compression hybrid writes its media to a .warc series; default stays gzip", async () => {
    other = await startTestLathe();
    const made = await fetch(`${other.controlUrl}/api/v1/collections`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ name: "media", compression: "hybrid" }) });
    expect(made.status).toBe(201);
    const host = new URL(base).host;
    const meta = { Host: host, "Warcprox-Meta": '{"lathe": {"collection": "media"}}' };
    for (const path of ["/photo.jpg", "/index.html"]) expect((await viaProxy(other.proxyUrl, base + path, { headers: meta })).status).toBe(200);
    expect((await viaProxy(other.proxyUrl, `${base}/video.mp4`)).status).toBe(200);
    for (let i = 0; i < 300 && other.archiver.stats.captures < 3; i++) await new Promise((r) => setTimeout(r, 10));
    await other.stop();
    const names = warcFiles(other.dir).map((f) => basename(f).replace(/-\d{17}-\d{5}-.*?(\.warc(\.gz)?)$/, "$1"));
    expect(names.sort()).toEqual(["lathe.warc.gz", "media.warc", "media.warc.gz"]);
  });
});
