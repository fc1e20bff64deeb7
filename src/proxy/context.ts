import type { Config } from "../config/schema.js";
import type { Clock } from "../core/clock.js";
import type { ProxyError } from "../core/errors.js";
import type { Logger } from "../core/log.js";
import type { Archiver } from "../archive/pipeline.js";
import type { Connector } from "../upstream/connector.js";

/** Everything an exchange needs, built once by main.ts. */
export interface ProxyContext {
  config: Config;
  connector: Connector;
  archiver: Archiver;
  clock: Clock;
  ids: import("../core/ids.js").IdSource;
  log: Logger;
  /**
   * Why new exchanges are refused (503) right now, or null: a failed writer in strict durability;
   * in rollover, captures waiting for a writer past capture.retryMaxBytes / retryMaxMs.
   */
  writerFailure(): ProxyError | null;
  collections: import("../archive/collections.js").CollectionRegistry;
  stats: import("../warcprox/statsStore.js").StatsStore;
  /** Counters of a collection (created on first use). */
  collectionCounters(name: string): import("../archive/sessions.js").SessionCounters;
  crawlLog: import("../warcprox/crawlLog.js").CrawlLog | null;
  sessions: import("../archive/sessions.js").SessionRegistry;
  /** Per-host gates and robots.txt copies for collections with politeness on (issue #27). */
  politeness: import("../politeness/politeness.js").Politeness;
  /** Mark an exchange as in flight; call the returned function when it is archived or abandoned. */
  begin(): () => void;
  /** Resolves when no exchange is in flight (graceful shutdown). */
  idle(): Promise<void>;
  /** The `GET /status` document (warcprox shape) for a request that arrived on `socket`. */
  status(socket: import("node:net").Socket): Promise<Record<string, unknown>>;
}
