/**
 * The instance registry of a fleet (issue #22): each instance keeps one row in `instances` with
 * its addresses and load, refreshed every heartbeat, so a crawler can list the live instances
 * and pick the least loaded one (as brozzler does with warcprox's services table).
 *
 * Every time comparison uses the SERVER's clock (`now()` in SQL), never this host's, so
 * instances on hosts with skewed clocks agree on who is live. An instance is live while its
 * last heartbeat is younger than MISSED_BEATS of its own intervals; each heartbeat removes the
 * rows older than that, with the dedup claims and stats reservations of those instances, so a
 * killed instance's claims and reservations never block the fleet.
 *
 * While the server is away heartbeats fail at once (SharedDatabase.run) and quietly: one log
 * line when they start failing, one when they work again; the next heartbeat after the server
 * is back writes the row again (it may have been removed meanwhile).
 */
import { randomUUID } from "node:crypto";
import type pg from "pg";
import { ProxyError, errorMessage } from "../core/errors.js";
import type { Logger } from "../core/log.js";
import type { SharedDatabase } from "./database.js";

/** Heartbeats an instance may miss before it is considered dead and its row removed. */
export const MISSED_BEATS = 3;

/** Who an instance is and where to reach it. */
export interface InstanceIdentity {
  id: string;
  hostname: string;
  pid: number;
  /** `host:port` of its proxy. */
  proxy: string;
  /** `http://host:port` of its control API, or null when that is off. */
  control: string | null;
  version: string;
}

export interface InstanceLoad {
  /** Exchanges in flight. */
  inFlight: number;
  capturesPerSec: number;
}

/** A live instance as `GET /api/v1/fleet` lists it. */
export interface FleetInstance extends InstanceIdentity {
  startedAt: string;
  heartbeatAt: string;
  load: InstanceLoad;
}

export interface RegistryOptions {
  heartbeatMs: number;
  log: Logger;
  /** Read at every heartbeat. */
  load: () => InstanceLoad;
}

/** SQL: the `instances` row `row` (a table name or alias) is live. The one definition, also for statsTables.ts. */
export const liveRow = (row: string) => `${row}.heartbeat_at > now() - ${MISSED_BEATS} * ${row}.heartbeat_ms * interval '1 millisecond'`;
const LIVE = liveRow("instances");

/**
 * Remove dead instances, their claims and their reservations; also reservations whose instance
 * has no row at all and that are older than $1 ms (an instance killed before it registered).
 * One row: the ids removed and how many claims and reservations went with them. The
 * data-modifying CTEs run as one statement on one snapshot.
 */
const SWEEP = `
WITH dead AS (DELETE FROM instances WHERE NOT (${LIVE}) RETURNING id),
claims AS (DELETE FROM dedup_claims WHERE instance IN (SELECT id FROM dead) RETURNING 1),
reservations AS (
  DELETE FROM stats_reservations r
  WHERE r.instance IN (SELECT id FROM dead)
     OR (r.created_at < now() - $1::integer * interval '1 millisecond' AND NOT EXISTS (SELECT 1 FROM instances i WHERE i.id = r.instance))
  RETURNING 1
)
SELECT coalesce((SELECT array_agg(id) FROM dead), '{}') AS dead, (SELECT count(*) FROM claims)::integer AS claims, (SELECT count(*) FROM reservations)::integer AS reservations`;

/**
 * Write this run's row: insert it, or refresh it when the row with this id is this run's. A row
 * with this id from another run is left alone (nothing returned): it is live, or SWEEP would
 * have removed it just before.
 */
const UPSERT = `
INSERT INTO instances (id, run, hostname, pid, proxy, control, version, heartbeat_ms, started_at, heartbeat_at, in_flight, captures_per_sec)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, COALESCE($9::timestamptz, now()), now(), $10, $11)
ON CONFLICT (id) DO UPDATE SET heartbeat_at = now(), heartbeat_ms = EXCLUDED.heartbeat_ms, in_flight = EXCLUDED.in_flight, captures_per_sec = EXCLUDED.captures_per_sec
WHERE instances.run = EXCLUDED.run
RETURNING started_at`;

const LIST = `
SELECT id, hostname, pid, proxy, control, version, started_at, heartbeat_at, in_flight, captures_per_sec
FROM instances WHERE ${LIVE}
ORDER BY in_flight, captures_per_sec, id`;

/** A row as LIST selects it: the identity's columns are named as its fields. */
interface Row extends InstanceIdentity {
  started_at: Date;
  heartbeat_at: Date;
  in_flight: number;
  captures_per_sec: number;
}

const fleetInstanceOf = ({ started_at, heartbeat_at, in_flight, captures_per_sec, ...me }: Row): FleetInstance => ({
  ...me,
  startedAt: started_at.toISOString(),
  heartbeatAt: heartbeat_at.toISOString(),
  load: { inFlight: in_flight, capturesPerSec: captures_per_sec },
});

export class InstanceRegistry {
  readonly #db: SharedDatabase;
  readonly #me: InstanceIdentity;
  readonly #o: RegistryOptions;
  /** Random per start: tells this run's row from an earlier or a concurrent one with the same id. */
  readonly #run = randomUUID();
  /** When this run first registered (server time); kept when the row is written again. */
  #startedAt: Date | null = null;
  #timer: NodeJS.Timeout | null = null;
  #beating: Promise<void> | null = null;
  #stopped = false;
  /** What the last failed heartbeat logged, so a failing streak is logged once. */
  #failing: string | null = null;

