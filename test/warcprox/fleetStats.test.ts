import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { SharedDatabase } from "../../src/postgres/database.js";
import { silentLogger } from "../../src/core/log.js";
import { FleetStats } from "../../src/warcprox/fleetStats.js";
import { type AdmitResult, type Admitted, admit } from "../../src/warcprox/limits.js";
import { StatsRegistry } from "../../src/warcprox/stats.js";
import { parseWarcproxMeta } from "../../src/warcprox/warcproxMeta.js";
import { startPostgres, type PostgresServer } from "../helpers/postgres.js";
import { eventually, openAs, registerInstances } from "../helpers/fleet.js";

const meta = (o: unknown) => parseWarcproxMeta([JSON.stringify(o)]);
const done = { written: true, revisit: false, wireBytes: 100 };
const okOf = (r: AdmitResult): Admitted => {
  if (!r.ok) throw new Error("refused: " + r.answer.body);
  return r;
};
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

let server: PostgresServer;
let dbName: string;
const dbs: SharedDatabase[] = [];
const fleets: FleetStats[] = [];
let a: FleetStats;
let b: FleetStats;

/** Instance `id` of the fleet, on its own SharedDatabase; `recheckMs` long so waits prove LISTEN/NOTIFY. */
async function instance(url: string, id: string, recheckMs = 60_000): Promise<FleetStats> {
  const db = await openAs(url, id);
  dbs.push(db);
  const s = await FleetStats.open({ db, log: silentLogger, flushMs: 50, recheckMs });
  fleets.push(s);
  return s;
}

const reservations = async () => Number((await server.query<{ n: string }>("SELECT count(*) AS n FROM stats_reservations", [], dbName))[0]!.n);

beforeAll(async () => {
  server = await startPostgres();
  const url = await server.createDatabase();
  dbName = new URL(url).pathname.slice(1);
  a = await instance(url, "A");
  b = await instance(url, "B");
  await registerInstances(server, dbName, ["A", "B"], ["ghost"]);
});
afterAll(async () => {
  for (const f of fleets) await f.close();
  for (const d of dbs) await d.close();
  server?.destroy();
});

