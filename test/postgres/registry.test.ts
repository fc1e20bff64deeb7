/**
 * The instance registry against a real PostgreSQL: registration, refusal of a live duplicate id,
 * takeover of a stale one, the sweep of dead instances with their claims and reservations,
 * liveness by the server's clock, ordering by load, and quiet heartbeats while the server is
 * away (the row comes back with it).
 */
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import { createLogger, type Logger } from "../../src/core/log.js";
import { isProxyError } from "../../src/core/errors.js";
import { openSharedDatabase, type SharedDatabase } from "../../src/postgres/database.js";
import { type InstanceIdentity, type InstanceLoad, InstanceRegistry } from "../../src/postgres/registry.js";
import { ADMIN_PASSWORD, startPostgres, type PostgresServer } from "../helpers/postgres.js";

let server: PostgresServer;
beforeAll(async () => {
  server = await startPostgres();
});
afterAll(() => server?.destroy());

const HEARTBEAT_MS = 200;

/** Log lines, JSON, as an operator would see them. */
const lines: string[] = [];
const log: Logger = createLogger({ json: true, level: "debug", write: (l) => lines.push(l) });
const events = (name: string) => lines.map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => l.event === name);

let dbName: string;
let dbUrl: string;
const opened: SharedDatabase[] = [];
const registries: InstanceRegistry[] = [];
let databases = 0;

beforeEach(async () => {
  dbName = `registry_${++databases}`;
  dbUrl = await server.createDatabase(dbName);
  lines.length = 0;
});
afterEach(async () => {
  for (const r of registries.splice(0)) await r.stop();
  for (const d of opened.splice(0)) await d.close();
});

async function open(instanceId: string): Promise<SharedDatabase> {
  const db = await openSharedDatabase(dbUrl, "test", { instanceId, log, probeMs: 100 });
  opened.push(db);
  return db;
}

const identity = (id: string, port = 8000): InstanceIdentity => ({ id, hostname: "host-" + id, pid: 1000 + port, proxy: `127.0.0.1:${port}`, control: `http://127.0.0.1:${port + 1}`, version: "0.1.0-test" });

/** A registry for `id` on its own connection pool, with a load the test sets. */
async function registry(id: string, load: InstanceLoad = { inFlight: 0, capturesPerSec: 0 }, port = 8000, heartbeatMs = HEARTBEAT_MS): Promise<{ reg: InstanceRegistry; db: SharedDatabase; load: InstanceLoad }> {
  const db = await open(id);
  const reg = new InstanceRegistry(db, identity(id, port), { heartbeatMs, log, load: () => load });
  registries.push(reg);
  return { reg, db, load };
}

const q = <T extends Record<string, unknown>>(sql: string, params: unknown[] = []) => server.query<T>(sql, params, dbName);

/** A row of another instance, `ageMs` since its last heartbeat by the server's clock. */
async function insertInstance(id: string, ageMs: number, heartbeatMs = HEARTBEAT_MS): Promise<void> {
  await q(
    `INSERT INTO instances (id, run, hostname, pid, proxy, control, version, heartbeat_ms, started_at, heartbeat_at)
     VALUES ($1, 'run-' || $1, 'h', 1, '10.0.0.1:8000', NULL, 'old', $2, now() - interval '1 hour', now() - $3 * interval '1 millisecond')`,
    [id, heartbeatMs, ageMs],
  );
}

async function claimAndReserve(instance: string, tag: string, reservedAgoMs = 0): Promise<void> {
  await q("INSERT INTO dedup_claims (alg, digest, instance, expires_at) VALUES (1, $1, $2, now() + interval '1 hour')", [Buffer.from(tag), instance]);
  await q("INSERT INTO stats_reservations (id, instance, buckets, may_new, may_revisit, created_at) VALUES ($1, $2, '{b}', true, true, now() - $3 * interval '1 millisecond')", [tag, instance, reservedAgoMs]);
}

const claimsOf = async (instance: string) => (await q<{ n: number }>("SELECT count(*)::int AS n FROM dedup_claims WHERE instance = $1", [instance]))[0]!.n;
const reservationIds = async () => (await q<{ id: string }>("SELECT id FROM stats_reservations ORDER BY id")).map((r) => r.id);

