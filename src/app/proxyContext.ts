/** Everything an exchange on a proxy port needs, built once and shared by the main and session proxy servers. */
import { resolve } from "node:path";
import type { Config } from "../config/schema.js";
import type { Clock } from "../core/clock.js";
import type { IdSource } from "../core/ids.js";
import type { Logger } from "../core/log.js";
import type { CollectionRegistry } from "../archive/collections.js";
import type { SessionRegistry } from "../archive/sessions.js";
import type { ProxyContext } from "../proxy/context.js";
import type { Connector } from "../upstream/connector.js";
import { CrawlLog } from "../warcprox/crawlLog.js";
import type { Politeness } from "../politeness/politeness.js";
import type { StatsStore } from "../warcprox/statsStore.js";
import type { ArchivePipeline } from "./archivePipeline.js";
import type { CollectionCounters } from "./collectionCounters.js";
import type { InFlightExchanges } from "./inFlight.js";
import type { StatusReports } from "./statusReports.js";
import { writerFailureProbe } from "./writerHealth.js";

export interface ProxyContextDeps {
  config: Config;
  clock: Clock;
  ids: IdSource;
  log: Logger;
  connector: Connector;
  pipeline: ArchivePipeline;
  collections: CollectionRegistry;
  sessions: SessionRegistry;
  stats: StatsStore;
  counters: CollectionCounters;
  inFlight: InFlightExchanges;
  reports: StatusReports;
  politeness: Politeness;
}

export function buildProxyContext(d: ProxyContextDeps): ProxyContext {
  return {
    config: d.config,
    connector: d.connector,
    archiver: d.pipeline.archiver,
    clock: d.clock,
    ids: d.ids,
    log: d.log,
    writerFailure: writerFailureProbe(d.pipeline.writerRegistry, d.config.capture),
    collections: d.collections,
    sessions: d.sessions,
    politeness: d.politeness,
    stats: d.stats,
    collectionCounters: d.counters.forCollection,
    // Opened by openCrawlLog once the proxy listens (each line names the port).
    crawlLog: null,
    begin: () => d.inFlight.begin(),
    idle: () => d.inFlight.idle(),
    status: d.reports.proxyStatus,
  };
}

/** The crawl log (warcprox's), unless log.crawlLogDir is "": in that directory, or else the WARC directory. */
export function openCrawlLog(config: Config, warcDir: string, port: number): CrawlLog | null {
  if (config.log.crawlLogDir === "") return null;
  return new CrawlLog({ dir: config.log.crawlLogDir ? resolve(config.log.crawlLogDir) : warcDir, port });
}
