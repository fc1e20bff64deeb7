/**
 * Fleet test set-up around a private PostgreSQL (postgres.ts): instances that the registry would
 * list as live, and a SharedDatabase per simulated instance.
 */
import { hostname } from "node:os";
import { silentLogger } from "../../src/core/log.js";
import { openSharedDatabase, type SharedDatabase } from "../../src/postgres/database.js";
import type { PostgresServer } from "./postgres.js";

/**
 * Rows in `instances` that count as live for as long as the test runs (heartbeat "infinity"),
 * standing in for the registry's heartbeats; `stale` ids get a heartbeat an hour old (gone).
 */
export async function registerInstances(pg: PostgresServer, db: string, live: string[], stale: string[] = []): Promise<void> {
  for (const [ids, beat] of [[live, "infinity"], [stale, "now() - interval '1 hour'"]] as const) {
    for (const id of ids) {
      await pg.query(
        `INSERT INTO instances (id, run, hostname, pid, proxy, version, heartbeat_ms, started_at, heartbeat_at) VALUES ($1, 'test', $2, $3, 'test', 'test', 1000, now(), ${beat === "infinity" ? "'infinity'" : beat})
         ON CONFLICT (id) DO UPDATE SET heartbeat_at = EXCLUDED.heartbeat_at`,
        [id, hostname(), process.pid],
        db,
      );
    }
  }
}

/** A SharedDatabase as instance `instanceId` would open it (schema created on first open). */
export function openAs(url: string, instanceId: string, probeMs = 200): Promise<SharedDatabase> {
  return openSharedDatabase(url, "test", { instanceId, log: silentLogger, probeMs });
}

/** Poll `check` every 50 ms until it is true or `ms` passed; returns its last value. */
export async function eventually(check: () => Promise<boolean> | boolean, ms = 10_000): Promise<boolean> {
  const until = Date.now() + ms;
  for (;;) {
    if (await check()) return true;
    if (Date.now() > until) return false;
    await new Promise((r) => setTimeout(r, 50));
  }
}
