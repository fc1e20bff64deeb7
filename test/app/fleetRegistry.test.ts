/**
 * The fleet as a crawler sees it: `GET /api/v1/fleet` on lathes sharing one real PostgreSQL
 * (in-process instances and a `lathe serve` child process), with real exchanges in flight
 * through real sockets. An instance is listed while it beats, least loaded first; it is gone at
 * once when it stops and within ~3 heartbeats when it is killed (with its claims and
 * reservations); a second live instance with the same id is refused; the password never shows.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { spawn, type ChildProcess } from "node:child_process";
import http from "node:http";
import { mkdtempSync, writeFileSync } from "node:fs";
import { hostname, tmpdir } from "node:os";
import { join } from "node:path";
import type { AddressInfo } from "node:net";
import { createLogger, type Logger } from "../../src/core/log.js";
import { VERSION } from "../../src/core/version.js";
import type { FleetAnswer } from "../../src/control/facade.js";
import { viaProxy } from "../helpers/client.js";
import { startTestLathe, type TestLathe } from "../helpers/lathe.js";
import { ADMIN_PASSWORD, startPostgres, type PostgresServer } from "../helpers/postgres.js";

const BIN = new URL("../../bin/lathe.js", import.meta.url).pathname;
const HEARTBEAT_MS = 200;

/** An origin that answers `/hold/…` only when released: exchanges stay in flight meanwhile. */
interface HoldingOrigin {
  url: string;
  held: number;
  release(): void;
  close(): Promise<void>;
}

async function startHoldingOrigin(): Promise<HoldingOrigin> {
  const held: http.ServerResponse[] = [];
  const server = http.createServer((req, res) => {
    if (req.url!.startsWith("/hold/")) held.push(res);
    else res.end("ok\n");
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const answer = (res: http.ServerResponse) => res.writeHead(200, { "content-type": "text/plain" }).end(`released ${res.req.url}\n`);
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    get held() {
      return held.length;
    },
    release: () => held.splice(0).forEach(answer),
    close: () => {
      held.splice(0).forEach(answer);
      server.closeAllConnections();
      return new Promise((r) => server.close(() => r()));
    },
  };
}

/** Every log line, JSON, so the test can look for the password in them. */
const logLines: string[] = [];
const recordingLog = (): Logger => createLogger({ json: true, level: "debug", write: (l) => logLines.push(l) });

async function fleetOf(lathe: { controlUrl: string | null }): Promise<FleetAnswer & { text: string }> {
  const res = await fetch(`${lathe.controlUrl}/api/v1/fleet`);
  const text = await res.text();
  expect(res.status, text).toBe(200);
  return { ...(JSON.parse(text) as FleetAnswer), text };
}

const idOf = (lathe: TestLathe) => `${hostname()}:${lathe.address.port}`;

async function until<T>(what: string, check: () => Promise<T | null | undefined | false>, ms = 5000): Promise<{ value: T; ms: number }> {
  const t0 = Date.now();
  while (Date.now() - t0 < ms) {
    const value = await check();
    if (value) return { value, ms: Date.now() - t0 };
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`not within ${ms} ms: ${what}`);
}

/** `lathe serve` as a child process sharing the database; resolves once it listens (and is registered). */
function serveChild(postgresql: string, settings: string): Promise<{ proc: ChildProcess; port: number; output: () => string }> {
  const dir = mkdtempSync(join(tmpdir(), "lathe-fleet-child-"));
  const args = [BIN, "serve", "--port", "0", "--control-port", "0", "--dir", join(dir, "warcs"), "--certs", join(dir, "certs"), "--config", settings, "--json-logs", "--postgresql", postgresql];
  const proc = spawn(process.execPath, args, { stdio: ["ignore", "pipe", "pipe"] });
  let all = "";
  proc.stderr!.on("data", (d) => (all += d));
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`no start: ${all}`)), 20_000);
    proc.stdout!.on("data", (d) => {
      all += d;
      const m = /listening on http:\/\/127\.0\.0\.1:(\d+)/.exec(all);
      if (m) {
        clearTimeout(t);
        resolve({ proc, port: Number(m[1]), output: () => all });
      }
    });
    proc.on("exit", (code) => reject(new Error(`exited ${code}: ${all}`)));
  });
}

