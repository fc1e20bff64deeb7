/**
 * `GET /api/v1/sessions/{id}/wacz` and `GET /api/v1/collections/{name}/wacz` on a real
 * in-process lathe (issue #23): a session still open is refused (409), a closed one downloads —
 * Content-Length, application/wacz, every hash right, its pages only; a collection downloads
 * with all its pages; unknown names 404, nothing closed yet 409, a truncated WARC 422 naming it;
 * and the download streams: a client that stops reading holds the server to a few buffers.
 */
import { createHash } from "node:crypto";
import { statSync, truncateSync, writeFileSync } from "node:fs";
import { mkdtemp, readdir, rm } from "node:fs/promises";
import http from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { viaProxy } from "../helpers/client.js";
import { startTestLathe, type TestLathe } from "../helpers/lathe.js";
import { startHttpOrigin, type Origin } from "../helpers/origin.js";
import { checkWacz } from "../helpers/wacz.js";
import { warcFiles } from "../helpers/warcs.js";

let lathe: TestLathe;
let origin: Origin;
let tmp = "";
let sessionId = "";
const before: string[] = [];
const during: string[] = [];

const api = (path: string, init: RequestInit = {}) => fetch(`${lathe.controlUrl}${path}`, init);
const navigate = (proxy: string, url: string) => viaProxy(proxy, url, { headers: { Host: new URL(url).host, "Sec-Fetch-Dest": "document", "Sec-Fetch-Mode": "navigate" } });
const meta = (collection: string) => ({ "Warcprox-Meta": JSON.stringify({ lathe: { collection } }) });

async function download(path: string, file: string): Promise<Response> {
  const res = await api(path);
  if (res.status === 200) writeFileSync(file, Buffer.from(await res.arrayBuffer()));
  return res;
}

beforeAll(async () => {
  tmp = await mkdtemp(join(tmpdir(), "lathe-wacz-api-"));
  origin = await startHttpOrigin();
  lathe = await startTestLathe();
  before.push(`${origin.url}/text/900?before=1`);
  expect((await navigate(lathe.proxyUrl, before[0]!)).status).toBe(200);
  // Session pages are those captured while it was open (a second's slack for whole-second dates).
  await new Promise((r) => setTimeout(r, 1500));
  const opened = (await (await api("/api/v1/sessions", { method: "POST" })).json()) as { id: string; proxyUrl: string };
  sessionId = opened.id;
  for (const n of [1, 2]) {
    during.push(`${origin.url}/text/${910 + n}?during=${n}`);
    expect((await navigate(opened.proxyUrl, during.at(-1)!)).status).toBe(200);
  }
});

afterAll(async () => {
  await lathe?.stop().catch(() => {});
  await origin?.close();
  await rm(tmp, { recursive: true, force: true });
  if (lathe) await rm(lathe.dir, { recursive: true, force: true });
});

