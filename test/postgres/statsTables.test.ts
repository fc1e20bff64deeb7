import { afterAll, beforeAll, describe, expect, it } from "vitest";
import pg from "pg";
import { sqlState } from "../../src/postgres/connect.js";
import type { SharedDatabase } from "../../src/postgres/database.js";
import { type BucketRow, SETTLED_CHANNEL, StatsTables } from "../../src/postgres/statsTables.js";
import { startPostgres, type PostgresServer } from "../helpers/postgres.js";
import { openAs, registerInstances } from "../helpers/fleet.js";

let server: PostgresServer;
let db: SharedDatabase;
let dbName: string;
const tables = () => new StatsTables({ instance: () => "me" });

beforeAll(async () => {
  server = await startPostgres();
  const url = await server.createDatabase();
  dbName = new URL(url).pathname.slice(1);
  db = await openAs(url, "me");
  await registerInstances(server, dbName, ["alive"], ["dead"]);
});
afterAll(async () => {
  await db?.close();
  server?.destroy();
});

const delta = (bucket: string, urls: number, bytes: number, sub: "new" | "revisit" = "new"): BucketRow => ({
  bucket,
  total: { urls, wire_bytes: bytes },
  new: sub === "new" ? { urls, wire_bytes: bytes } : { urls: 0, wire_bytes: 0 },
  revisit: sub === "revisit" ? { urls, wire_bytes: bytes } : { urls: 0, wire_bytes: 0 },
});

