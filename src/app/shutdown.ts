/** The graceful stop of a running lathe: finish in-flight captures, close and rename every file. */
import type { Logger } from "../core/log.js";
import type { CollectionRegistry } from "../archive/collections.js";
import type { DedupIndex } from "../dedup/types.js";
import type { SharedDatabase } from "../postgres/database.js";
import type { CdxService } from "../index/service.js";
import type { ProxyServer } from "../proxy/server.js";
import type { Connector } from "../upstream/connector.js";
import type { CrawlLog } from "../warcprox/crawlLog.js";
import type { StatsStore } from "../warcprox/statsStore.js";
import type { ArchivePipeline } from "./archivePipeline.js";
import type { RunningControl } from "./controlServer.js";
import type { FleetMembership } from "./fleetRegistry.js";
import type { SessionServers } from "./sessionServers.js";
import type { StatusReports } from "./statusReports.js";
import { waitingTotals } from "./writerHealth.js";

export interface RunningParts {
  log: Logger;
  fleet: FleetMembership;
  proxy: ProxyServer;
  control: RunningControl | null;
  connector: Connector;
  sessionServers: SessionServers;
  pipeline: ArchivePipeline;
  cdx: CdxService;
  collections: CollectionRegistry;
  reports: StatusReports;
  crawlLog: CrawlLog | null;
  dedupIndex: DedupIndex;
  /** Warcprox-Meta stats: what it still holds is counted once no capture can end any more. */
  stats: StatsStore;
  /** The fleet's PostgreSQL, closed last. */
  shared: SharedDatabase | null;
}

/**
 * `stop(graceMs)`: the first call stops everything, later calls get the same promise. The
 * instance leaves the fleet registry first (crawlers stop picking it), then the main proxy stops
 * (letting exchanges in flight finish and be archived); the writers, index and stores close only
 * after every server that feeds them.
 */
export function gracefulStop(p: RunningParts): (graceMs?: number) => Promise<void> {
  let stopped: Promise<void> | null = null;
  return (graceMs = 10_000) => {
    stopped ??= (async () => {
      await p.fleet.stop();
      await p.proxy.close(graceMs);
      p.control?.liveFeed.close();
      await p.control?.server.close();
      p.connector.destroy();
      await p.sessionServers.closeAll(graceMs);
      await p.stats.close();
      // Captures still waiting for a writer that cannot write: each writer tries once more as it
      // closes, then puts them in lost/ (issue #26).
      const waiting = waitingTotals(p.pipeline.writerRegistry.all().map((w) => w.state()));
      if (waiting.captures > 0) p.log.warn("stopping-with-captures-waiting", { captures: waiting.captures, bytes: waiting.bytes, failure: waiting.failure?.message ?? null });
      await p.pipeline.writerRegistry.closeAll();
      await p.cdx.close();
      p.collections.close();
      p.reports.rates.stop();
      await p.crawlLog?.close();
      await p.dedupIndex.close();
      await p.shared?.close();
      const { archiver } = p.pipeline;
      p.log.info("proxy-stopped", { captures: archiver.stats.captures, failed: archiver.stats.failed, lost: archiver.troubles.lostCount });
    })();
    return stopped;
  };
}