  constructor(db: SharedDatabase, me: InstanceIdentity, o: RegistryOptions) {
    this.#db = db;
    this.#me = me;
    this.#o = o;
  }

  get id(): string {
    return this.#me.id;
  }

  /**
   * Register and start the heartbeats. A stale row with this id (a killed earlier run) is taken
   * over; a LIVE one is refused with ProxyError("ERR_CONFIG") naming its holder and what to do.
   */
  async start(): Promise<void> {
    const written = await this.#db.run(async (pool) => {
      await this.#sweep(pool);
      return this.#write(pool);
    });
    if (!written) throw await this.#duplicate();
    this.#o.log.info("registry-joined", { instance: this.#me.id, store: this.#db.name, proxy: this.#me.proxy, heartbeatMs: this.#o.heartbeatMs });
    this.#schedule();
  }

  /** The live instances, least loaded first (exchanges in flight, then captures per second). */
  async list(): Promise<FleetInstance[]> {
    const r = await this.#db.run((pool) => pool.query<Row>(LIST));
    return r.rows.map(fleetInstanceOf);
  }

  /** One heartbeat now: remove the dead, write this row. Never throws (logs once per failing streak). */
  beat(): Promise<void> {
    this.#beating ??= this.#beatOnce().finally(() => (this.#beating = null));
    return this.#beating;
  }

  /** Stop the heartbeats and remove this run's row (left to expire when the server is away). */
  async stop(): Promise<void> {
    if (this.#stopped) return;
    this.#stopped = true;
    if (this.#timer) clearTimeout(this.#timer);
    await this.#beating;
    if (!this.#startedAt) return;
    try {
      await this.#db.run((pool) => pool.query("DELETE FROM instances WHERE id = $1 AND run = $2", [this.#me.id, this.#run]));
      this.#o.log.info("registry-left", { instance: this.#me.id });
    } catch (e) {
      this.#o.log.warn("registry-leave-failed", { instance: this.#me.id, error: errorMessage(e), note: `the row expires after ${MISSED_BEATS} heartbeats` });
    }
  }

  async #beatOnce(): Promise<void> {
    if (this.#stopped) return;
    try {
      const written = await this.#db.run(async (pool) => {
        await this.#sweep(pool);
        return this.#write(pool);
      });
      if (!written) throw new ProxyError("ERR_CONFIG", `another live instance now holds the id ${JSON.stringify(this.#me.id)} (this one's row was removed while it missed heartbeats); this instance is no longer listed: give each instance its own shared.instanceId`);
      if (this.#failing) this.#o.log.info("registry-heartbeat-resumed", { instance: this.#me.id });
      this.#failing = null;
    } catch (e) {
      const why = errorMessage(e);
      if (this.#failing === null) this.#o.log.warn("registry-heartbeat-failed", { instance: this.#me.id, store: this.#db.name, error: why, note: "logged once until a heartbeat works again" });
      this.#failing = why;
    }
  }

  #schedule(): void {
    if (this.#stopped) return;
    this.#timer = setTimeout(() => {
      void this.beat().then(() => this.#schedule());
    }, this.#o.heartbeatMs);
    this.#timer.unref();
  }

  async #sweep(pool: pg.Pool): Promise<void> {
    const r = await pool.query<{ dead: string[]; claims: number; reservations: number }>(SWEEP, [MISSED_BEATS * this.#o.heartbeatMs]);
    const { dead, claims, reservations } = r.rows[0]!;
    if (dead.length || claims || reservations) this.#o.log.info("registry-dropped-dead", { instances: dead, claims, reservations });
  }

  /** Insert or refresh this run's row; false when another run's live row holds the id. */
  async #write(pool: pg.Pool): Promise<boolean> {
    const me = this.#me;
    const load = this.#o.load();
    const r = await pool.query<{ started_at: Date }>(UPSERT, [me.id, this.#run, me.hostname, me.pid, me.proxy, me.control, me.version, this.#o.heartbeatMs, this.#startedAt, load.inFlight, load.capturesPerSec]);
    const row = r.rows[0];
    if (!row) return false;
    this.#startedAt ??= row.started_at;
    return true;
  }

  /** The refusal when a live instance of another run holds this id. */
  async #duplicate(): Promise<ProxyError> {
    const r = await this.#db
      .run((pool) => pool.query<{ hostname: string; pid: number; proxy: string; age: number }>("SELECT hostname, pid, proxy, extract(epoch FROM now() - heartbeat_at)::float8 AS age FROM instances WHERE id = $1", [this.#me.id]))
      .catch(() => null);
    const other = r?.rows[0];
    const holder = other ? ` (host ${other.hostname}, pid ${other.pid}, proxy ${other.proxy}, last heartbeat ${other.age.toFixed(1)} s ago)` : "";
    return new ProxyError(
      "ERR_CONFIG",
      `another live instance already has the id ${JSON.stringify(this.#me.id)} in ${this.#db.name}${holder}: give each instance its own shared.instanceId (or leave it unset for <hostname>:<proxy port>), or stop the other one; a killed instance's id is free again after ${MISSED_BEATS} missed heartbeats`,
    );
  }
}