describe("stats tables (shared stats, SQL)", () => {
  it("a settle counts and deletes its reservation once, and notifies the fleet", async () => {
    const t = tables();
    const listener = new pg.Client({ connectionString: db.url.url });
    await listener.connect();
    const heard: string[] = [];
    listener.on("notification", (n) => heard.push(n.channel));
    await listener.query(`LISTEN ${SETTLED_CHANNEL}`);
    try {
      await db.transaction(async (c) => {
        const rows = await t.lock(c, ["s1", "__all__"], new Set(["s1"]));
        expect(rows.get("s1")).toEqual(delta("s1", 0, 0));
        // R as it was before this reservation, which the same statement inserts.
        expect(await t.reserveCounting(c, ["s1"], { id: "r1", buckets: ["__all__", "s1"], mayNew: true, mayRevisit: false })).toEqual(new Map());
      });
      expect(await t.reserved(db.pool, ["s1"])).toEqual(new Map([["s1", { total: 1, new: 1, revisit: 0 }]]));
      expect(await t.read(db.pool, "s1")).toBeNull(); // a row exists, but nothing is counted yet: 404 {}
      expect(await t.settle(db.pool, "r1", [delta("s1", 1, 70), delta("__all__", 1, 70)])).toBe(true);
      expect(await t.settle(db.pool, "r1", [delta("s1", 1, 70), delta("__all__", 1, 70)])).toBe(false); // retried: counted once
      expect(await t.read(db.pool, "s1")).toEqual(delta("s1", 1, 70));
      expect(await t.reserved(db.pool, ["s1"])).toEqual(new Map());
      for (let i = 0; i < 50 && heard.length < 2; i++) await new Promise((r) => setTimeout(r, 10));
      expect(heard).toEqual([SETTLED_CHANNEL, SETTLED_CHANNEL]);
    } finally {
      await listener.end();
    }
  });

  it("a batch counts once however often it is sent; acknowledged batch records are forgotten", async () => {
    const t = tables();
    expect(await t.applyBatch(db.pool, "stats:me:b1", [delta("b", 3, 300), delta("__unspecified__", 3, 300)], [])).toBe(true);
    expect(await t.applyBatch(db.pool, "stats:me:b1", [delta("b", 3, 300), delta("__unspecified__", 3, 300)], [])).toBe(false);
    expect((await t.read(db.pool, "b"))!.total).toEqual({ urls: 3, wire_bytes: 300 });
    expect(await t.applyBatch(db.pool, "stats:me:b2", [delta("b", 1, 5, "revisit")], ["stats:me:b1"])).toBe(true);
    expect(await t.read(db.pool, "b")).toEqual({ bucket: "b", total: { urls: 4, wire_bytes: 305 }, new: { urls: 3, wire_bytes: 300 }, revisit: { urls: 1, wire_bytes: 5 } });
    const ids = await server.query<{ id: string }>("SELECT id FROM applied_batches ORDER BY id", [], dbName);
    expect(ids.map((r) => r.id)).toEqual(["stats:me:b2"]);
  });

  it("R counts this instance's reservations and live instances', not those of instances gone silent", async () => {
    const t = tables();
    for (const [id, instance] of [["x-me", "me"], ["x-alive", "alive"], ["x-dead", "dead"], ["x-unknown", "never-registered"]]) {
      await server.query("INSERT INTO stats_reservations (id, instance, buckets, may_new, may_revisit) VALUES ($1, $2, $3, true, true)", [id, instance, ["__all__", "r"]], dbName);
    }
    expect((await t.reserved(db.pool, ["r"])).get("r")).toEqual({ total: 2, new: 2, revisit: 2 });
    // Housekeeping removes the reservations of gone instances once old enough, never live ones.
    await t.dropAbandoned(db.pool, 0);
    const left = await server.query<{ id: string }>("SELECT id FROM stats_reservations WHERE id LIKE 'x-%' ORDER BY id", [], dbName);
    expect(left.map((r) => r.id)).toEqual(["x-alive", "x-me"]);
    expect(await t.dropOwnReservations(db.pool)).toBe(1);
    await server.query("DELETE FROM stats_reservations", [], dbName);
  });

  it("an admission that only reserves waits for one evaluating the bucket, and one evaluating it counts the reservation it waited for", async () => {
    const t = tables();
    await t.applyBatch(db.pool, "stats:me:kx", [delta("kx", 1, 1)], []);
    const judged = await db.pool.connect();
    try {
      // An evaluating admission holds "kx" FOR UPDATE: a reserving one waits until it commits.
      await judged.query("BEGIN");
      await t.lock(judged, ["__all__", "kx"], new Set(["kx"]));
      let reserved = false;
      const p = t.reserveUnjudged(db.pool, { id: "kx-1", buckets: ["__all__", "kx"], mayNew: true, mayRevisit: true }).then(() => (reserved = true));
      await new Promise((r) => setTimeout(r, 150));
      expect(reserved).toBe(false);
      await judged.query("COMMIT");
      await p;
      // A reserving admission holds "kx" FOR KEY SHARE until it commits: the evaluating one waits, then counts it.
      const share = await db.pool.connect();
      await share.query("BEGIN");
      await t.lock(share, ["__all__", "kx"], new Set());
      await share.query("INSERT INTO stats_reservations (id, instance, buckets, may_new, may_revisit) VALUES ('kx-2', 'me', $1, true, true)", [["__all__", "kx"]]);
      await judged.query("BEGIN");
      const counted = (async () => {
        await t.lock(judged, ["kx"], new Set(["kx"]));
        return t.reserved(judged, ["kx"]);
      })();
      await new Promise((r) => setTimeout(r, 150));
      await share.query("COMMIT");
      share.release();
      expect((await counted).get("kx")).toEqual({ total: 2, new: 2, revisit: 2 });
      await judged.query("COMMIT");
    } finally {
      judged.release();
      await server.query("DELETE FROM stats_reservations", [], dbName);
    }
  });

  it("buckets are read in creation order, only those where something was counted", async () => {
    const t = tables();
    await t.applyBatch(db.pool, "stats:me:order", [delta("zz-first", 1, 1)], []);
    await t.applyBatch(db.pool, "stats:me:order2", [delta("aa-second", 1, 1)], []);
    const names = (await t.readAll(db.pool)).map((b) => b.bucket);
    expect(names.indexOf("zz-first")).toBeLessThan(names.indexOf("aa-second"));
    expect(names).not.toContain("__all__x");
  });

  it("admissions (judged or not), settles and batches over overlapping buckets in any mix of lock modes never deadlock", async () => {
    const t = tables();
    const names = ["__all__", "job", "job:example.com", "Zed", "émoji-😀", "ß"];
    let seed = 7;
    const rnd = (n: number) => ((seed = (seed * 1103515245 + 12345) & 0x7fffffff) % n);
    const subset = () => names.filter(() => rnd(2) === 0).concat(names[rnd(names.length)]!).filter((v, i, a) => a.indexOf(v) === i).sort(() => rnd(3) - 1);
    const errors: string[] = [];
    const work = Array.from({ length: 120 }, async (_, i) => {
      const buckets = subset();
      try {
        if (i % 3 === 2) {
          await t.applyBatch(db.pool, `stats:me:dl${i}`, buckets.map((b) => delta(b, 1, 1)), []);
          return;
        }
        const id = `dl-${i}`;
        if (i % 3 === 1) await t.reserveUnjudged(db.pool, { id, buckets, mayNew: true, mayRevisit: false });
        else await db.transaction(async (c) => {
          await t.lock(c, buckets, new Set(buckets.filter(() => rnd(2) === 0)));
          await new Promise((r) => setTimeout(r, rnd(3)));
          await t.reserveCounting(c, buckets, { id, buckets, mayNew: true, mayRevisit: true });
        });
        await t.settle(db.pool, id, buckets.map((b) => delta(b, 1, 1)));
      } catch (e) {
        errors.push(`${sqlState(e) ?? ""} ${(e as Error).message}`);
      }
    });
    await Promise.all(work);
    expect(errors).toEqual([]);
    const all = await server.query<{ n: string }>("SELECT count(*) AS n FROM stats_reservations", [], dbName);
    expect(Number(all[0]!.n)).toBe(0);
  });
});
