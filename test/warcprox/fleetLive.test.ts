/** Two lathes in this process sharing one PostgreSQL: Warcprox-Meta stats and limits through real proxies. */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import http from "node:http";
import { startHttpOrigin, type Origin } from "../helpers/origin.js";
import { startTestLathe, type TestLathe } from "../helpers/lathe.js";
import { type ClientResponse, rawExchange, viaProxy } from "../helpers/client.js";
import { freePort, startPostgres, type PostgresServer } from "../helpers/postgres.js";
import { eventually, registerInstances } from "../helpers/fleet.js";
import { readAllWarcs } from "../helpers/warcs.js";

let server: PostgresServer;
let dbName: string;
let origin: Origin;
let a: TestLathe;
let b: TestLathe;

beforeAll(async () => {
  server = await startPostgres();
  const url = await server.createDatabase();
  dbName = new URL(url).pathname.slice(1);
  origin = await startHttpOrigin();
  a = await startTestLathe({ shared: { postgresql: url, instanceId: "lathe-a" } });
  b = await startTestLathe({ shared: { postgresql: url, instanceId: "lathe-b" } });
  await registerInstances(server, dbName, ["lathe-a", "lathe-b"]);
});
afterAll(async () => {
  await a?.stop();
  await b?.stop();
  await origin?.close();
  server?.destroy();
});

const header = (r: ClientResponse, name: string) => r.rawHeaders[r.rawHeaders.findIndex((x) => x.toLowerCase() === name) + 1];
const reservations = async () => Number((await server.query<{ n: string }>("SELECT count(*) AS n FROM stats_reservations", [], dbName))[0]!.n);

/** `GET /lathe/stats/<bucket>` on a lathe's proxy port: status and JSON. */
async function statsOf(l: TestLathe, bucket: string): Promise<{ status: number; json: Record<string, any> }> {
  const raw = await rawExchange(l.proxyUrl, `GET /lathe/stats/${encodeURIComponent(bucket)} HTTP/1.1\r\nHost: p\r\nConnection: close\r\n\r\n`);
  return { status: Number(raw.slice(9, 12)), json: JSON.parse(raw.slice(raw.indexOf("\r\n\r\n") + 4)) };
}

/** `GET /api/v1/status` on a lathe's control port. */
function controlStatus(l: TestLathe): Promise<Record<string, any>> {
  return new Promise((resolve, reject) => {
    http.get(`${l.controlUrl}/api/v1/status`, (res) => {
      let body = "";
      res.on("data", (d) => (body += d));
      res.on("end", () => resolve(JSON.parse(body)));
    }).on("error", reject);
  });
}

/** `n` concurrent GETs of `path`, alternating between the two lathes. */
function acrossFleet(n: number, path: (i: number) => string, meta: unknown): Promise<ClientResponse[]> {
  return Promise.all(
    Array.from({ length: n }, (_, i) => viaProxy((i % 2 ? a : b).proxyUrl, `${origin.url}${path(i)}`, { headers: { Host: "x", "Warcprox-Meta": JSON.stringify(meta) }, agent: new http.Agent() })),
  );
}