describe("WACZ downloads from the control API", () => {
  it("refuses a session still open (409), then gives the closed session's WACZ with its pages only", async () => {
    const open = await api(`/api/v1/sessions/${sessionId}/wacz`);
    expect(open.status).toBe(409);
    expect(((await open.json()) as { error: { code: string; message: string } }).error).toMatchObject({ code: "ERR_CONFLICT", message: expect.stringContaining("still open") });
    expect((await api(`/api/v1/sessions/${sessionId}/close`, { method: "POST" })).status).toBe(200);
    const file = join(tmp, "session.wacz");
    const res = await download(`/api/v1/sessions/${sessionId}/wacz`, file);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("application/wacz");
    expect(res.headers.get("content-disposition")).toBe(`attachment; filename="${sessionId}.wacz"`);
    const { wacz, problems } = await checkWacz(file);
    expect(problems).toEqual([]);
    expect(Number(res.headers.get("content-length"))).toBe(statSync(file).size);
    expect(wacz.pages.map((p) => p.url)).toEqual(during);
    expect(wacz.datapackage.title).toBe(`session ${sessionId} (collection default)`);
  });

  it("gives a collection's WACZ with every page it holds", async () => {
    const file = join(tmp, "default.wacz");
    const res = await download("/api/v1/collections/default/wacz", file);
    expect(res.status).toBe(200);
    const { wacz, problems } = await checkWacz(file);
    expect(problems).toEqual([]);
    expect(wacz.pages.map((p) => p.url)).toEqual([...before, ...during]);
    expect(wacz.resolved).toBe(wacz.lines.length);
  });

  it("answers 404 for an unknown collection or session, 409 when nothing is closed yet", async () => {
    for (const path of ["/api/v1/collections/nope/wacz", "/api/v1/sessions/s-nope/wacz"]) {
      const res = await api(path);
      expect(res.status, path).toBe(404);
      expect(((await res.json()) as { error: { code: string } }).error.code).toBe("ERR_NOT_FOUND");
    }
    expect((await api("/api/v1/collections", { method: "POST", headers: { "content-type": "application/json" }, body: '{"name": "fresh"}' })).status).toBe(201);
    expect((await viaProxy(lathe.proxyUrl, `${origin.url}/text/950`, { headers: { Host: new URL(origin.url).host, ...meta("fresh") } })).status).toBe(200);
    // The capture is written once the client has its answer: wait for its (open) file.
    for (let i = 0; i < 100 && !(await readdir(lathe.dir)).some((n) => n.startsWith("fresh-") && n.endsWith(".open")); i++) await new Promise((r) => setTimeout(r, 20));
    const res = await api("/api/v1/collections/fresh/wacz");
    expect(res.status).toBe(409);
    expect(((await res.json()) as { error: { message: string } }).error.message).toMatch(/no closed WARC file.*still being written/);
  });

  it("answers 422 naming the file when a WARC of the collection is truncated, and leaves no temporary file", async () => {
    expect((await api("/api/v1/collections", { method: "POST", headers: { "content-type": "application/json" }, body: '{"name": "broken"}' })).status).toBe(201);
    expect((await viaProxy(lathe.proxyUrl, `${origin.url}/bytes/40000`, { headers: { Host: new URL(origin.url).host, ...meta("broken") } })).status).toBe(200);
    // A change of metadata closes the collection's current file.
    expect((await api("/api/v1/collections/broken", { method: "PATCH", headers: { "content-type": "application/json" }, body: '{"warcinfo": {"description": "closed"}}' })).status).toBe(200);
    const file = warcFiles(lathe.dir).find((f) => f.includes("/broken-"))!;
    truncateSync(file, 20_000);
    const tmpBefore = await tempDirs();
    const res = await api("/api/v1/collections/broken/wacz");
    expect(res.status).toBe(422);
    const e = ((await res.json()) as { error: { code: string; message: string } }).error;
    expect(e.code).toBe("ERR_UNPROCESSABLE");
    expect(e.message).toContain(file);
    expect(e.message).toMatch(/truncated/);
    expect(await tempDirs()).toEqual(tmpBefore);
  });

  it("streams: a client that stops reading holds the server to a few buffers, then gets every byte", async () => {
    expect((await api("/api/v1/collections", { method: "POST", headers: { "content-type": "application/json" }, body: '{"name": "big"}' })).status).toBe(201);
    const written = lathe.archiver.stats.captures;
    for (const n of [1, 2, 3]) expect((await viaProxy(lathe.proxyUrl, `${origin.url}/bytes/${24_000_000 + n}`, { headers: { Host: new URL(origin.url).host, ...meta("big") } })).status).toBe(200);
    // In rollover durability the client has its answer before the records are written: the
    // file is closed only once all three are in it.
    await expect.poll(() => lathe.archiver.stats.captures, { timeout: 20_000 }).toBe(written + 3);
    expect((await api("/api/v1/collections/big", { method: "PATCH", headers: { "content-type": "application/json" }, body: '{"warcinfo": {"description": "closed"}}' })).status).toBe(200);
    const url = new URL("/api/v1/collections/big/wacz", lathe.controlUrl!);
    const baseline = process.memoryUsage().arrayBuffers;
    const { length, received, digest, pausedGrowth } = await new Promise<{ length: number; received: number; digest: string; pausedGrowth: number }>((resolve, reject) => {
      http
        .get(url, (res) => {
          expect(res.statusCode).toBe(200);
          const hash = createHash("sha256");
          let received = 0;
          let paused = false;
          let pausedGrowth = Number.NaN;
          res.on("data", (c: Buffer) => {
            hash.update(c);
            received += c.length;
            if (!paused && received > 4_000_000) {
              paused = true;
              res.pause();
              setTimeout(() => {
                pausedGrowth = process.memoryUsage().arrayBuffers - baseline;
                res.resume();
              }, 1500);
            }
          });
          res.on("end", () => resolve({ length: Number(res.headers["content-length"]), received, digest: hash.digest("hex"), pausedGrowth }));
          res.on("error", reject);
        })
        .on("error", reject);
    });
    expect(received).toBe(length);
    expect(length).toBeGreaterThan(72_000_000);
    expect(digest).toMatch(/^[0-9a-f]{64}$/);
    // The 72 MB of WARCs never sit in memory: the writer's ring and the sockets' buffers do.
    if (process.env.LATHE_TEST_LOG) console.log(`paused: arrayBuffers +${(pausedGrowth / 1e6).toFixed(1)} MB`);
    expect(pausedGrowth, "measured while paused").not.toBeNaN();
    expect(pausedGrowth).toBeLessThan(32 * 1024 * 1024);
  }, 120_000);

  it("documents both routes in /openapi.json", async () => {
    const doc = (await (await api("/openapi.json")).json()) as { paths: Record<string, { get?: { responses: Record<string, { content?: Record<string, unknown> }> } }> };
    for (const p of ["/api/v1/collections/{name}/wacz", "/api/v1/sessions/{id}/wacz"]) {
      const r = doc.paths[p]?.get?.responses;
      expect(r, p).toBeDefined();
      expect(Object.keys(r!["200"]!.content!)).toEqual(["application/wacz"]);
      expect(Object.keys(r!)).toEqual(expect.arrayContaining(["404", "409", "422"]));
    }
  });
});

/** The packager's temporary directories (the API's go to the OS's temp directory). */
async function tempDirs(): Promise<string[]> {
  return (await readdir(tmpdir())).filter((n) => n.startsWith(".lathe-wacz-")).sort();
}
