/**
 * Where the state a fleet can share lives: the embedded SQLite dedup store (the default: one
 * machine, nothing to install), or a PostgreSQL server named by `shared.postgresql`, the
 * `LATHE_POSTGRESQL` environment variable or `--postgresql` (issue "A fleet… sharing PostgreSQL").
 */
import { hostname } from "node:os";
import { join, resolve } from "node:path";
import type { Config } from "../config/schema.js";
import type { Logger } from "../core/log.js";
import { SqliteDedupIndex } from "../dedup/sqliteIndex.js";
import { openSqliteDedupStore } from "../dedup/sqliteStore.js";
import type { DedupIndex } from "../dedup/types.js";
import { openSharedDatabase, type SharedDatabase } from "../postgres/database.js";
import { PostgresDedupIndex } from "../postgres/dedupIndex.js";
import { Outbox } from "../postgres/outbox.js";
import { DEFAULT_TEMPLATE } from "../warc/naming.js";

export const OUTBOX_FILE = "lathe-postgresql-outbox.jsonl";

/** The connection URL and the setting it came from, or null for standalone. */
export function sharedUrl(config: Config): { url: string; from: string } | null {
  if (config.shared.postgresql) return { url: config.shared.postgresql, from: "shared.postgresql (or --postgresql)" };
  const env = process.env.LATHE_POSTGRESQL;
  if (env) return { url: env, from: "LATHE_POSTGRESQL" };
  return null;
}

/**
 * Instances of a fleet may write into one directory, or their files may meet in one archive: the
 * default file name gains the proxy port after the host name, so it stays unique across
 * instances on one host as well as across hosts. An explicit template is kept as it is.
 */
export function fleetNaming(config: Config, log: Logger): Config {
  if (config.warc.filenameTemplate !== DEFAULT_TEMPLATE) return config;
  const template = `${DEFAULT_TEMPLATE}-{port}`;
  log.info("warc-filename-template", { template, why: "shared mode: file names unique across the instances of a fleet" });
  return { ...config, warc: { ...config.warc, filenameTemplate: template } };
}

/** This instance's registry id before the proxy port is known (then main.ts sets the final one). */
export function provisionalInstanceId(config: Config): string {
  return config.shared.instanceId ?? `${hostname()}:${config.proxy.port || `pid${process.pid}`}`;
}

export interface SharedState {
  dedupIndex: DedupIndex;
  /** The shared PostgreSQL, or null when standalone. */
  shared: SharedDatabase | null;
}

export async function openSharedState(config: Config, warcDir: string, log: Logger): Promise<SharedState> {
  const pg = sharedUrl(config);
  if (!pg) {
    const store = openSqliteDedupStore(config.dedup.dbPath ? resolve(config.dedup.dbPath) : join(warcDir, "lathe-dedup.sqlite3"), { log });
    return { dedupIndex: new SqliteDedupIndex(store), shared: null };
  }
  if (config.dedup.dbPath) log.warn("dedup-db-path-ignored", { dbPath: config.dedup.dbPath, why: "dedup entries live in the shared PostgreSQL" });
  const shared = await openSharedDatabase(pg.url, pg.from, { instanceId: provisionalInstanceId(config), log });
  try {
    const index = new PostgresDedupIndex(shared, new Outbox(join(warcDir, OUTBOX_FILE), config.shared.outboxMaxBytes, log), log);
    await index.start();
    return { dedupIndex: index, shared };
  } catch (e) {
    await shared.close();
    throw e;
  }
}