describe("two lathes sharing one PostgreSQL: Warcprox-Meta stats and limits", () => {
  it("a limit of 10 lets exactly 10 of 2 × 16 concurrent clients through; the rest get 420 with the Warcprox-Meta answer", async () => {
    const results = await acrossFleet(32, (i) => `/slow/5?i=${i}`, { stats: { buckets: ["fleet-job"] }, limits: { "fleet-job/total/urls": 10 } });
    expect(results.filter((r) => r.status === 200)).toHaveLength(10);
    const limited = results.filter((r) => r.status === 420);
    expect(limited).toHaveLength(22);
    for (const r of limited) {
      expect(r.statusMessage).toBe("Reached limit");
      expect(r.body.toString()).toBe("request rejected by warcprox: reached limit fleet-job/total/urls=10\n");
      const h = JSON.parse(header(r, "warcprox-meta")!);
      expect(h["reached-limit"]).toEqual({ "fleet-job/total/urls": 10 });
      expect(h.stats["fleet-job"]).toMatchObject({ bucket: "fleet-job", total: { urls: 10 } });
    }
    expect(await reservations()).toBe(0);
  });

  it("each lathe shows the fleet's buckets: /lathe/stats and /status on the proxy port, statsBuckets of /api/v1/status", async () => {
    for (const l of [a, b]) {
      const s = await statsOf(l, "fleet-job");
      expect(s.status).toBe(200);
      expect(s.json).toMatchObject({ bucket: "fleet-job", total: { urls: 10 } });
      expect(s.json.new.urls + s.json.revisit.urls).toBe(10);
      const status = await controlStatus(l);
      expect(status.statsBuckets["fleet-job"]).toEqual(s.json);
      expect(status.statsBuckets["__all__"]!.total.urls).toBeGreaterThanOrEqual(10);
      const raw = await rawExchange(l.proxyUrl, "GET /status HTTP/1.1\r\nHost: p\r\nConnection: close\r\n\r\n");
      const warcproxStatus = JSON.parse(raw.slice(raw.indexOf("\r\n\r\n") + 4));
      expect(warcproxStatus.lathe.statsBuckets["fleet-job"]).toEqual(s.json);
    }
    expect((await statsOf(b, "no-such-bucket")).status).toBe(404);
  });

  it("a soft limit answers 430 across the fleet, exactly", async () => {
    const results = await acrossFleet(16, (i) => `/bytes/${100 + i}`, { stats: { buckets: ["fleet-soft"] }, "soft-limits": { "fleet-soft/total/urls": 5 } });
    expect(results.filter((r) => r.status === 200)).toHaveLength(5);
    const soft = results.filter((r) => r.status === 430);
    expect(soft).toHaveLength(11);
    expect(soft[0]!.statusMessage).toBe("Reached soft limit");
    expect(soft[0]!.body.toString()).toBe("request rejected by warcprox: reached soft limit fleet-soft/total/urls=5\n");
    expect(JSON.parse(header(soft[0]!, "warcprox-meta")!)["reached-soft-limit"]).toEqual({ "fleet-soft/total/urls": 5 });
  });

  it("a failed upstream (connection refused) releases its reservation fleet-wide", async () => {
    const meta = JSON.stringify({ stats: { buckets: ["fleet-refused"] }, limits: { "fleet-refused/total/urls": 1 } });
    const closed = await freePort();
    const r = await viaProxy(a.proxyUrl, `http://127.0.0.1:${closed}/nothing`, { headers: { Host: "x", "Warcprox-Meta": meta } });
    expect(r.status).toBe(502);
    expect(await eventually(async () => (await reservations()) === 0)).toBe(true);
    const ok = await viaProxy(b.proxyUrl, `${origin.url}/text/10`, { headers: { Host: "x", "Warcprox-Meta": meta } });
    expect(ok.status).toBe(200);
    // Counted once the capture is archived, just after the client got its response.
    expect(await eventually(async () => (await statsOf(a, "fleet-refused")).json.total?.urls === 1)).toBe(true);
  });

  it("PostgreSQL stopped: limited requests get 503 naming the store; others are recorded and their stats catch up when it is back", async () => {
    const limited = { "warc-prefix": "away", stats: { buckets: ["fleet-away"] }, limits: { "fleet-away/total/urls": 1000 } };
    const statsOnly = { "warc-prefix": "away", stats: { buckets: ["fleet-away"] } };
    const before = (await statsOf(a, "__all__")).json.total.urls as number;
    const unspecified = ((await statsOf(a, "__unspecified__")).json.total?.urls as number | undefined) ?? 0;
    server.stop();
    try {
      const refused = await viaProxy(a.proxyUrl, `${origin.url}/text/20`, { headers: { Host: "x", "Warcprox-Meta": JSON.stringify(limited) } });
      expect(refused.status).toBe(503);
      expect(refused.body.toString()).toContain(`the shared store (PostgreSQL 127.0.0.1:${server.port}/${dbName}) is unreachable`);
      expect(header(refused, "retry-after")).toBe("5");
      for (let i = 0; i < 3; i++) {
        const r = await viaProxy(b.proxyUrl, `${origin.url}/bytes/${300 + i}`, { headers: { Host: "x", "Warcprox-Meta": JSON.stringify(statsOnly) } });
        expect(r.status).toBe(200);
      }
      for (let i = 0; i < 4; i++) expect((await viaProxy(i % 2 ? a.proxyUrl : b.proxyUrl, `${origin.url}/bytes/${400 + i}`)).status).toBe(200);
      expect((await statsOf(a, "fleet-away")).status).toBe(503);
      const status = await controlStatus(b);
      expect(status.statsBuckets).toBeNull();
      expect(status.statsBucketsError).toMatch(/the shared store \(PostgreSQL .*\) is unreachable/);
    } finally {
      server.start();
    }
    expect(await eventually(async () => (await statsOf(a, "fleet-away")).json.total?.urls === 3)).toBe(true);
    expect(await eventually(async () => (await statsOf(b, "__unspecified__")).json.total?.urls === unspecified + 4)).toBe(true);
    expect((await statsOf(a, "__all__")).json.total.urls).toBe(before + 7);
    // Recorded all along.
    for (const l of [a, b]) for (const w of l.writers.values()) await w.rollover();
    const uris = [...(await readAllWarcs(a.dir)), ...(await readAllWarcs(b.dir))].filter((x) => x.type === "response").map((x) => x.get("WARC-Target-URI"));
    for (const n of [300, 301, 302, 400, 401, 402, 403]) expect(uris).toContain(`${origin.url}/bytes/${n}`);
    const again = await viaProxy(a.proxyUrl, `${origin.url}/text/20`, { headers: { Host: "x", "Warcprox-Meta": JSON.stringify(limited) } });
    expect(again.status).toBe(200);
  });
});