async function until(what: string, check: () => Promise<boolean>, ms = 5000): Promise<number> {
  const t0 = Date.now();
  while (Date.now() - t0 < ms) {
    if (await check()) return Date.now() - t0;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error(`not within ${ms} ms: ${what}`);
}

describe("registration", () => {
  it("writes the row with the server's times and lists it with its addresses and load", async () => {
    const { reg } = await registry("a:8000", { inFlight: 2, capturesPerSec: 1.5 });
    await reg.start();
    const [row] = await q<{ now: Date; started_at: Date; heartbeat_at: Date; heartbeat_ms: number }>("SELECT now() AS now, started_at, heartbeat_at, heartbeat_ms FROM instances");
    expect(row!.heartbeat_ms).toBe(HEARTBEAT_MS);
    expect(row!.now.getTime() - row!.heartbeat_at.getTime()).toBeLessThan(2000);
    const list = await reg.list();
    expect(list).toEqual([
      { ...identity("a:8000"), startedAt: row!.started_at.toISOString(), heartbeatAt: expect.any(String), load: { inFlight: 2, capturesPerSec: 1.5 } },
    ]);
    expect(events("registry-joined")).toHaveLength(1);
  });

  it("refuses a second LIVE instance with the same id, naming it and what to do; the first keeps its row", async () => {
    const first = await registry("dup");
    await first.reg.start();
    const second = await registry("dup", undefined, 9000);
    const err = await second.reg.start().then(
      () => null,
      (e: unknown) => e,
    );
    expect(isProxyError(err) && err.code).toBe("ERR_CONFIG");
    const msg = (err as Error).message;
    expect(msg).toContain('"dup"');
    expect(msg).toContain("shared.instanceId");
    expect(msg).toContain("pid 9000"); // the holder: identity("dup", 8000) has pid 9000
    expect(msg).toContain("proxy 127.0.0.1:8000");
    expect(msg).toMatch(/PostgreSQL 127\.0\.0\.1:\d+\/registry_\d+/);
    expect(msg).not.toContain(ADMIN_PASSWORD);
    const rows = await q<{ proxy: string }>("SELECT proxy FROM instances");
    expect(rows).toEqual([{ proxy: "127.0.0.1:8000" }]);
  });

  it("takes over a STALE row with its id (a killed earlier run), and drops that run's claims and reservations", async () => {
    const { reg } = await registry("again");
    await insertInstance("again", 10 * HEARTBEAT_MS);
    await claimAndReserve("again", "old-run");
    await reg.start();
    const rows = await q<{ run: string; version: string }>("SELECT run, version FROM instances WHERE id = 'again'");
    expect(rows).toHaveLength(1);
    expect(rows[0]!.run).not.toBe("run-again");
    expect(rows[0]!.version).toBe("0.1.0-test");
    expect(await claimsOf("again")).toBe(0);
    expect(await reservationIds()).toEqual([]);
  });
});

describe("heartbeats", () => {
  it("drop instances silent for 3 of their intervals, with their claims and reservations; live ones and fresh orphans stay", async () => {
    // The sweeper's own interval is long, so a slow machine setting up the rows below cannot age
    // the fresh orphan past its 3 intervals before the beat.
    const SWEEPER_MS = 2000;
    const { reg } = await registry("sweeper", undefined, 8000, SWEEPER_MS);
    await reg.start();
    await insertInstance("dead", 3 * HEARTBEAT_MS + 100);
    await insertInstance("alive", 0, 5000);
    // A slower instance (10 s interval) last heard 1 s ago is live, whatever the sweeper's interval.
    await insertInstance("slow", 1000, 10_000);
    await claimAndReserve("dead", "r-dead");
    await claimAndReserve("alive", "r-alive");
    await claimAndReserve("slow", "r-slow");
    // Reservations of an instance that never registered: removed once older than 3 intervals.
    await claimAndReserve("never-registered", "r-orphan-old", 10 * SWEEPER_MS);
    await claimAndReserve("never-registered-2", "r-orphan-new", 0);
    await reg.beat();
    const ids = (await q<{ id: string }>("SELECT id FROM instances ORDER BY id")).map((r) => r.id);
    expect(ids).toEqual(["alive", "slow", "sweeper"]);
    expect(await claimsOf("dead")).toBe(0);
    expect(await claimsOf("alive")).toBe(1);
    expect(await claimsOf("slow")).toBe(1);
    expect(await reservationIds()).toEqual(["r-alive", "r-orphan-new", "r-slow"]);
    // Logged by whichever beats swept (the timer may have beaten in between).
    const dropped = events("registry-dropped-dead") as Array<{ instances: string[]; claims: number; reservations: number }>;
    expect(dropped.flatMap((d) => d.instances)).toEqual(["dead"]);
    expect(dropped.reduce((n, d) => n + d.claims, 0)).toBe(1);
    expect(dropped.reduce((n, d) => n + d.reservations, 0)).toBe(2);
    // The list shows only the live ones, whoever has not swept yet.
    await insertInstance("dead-2", 3 * HEARTBEAT_MS + 100);
    expect((await reg.list()).map((i) => i.id).sort()).toEqual(["alive", "slow", "sweeper"]);
  });

  it("run by themselves every heartbeatMs, carrying the load read at that beat", async () => {
    const { reg, load } = await registry("beating");
    await reg.start();
    const first = (await q<{ heartbeat_at: Date }>("SELECT heartbeat_at FROM instances"))[0]!.heartbeat_at;
    load.inFlight = 7;
    load.capturesPerSec = 12.25;
    const waited = await until("the next beat carries the new load", async () => (await reg.list())[0]?.load.inFlight === 7);
    expect(waited).toBeLessThan(HEARTBEAT_MS * 3);
    const [row] = await q<{ heartbeat_at: Date; captures_per_sec: number }>("SELECT heartbeat_at, captures_per_sec FROM instances");
    expect(row!.heartbeat_at.getTime()).toBeGreaterThan(first.getTime());
    expect(row!.captures_per_sec).toBe(12.25);
  });

  it("list the least loaded first: exchanges in flight, then captures per second", async () => {
    const specs: Array<[string, InstanceLoad]> = [
      ["busy", { inFlight: 5, capturesPerSec: 0 }],
      ["idle-fast", { inFlight: 0, capturesPerSec: 9 }],
      ["idle", { inFlight: 0, capturesPerSec: 0.5 }],
      ["some", { inFlight: 1, capturesPerSec: 0 }],
    ];
    let port = 8000;
    for (const [id, load] of specs) await (await registry(id, load, (port += 10))).reg.start();
    expect((await registries[0]!.list()).map((i) => i.id)).toEqual(["idle", "idle-fast", "some", "busy"]);
  });

  it("compare times on the server: a host whose clock is an hour off still sees itself and the others as live", async () => {
    const honest = await registry("honest");
    await honest.reg.start();
    vi.useFakeTimers({ toFake: ["Date"] });
    try {
      vi.setSystemTime(Date.now() + 3_600_000);
      const skewed = await registry("skewed", undefined, 9000);
      await skewed.reg.start();
      await skewed.reg.beat();
      expect((await skewed.reg.list()).map((i) => i.id).sort()).toEqual(["honest", "skewed"]);
      expect((await honest.reg.list()).map((i) => i.id).sort()).toEqual(["honest", "skewed"]);
    } finally {
      vi.useRealTimers();
    }
  });

  it("stop removes the row at once; another run's row with the same id is never removed or overwritten", async () => {
    const a = await registry("shared-id");
    await a.reg.start();
    // a's row vanishes (swept while a was cut off) and another run takes the id.
    await q("DELETE FROM instances");
    const b = await registry("shared-id", undefined, 9000);
    await b.reg.start();
    await a.reg.beat();
    await a.reg.beat();
    const rows = await q<{ pid: number }>("SELECT pid FROM instances");
    expect(rows).toEqual([{ pid: 10000 }]);
    const failed = events("registry-heartbeat-failed");
    expect(failed).toHaveLength(1);
    expect(String(failed[0]!.error)).toMatch(/another live instance now holds the id "shared-id"/);
    await a.reg.stop();
    expect(await q("SELECT pid FROM instances")).toEqual([{ pid: 10000 }]);
    await b.reg.stop();
    expect(await q("SELECT id FROM instances")).toEqual([]);
  });
});

describe("while the server is away", () => {
  it("heartbeats fail quietly (logged once), and the row is written again when it is back", async () => {
    const { reg, db } = await registry("survivor");
    await reg.start();
    lines.length = 0;
    server.stop();
    try {
      const beats = 6;
      for (let i = 0; i < beats; i++) await reg.beat();
      expect(db.up).toBe(false);
      await expect(reg.list()).rejects.toMatchObject({ code: "ERR_SHARED_UNAVAILABLE" });
      // Let the timer beat a few times too.
      await new Promise((r) => setTimeout(r, HEARTBEAT_MS * 3));
      expect(events("registry-heartbeat-failed")).toHaveLength(1);
      expect(events("shared-store-unreachable")).toHaveLength(1);
    } finally {
      server.start();
    }
    // Meanwhile another instance's sweep removed the silent row.
    await q("DELETE FROM instances");
    const ms = await until("the row is back", async () => (await q("SELECT id FROM instances WHERE id = 'survivor'")).length === 1);
    expect(ms).toBeLessThan(3000);
    await until("resumed logged", async () => events("registry-heartbeat-resumed").length === 1);
    expect(events("registry-heartbeat-failed")).toHaveLength(1);
    expect(lines.join("\n")).not.toContain(ADMIN_PASSWORD);
  });

  it("a stop while it is away leaves the row to expire instead of waiting", async () => {
    const { reg } = await registry("leaving");
    await reg.start();
    server.stop();
    try {
      await reg.beat();
      const t0 = Date.now();
      await reg.stop();
      expect(Date.now() - t0).toBeLessThan(1000);
      expect(events("registry-leave-failed")).toHaveLength(1);
    } finally {
      server.start();
    }
  });
});
