/**
 * Which stats store this lathe counts Warcprox-Meta buckets and limits in: its own in-memory
 * registry (standalone, the default), or the fleet's in PostgreSQL when it runs with a shared
 * database (shared.postgresql).
 */
import type { Config } from "../config/schema.js";
import type { Logger } from "../core/log.js";
import type { SharedDatabase } from "../postgres/database.js";
import { FleetStats } from "../warcprox/fleetStats.js";
import { StatsRegistry } from "../warcprox/stats.js";
import { type StatsStore, localStatsStore } from "../warcprox/statsStore.js";

export async function openStatsStore(config: Config, shared: SharedDatabase | null, log: Logger): Promise<StatsStore> {
  if (!shared) return localStatsStore(new StatsRegistry());
  return FleetStats.open({ db: shared, log });
}
