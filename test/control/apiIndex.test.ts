/**
 * The URL the start-up banner prints for the control API answers: an index of the routes, taken
 * from /openapi.json, behind the same token rule as the other /api/v1 routes.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { controlBanner } from "../../src/cli/serve.js";
import { startTestLathe, type TestLathe } from "../helpers/lathe.js";

/** The control API URL exactly as `lathe serve` prints it at start-up. */
function bannerUrl(lathe: TestLathe): string {
  const m = /^control API: (\S+)/m.exec(controlBanner(lathe.controlUrl!));
  expect(m, "the banner names the control API").not.toBeNull();
  return m![1]!;
}

type Index = { title: string; version: string; openapi: string; routes: Array<{ method: string; path: string; summary: string }> };

const TOKEN = "index-token";
/** As a newcomer starts it: no token, loopback only. */
let lathe: TestLathe;
/** With a control token. */
let guarded: TestLathe;
beforeAll(async () => {
  [lathe, guarded] = await Promise.all([startTestLathe(), startTestLathe({ control: { token: TOKEN } })]);
});
afterAll(async () => {
  await Promise.all([lathe.stop(), guarded.stop()]);
});

describe("the control API URL of the start-up banner (no token: loopback)", () => {

  it("is /api/v1/ and answers 200 with the routes, among them /api/v1/collections", async () => {
    const url = bannerUrl(lathe);
    expect(url).toBe(`${lathe.controlUrl}/api/v1/`);
    const res = await fetch(url);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("application/json; charset=utf-8");
    const index = (await res.json()) as Index;
    expect(index.version).toBe(lathe.facade.version);
    expect(index.routes).toContainEqual({ method: "GET", path: "/api/v1/collections", summary: "List collections" });
    expect(index.routes).toContainEqual({ method: "POST", path: "/api/v1/sessions", summary: "Open a recording session" });
    expect(index.routes.some((r) => r.path === "/cdx")).toBe(true);
  });

  it("lists exactly the operations of /openapi.json (method, path, summary), and links to it", async () => {
    const index = (await (await fetch(bannerUrl(lathe))).json()) as Index;
    expect(index.openapi).toBe("/openapi.json");
    const docRes = await fetch(new URL(index.openapi, lathe.controlUrl!));
    expect(docRes.status).toBe(200);
    const doc = (await docRes.json()) as { paths: Record<string, Record<string, { summary: string }>> };
    for (const r of index.routes) {
      expect(doc.paths[r.path], `${r.path} is in openapi.json`).toBeDefined();
      expect(doc.paths[r.path]![r.method.toLowerCase()]?.summary, `${r.method} ${r.path}`).toBe(r.summary);
    }
    const documented = Object.entries(doc.paths).flatMap(([p, item]) => Object.keys(item).map((m) => `${m.toUpperCase()} ${p}`));
    expect(index.routes.map((r) => `${r.method} ${r.path}`)).toEqual(documented);
    expect(documented).toContain("GET /api/v1/");
  });

  it("answers the same without the trailing slash", async () => {
    const withSlash = await (await fetch(bannerUrl(lathe))).json();
    const res = await fetch(`${lathe.controlUrl}/api/v1`);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual(withSlash);
  });
});

describe("the control API URL of the start-up banner, with a token", () => {
  it("requires the token, like every /api/v1 route", async () => {
    const url = bannerUrl(guarded);
    expect((await fetch(url)).status).toBe(401);
    expect((await fetch(url, { headers: { Authorization: "Bearer wrong" } })).status).toBe(401);
    const res = await fetch(url, { headers: { Authorization: `Bearer ${TOKEN}` } });
    expect(res.status).toBe(200);
    expect(((await res.json()) as Index).routes).toContainEqual({ method: "GET", path: "/api/v1/collections", summary: "List collections" });
  });
});