describe("fleet stats and limits (two instances, one PostgreSQL)", () => {
  it("a limit of 10 lets exactly 10 of 2 × 16 concurrent captures through; the refusals are the local registry's bytes", async () => {
    const m = meta({ stats: { buckets: ["job1"] }, limits: { "job1/total/urls": 10 } });
    const results = await Promise.all(
      Array.from({ length: 32 }, async (_, i) => {
        const r = await (i % 2 ? a : b).admit(m, `http://example.com/${i}`);
        if (r.ok) {
          await sleep(5 + (i % 7) * 4); // the fetch
          r.release(done);
        }
        return r;
      }),
    );
    expect(results.filter((r) => r.ok)).toHaveLength(10);
    // The same ten captures through the standalone registry give the answer the fleet must give.
    const local = new StatsRegistry();
    for (let i = 0; i < 10; i++) okOf(await admit(local, m, `http://example.com/${i}`)).release(done);
    const expected = await admit(local, m, "http://example.com/x");
    for (const r of results.filter((x) => !x.ok)) expect(r).toEqual(expected);
    expect(await b.bucket("job1")).toEqual(local.get("job1"));
    expect(await reservations()).toBe(0);
  });

  it("a burst of 200 limited captures on one bucket: exactly 50 pass, none is refused for the store", async () => {
    const m = meta({ stats: { buckets: ["burst"] }, limits: { "burst/total/urls": 50 } });
    const results = await Promise.all(
      Array.from({ length: 200 }, async (_, i) => {
        const r = await (i % 4 ? a : b).admit(m, `http://example.com/burst${i}`);
        if (r.ok) {
          await sleep(i % 5);
          r.release(done);
        }
        return r;
      }),
    );
    const statuses = results.map((r) => (r.ok ? 200 : r.answer.status));
    expect(statuses.filter((s) => s === 200)).toHaveLength(50);
    expect(statuses.filter((s) => s === 420)).toHaveLength(150);
  });

  it("a soft limit answers 430; a bucket with a limit elsewhere counts stats-only captures as in flight", async () => {
    const statsOnly = meta({ stats: { buckets: ["soft1"] } });
    const limited = meta({ stats: { buckets: ["soft1"] }, "soft-limits": { "soft1/new/urls": 2 } });
    const first = okOf(await a.admit(statsOnly, "http://example.com/s0"));
    const second = okOf(await b.admit(limited, "http://example.com/s1"));
    // C = 0, R = 2 (A's stats-only capture holds a reservation too): undecided until one settles.
    let third: AdmitResult | undefined;
    const p = b.admit(limited, "http://example.com/s2", { waitTimeoutMs: 30_000 }).then((r) => (third = r));
    await sleep(100);
    expect(third).toBeUndefined();
    first.release(done);
    second.release(done);
    const t0 = Date.now();
    await p;
    expect(Date.now() - t0).toBeLessThan(2000); // woken by NOTIFY, not the 60 s re-check
    expect(third!.ok).toBe(false);
    if (third!.ok) return;
    expect(third!.answer.status).toBe(430);
    expect(third!.answer.reason).toBe("Reached soft limit");
    expect(third!.answer.body).toBe("request rejected by warcprox: reached soft limit soft1/new/urls=2\n");
    expect(JSON.parse(third!.answer.headers[3]![1])).toEqual({
      stats: { soft1: { bucket: "soft1", total: { urls: 2, wire_bytes: 200 }, new: { urls: 2, wire_bytes: 200 }, revisit: { urls: 0, wire_bytes: 0 } } },
      "reached-soft-limit": { "soft1/new/urls": 2 },
    });
  });

  it("a failed capture releases its reservation fleet-wide: the waiter on the other instance is admitted", async () => {
    const m = meta({ stats: { buckets: ["rel"] }, limits: { "rel/total/urls": 1 } });
    const held = okOf(await a.admit(m, "http://example.com/r1"));
    let next: AdmitResult | undefined;
    const p = b.admit(m, "http://example.com/r2", { waitTimeoutMs: 30_000 }).then((r) => (next = r));
    await sleep(100);
    expect(next).toBeUndefined();
    held.release(null); // connection refused: not counted
    await p;
    okOf(next!).release(done);
    await eventually(async () => (await reservations()) === 0);
    expect((await a.bucket("rel"))!.total.urls).toBe(1);
    expect((await a.admit(m, "http://example.com/r3")).ok).toBe(false);
  });

  it("an undecided wait ends pessimistically at its timeout; an aborted wait leaves nothing reserved", async () => {
    const m = meta({ stats: { buckets: ["to"] }, limits: { "to/total/urls": 1 } });
    const held = okOf(await a.admit(m, "http://example.com/t1"));
    const late = await b.admit(m, "http://example.com/t2", { waitTimeoutMs: 150 });
    expect(late.ok).toBe(false);
    if (!late.ok) expect(late.answer.status).toBe(420);
    const ac = new AbortController();
    const aborted = b.admit(m, "http://example.com/t3", { waitTimeoutMs: 30_000, signal: ac.signal });
    await sleep(50);
    ac.abort(new Error("client gone"));
    await expect(aborted).rejects.toThrow("client gone");
    held.release(null);
    await eventually(async () => (await reservations()) === 0);
    expect(await reservations()).toBe(0);
  });

  it("reservations of an instance whose heartbeat stopped do not hold the fleet back", async () => {
    await server.query("INSERT INTO stats_reservations (id, instance, buckets, may_new, may_revisit) VALUES ('g1', 'ghost', $1, true, true)", [["__all__", "gh"]], dbName);
    const m = meta({ stats: { buckets: ["gh"] }, limits: { "gh/total/urls": 1 } });
    okOf(await a.admit(m, "http://example.com/g", { waitTimeoutMs: 100 })).release(done);
    await server.query("DELETE FROM stats_reservations WHERE id = 'g1'", [], dbName);
  });

  it("captures without Warcprox-Meta take no round trip each: tallied and sent in batches, counted once", async () => {
    const before = (await a.bucket("__unspecified__"))?.total.urls ?? 0;
    const allBefore = (await a.bucket("__all__"))!.total.urls;
    const rs = await Promise.all(Array.from({ length: 200 }, (_, i) => (i % 2 ? a : b).admit(null, `http://example.com/u${i}`)));
    expect(await reservations()).toBe(0);
    for (const r of rs) okOf(r).release({ written: true, revisit: false, wireBytes: 10 });
    expect(await eventually(async () => (await b.bucket("__unspecified__"))?.total.urls === before + 200)).toBe(true);
    expect((await b.bucket("__all__"))!.total.urls).toBe(allBefore + 200);
    const batches = await server.query<{ id: string }>("SELECT id FROM applied_batches", [], dbName);
    expect(batches.length).toBeLessThanOrEqual(2); // each instance remembers only its last batch
  });

  it("the store away: limits fail closed with 503 naming it; captures without limits go on and their stats catch up", async () => {
    const limited = meta({ stats: { buckets: ["away"] }, limits: { "away/total/urls": 100 } });
    const statsOnly = meta({ stats: { buckets: ["away"] } });
    const admittedBefore = okOf(await a.admit(limited, "http://example.com/w0"));
    const allBefore = (await a.bucket("__all__"))!.total.urls;
    server.stop();
    try {
      // Settled while away: kept, and applied (and its reservation deleted) when the store is back.
      admittedBefore.release(done);
      const r = await a.admit(limited, "http://example.com/w1");
      expect(r.ok).toBe(false);
      if (r.ok) return;
      expect(r.answer.status).toBe(503);
      expect(r.answer.reason).toBe("Service Unavailable");
      expect(r.answer.body).toContain(`the shared store (PostgreSQL 127.0.0.1:${server.port}/${dbName}) is unreachable`);
      expect(r.answer.headers).toContainEqual(["Retry-After", "5"]);
      expect(r.limit).toBeNull();
      for (let i = 0; i < 5; i++) okOf(await a.admit(statsOnly, `http://example.com/w2-${i}`)).release(done);
      for (let i = 0; i < 7; i++) okOf(await b.admit(null, `http://example.com/w3-${i}`)).release(done);
      await expect(a.bucket("away")).rejects.toThrow(/unreachable/);
    } finally {
      server.start();
    }
    expect(await eventually(async () => (await a.bucket("away").catch(() => null))?.total.urls === 6)).toBe(true);
    expect(await eventually(async () => (await b.bucket("__all__").catch(() => null))?.total.urls === allBefore + 13)).toBe(true);
    expect(await reservations()).toBe(0);
    expect((await b.admit(limited, "http://example.com/w4")).ok).toBe(true);
  });
});
