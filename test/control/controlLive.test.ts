import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startHttpOrigin, type Origin } from "../helpers/origin.js";
import { startTestLathe, type TestLathe } from "../helpers/lathe.js";
import { viaProxy } from "../helpers/client.js";
import { readAllWarcs } from "../helpers/warcs.js";

let origin: Origin;
let lathe: TestLathe;
beforeAll(async () => {
  origin = await startHttpOrigin();
  lathe = await startTestLathe({ control: { token: "s3cret" } });
});
afterAll(async () => {
  await lathe.stop();
  await origin.close();
});

const api = (path: string, init: RequestInit = {}) =>
  fetch(`${lathe.controlUrl}${path}`, { ...init, headers: { Authorization: "Bearer s3cret", "Content-Type": "application/json", ...(init.headers ?? {}) } });

describe("the REST control API of a running lathe", () => {
  it("creates a collection, opens a session, records through it, closes it with a summary", async () => {
    expect((await fetch(`${lathe.controlUrl}/api/v1/collections`)).status).toBe(401);
    const c = await api("/api/v1/collections", { method: "POST", body: JSON.stringify({ name: "crawl-1", warcinfo: { operator: "API test", extra: { "x-job": "42" } } }) });
    expect(c.status).toBe(201);
    const bad = await api("/api/v1/collections", { method: "POST", body: JSON.stringify({ name: "crawl-2", warcinfo: { operator: "a\nb" } }) });
    expect(bad.status).toBe(400);
    expect((await bad.json()).error.message).toMatch(/warcinfo\.operator/);
    const s = await (await api("/api/v1/sessions", { method: "POST", body: JSON.stringify({ collection: "crawl-1" }) })).json();
    expect(s.proxyUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect((await viaProxy(s.proxyUrl, `${origin.url}/text/64`)).body.length).toBe(64);
    const png = new Uint8Array([0x89, 0x50, 0x4e, 0x47, 1, 2, 3]);
    const r = await fetch(`${lathe.controlUrl}/api/v1/resources?collection=crawl-1&kind=view&page=${encodeURIComponent(`${origin.url}/text/64`)}`, {
      method: "POST",
      body: png,
      headers: { Authorization: "Bearer s3cret", "Content-Type": "image/png", "Lathe-Context": JSON.stringify({ mode: "parallel", browser: { name: "Chromium", version: "1" } }) },
    });
    expect(r.status).toBe(201);
    const written = await r.json();
    expect(written.uri).toBe(`urn:view:${origin.url}/text/64`);
    const summary = await (await api(`/api/v1/sessions/${s.id}/close`, { method: "POST" })).json();
    expect(summary.captures).toBe(1);
    const metrics = await (await api("/metrics")).text();
    expect(metrics).toMatch(/^lathe_captures_total \d+$/m);
    expect(await (await fetch(`${lathe.controlUrl}/ca.pem`)).text()).toBe(lathe.ca.caCertPem);
    const recs = await readAllWarcs(lathe.dir);
    const info = recs.find((x) => x.type === "warcinfo" && x.file.includes("/crawl-1-"))!;
    expect(info.block.toString()).toContain("operator: API test\r\n");
    expect(info.block.toString()).toContain("x-job: 42\r\n");
    const res = recs.find((x) => x.get("WARC-Record-ID") === written.recordId)!;
    expect(res.file.endsWith(written.filename)).toBe(true);
  });
});

describe("control API access", () => {
  it("refuses to start on a non-loopback address without a token", async () => {
    await expect(startTestLathe({ control: { host: "0.0.0.0", port: 0 } })).rejects.toThrow(/not a loopback address: set control\.token/);
  });
});