let server: PostgresServer;
let origin: HoldingOrigin;
beforeAll(async () => {
  [server, origin] = await Promise.all([startPostgres(), startHoldingOrigin()]);
});
afterAll(async () => {
  await origin?.close();
  server?.destroy();
});

describe("two instances and a killed third sharing one PostgreSQL", () => {
  let url: string;
  let a: TestLathe;
  let b: TestLathe;
  const shared = () => ({ shared: { postgresql: url, heartbeatMs: HEARTBEAT_MS } });
  beforeAll(async () => {
    url = await server.createDatabase("fleet");
    a = await startTestLathe(shared(), { log: recordingLog() });
    b = await startTestLathe(shared(), { log: recordingLog() });
  });
  afterAll(async () => {
    await Promise.all([a?.stop(), b?.stop()]);
  });

  it("GET /api/v1/fleet on either lists both, with their addresses and load; the store is named without its password", async () => {
    for (const asked of [a, b]) {
      const fleet = await fleetOf(asked);
      expect(fleet.shared).toBe(true);
      expect(fleet.store).toBe(`PostgreSQL 127.0.0.1:${server.port}/fleet`);
      expect(fleet.text).not.toContain(ADMIN_PASSWORD);
      expect(fleet.instances.map((i) => i.id).sort()).toEqual([idOf(a), idOf(b)].sort());
      for (const lathe of [a, b]) {
        const me = fleet.instances.find((i) => i.id === idOf(lathe))!;
        expect(me).toMatchObject({ hostname: hostname(), pid: process.pid, proxy: `127.0.0.1:${lathe.address.port}`, control: lathe.controlUrl, version: VERSION, load: { inFlight: 0, capturesPerSec: 0 } });
        expect(Date.parse(me.startedAt)).toBeLessThanOrEqual(Date.parse(me.heartbeatAt));
      }
    }
  });

  it("N slow exchanges in flight through one instance: its inFlight reads N on the next beat and it sorts after the idle one; then its captures per second", async () => {
    const n = 3;
    const pending = Array.from({ length: n }, (_, i) => viaProxy(a.proxyUrl, `${origin.url}/hold/${i}`));
    await until("the origin holds every request", async () => origin.held === n);
    const { value: busy, ms } = await until("A's next beat carries its load", async () => {
      const fleet = await fleetOf(b);
      return fleet.instances.find((i) => i.id === idOf(a))?.load.inFlight === n && fleet;
    });
    expect(ms).toBeLessThan(HEARTBEAT_MS * 3);
    expect(busy.instances.map((i) => i.id)).toEqual([idOf(b), idOf(a)]);
    origin.release();
    for (const r of await Promise.all(pending)) expect(r.status).toBe(200);
    const { value: after } = await until("A's next beat: nothing in flight, captures per second > 0", async () => {
      const me = (await fleetOf(a)).instances.find((i) => i.id === idOf(a));
      return me && me.load.inFlight === 0 && me.load.capturesPerSec > 0 && me;
    });
    // 3 captures over one heartbeat interval (200 ms, or a little more): about 15 per second.
    expect(after.load.capturesPerSec).toBeGreaterThan(1);
    expect(after.load.capturesPerSec).toBeLessThanOrEqual(n / (HEARTBEAT_MS / 1000) + 1);
  });

  it("a second live instance with the same id is refused at start, saying what to do; the first stays listed", async () => {
    const err = await startTestLathe({ shared: { postgresql: url, heartbeatMs: HEARTBEAT_MS, instanceId: idOf(a) } }, { log: recordingLog() }).then(
      (l) => l.stop().then(() => null),
      (e: unknown) => e as Error & { code?: string },
    );
    expect(err?.code).toBe("ERR_CONFIG");
    expect(err!.message).toContain(`another live instance already has the id ${JSON.stringify(idOf(a))}`);
    expect(err!.message).toContain("shared.instanceId");
    expect(err!.message).toContain(`proxy 127.0.0.1:${a.address.port}`);
    expect(err!.message).not.toContain(ADMIN_PASSWORD);
    expect((await fleetOf(b)).instances.map((i) => i.id).sort()).toEqual([idOf(a), idOf(b)].sort());
  });

  it("an instance killed with SIGKILL is dropped within ~3 heartbeats, and its claims and reservations with it", async () => {
    const settings = join(mkdtempSync(join(tmpdir(), "lathe-fleet-settings-")), "settings.json");
    writeFileSync(settings, JSON.stringify({ shared: { heartbeatMs: HEARTBEAT_MS } }));
    const child = await serveChild(url, settings);
    const childId = `${hostname()}:${child.port}`;
    try {
      const listed = (await fleetOf(a)).instances.find((i) => i.id === childId);
      expect(listed).toMatchObject({ pid: child.proc.pid, proxy: `127.0.0.1:${child.port}`, control: expect.stringMatching(/^http:\/\/127\.0\.0\.1:\d+$/) });
      // What a crash leaves behind: a digest claimed and a limit reservation held (the shapes the dedup and stats stores write).
      await server.query("INSERT INTO dedup_claims (alg, digest, instance, expires_at) VALUES (1, '\\x01', $1, now() + interval '1 hour')", [childId], "fleet");
      await server.query("INSERT INTO stats_reservations (id, instance, buckets, may_new, may_revisit) VALUES ('held-by-child', $1, '{crawl}', true, true)", [childId], "fleet");
      child.proc.kill("SIGKILL");
      const killedAt = Date.now();
      const { ms: unlisted } = await until("the killed instance leaves the fleet", async () => !(await fleetOf(a)).instances.some((i) => i.id === childId));
      const { ms: swept } = await until("its rows are removed", async () => {
        const rows = await server.query<{ n: number }>(
          "SELECT (SELECT count(*) FROM instances WHERE id = $1) + (SELECT count(*) FROM dedup_claims WHERE instance = $1) + (SELECT count(*) FROM stats_reservations WHERE instance = $1) AS n",
          [childId],
          "fleet",
        );
        return Number(rows[0]!.n) === 0;
      });
      const sweptAfter = Date.now() - killedAt;
      console.log(`killed instance: unlisted after ${unlisted} ms, rows removed after ${sweptAfter} ms (${swept} ms later); heartbeat ${HEARTBEAT_MS} ms`);
      // Live = a heartbeat within 3 intervals; a sweep runs every interval: allow one more, and slack for a busy machine.
      expect(unlisted).toBeLessThan(3 * HEARTBEAT_MS + 1000);
      expect(sweptAfter).toBeLessThan(5 * HEARTBEAT_MS + 1000);
      expect((await fleetOf(b)).instances.map((i) => i.id).sort()).toEqual([idOf(a), idOf(b)].sort());
      expect(child.output()).toContain('"event":"registry-joined"');
      expect(child.output()).not.toContain(ADMIN_PASSWORD);
    } finally {
      child.proc.kill("SIGKILL");
    }
  });

  it("a stopped instance is gone from the fleet at once", async () => {
    await b.stop();
    const fleet = await fleetOf(a);
    expect(fleet.instances.map((i) => i.id)).toEqual([idOf(a)]);
    expect(await server.query("SELECT id FROM instances", [], "fleet")).toEqual([{ id: idOf(a) }]);
  });

  it("the password never reached a log line", () => {
    expect(logLines.some((l) => l.includes('"event":"registry-joined"'))).toBe(true);
    expect(logLines.some((l) => l.includes('"event":"registry-left"'))).toBe(true);
    for (const l of logLines) expect(l).not.toContain(ADMIN_PASSWORD);
  });
});

describe("without PostgreSQL", () => {
  it("the fleet is this instance alone", async () => {
    const lathe = await startTestLathe();
    try {
      const fleet = await fleetOf(lathe);
      expect(fleet.shared).toBe(false);
      expect(fleet.store).toBeUndefined();
      expect(fleet.instances).toEqual([
        {
          id: idOf(lathe),
          hostname: hostname(),
          pid: process.pid,
          proxy: `127.0.0.1:${lathe.address.port}`,
          control: lathe.controlUrl,
          version: VERSION,
          startedAt: expect.any(String),
          heartbeatAt: expect.any(String),
          load: { inFlight: 0, capturesPerSec: 0 },
        },
      ]);
    } finally {
      await lathe.stop();
    }
  });
});
