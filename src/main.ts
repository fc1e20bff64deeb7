import "reflect-metadata";
import { hostname } from "node:os";
import type { AddressInfo, LookupFunction } from "node:net";
import type { Config } from "./config/schema.js";
import { assertNotOpenProxy } from "./config/validate.js";
import { type Clock, systemClock } from "./core/clock.js";
import { type IdSource, randomIds } from "./core/ids.js";
import { type Logger, createLogger } from "./core/log.js";
import type { Archiver } from "./archive/pipeline.js";
import type { ControlFacade } from "./control/facade.js";
import type { DedupStore } from "./dedup/types.js";
import type { CdxService } from "./index/service.js";
import { createProxyServer } from "./proxy/server.js";
import type { LeafCache } from "./tls/leafCache.js";
import type { CaStore } from "./tls/store.js";
import { openSharedDatabase } from "./postgres/database.js";
import type { WarcWriter } from "./warc/types.js";
import { buildArchivePipeline } from "./app/archivePipeline.js";
import { loadCertificates } from "./app/certificates.js";
import { CollectionCounters } from "./app/collectionCounters.js";
import { openCollectionsAndIndex } from "./app/collectionsAndIndex.js";
import { buildControlFacade } from "./app/controlFacade.js";
import { startControlServer } from "./app/controlServer.js";
import { InFlightExchanges } from "./app/inFlight.js";
import { hostPortOf } from "./app/listenAddress.js";
import { buildProxyContext, openCrawlLog } from "./app/proxyContext.js";
import { SessionServers } from "./app/sessionServers.js";
import { gracefulStop } from "./app/shutdown.js";
import { openStatsStore } from "./app/statsStore.js";
import { StatusReports } from "./app/statusReports.js";
import { OwnEndpoints, buildConnector } from "./app/upstream.js";
import { openWarcDirectory } from "./app/warcDirectory.js";

export interface Lathe {
  config: Config;
  address: AddressInfo;
  proxyUrl: string;
  ca: CaStore;
  leaves: LeafCache;
  warcDir: string;
  archiver: Archiver;
  writers: Map<string, WarcWriter>;
  dedupStore: DedupStore;
  facade: ControlFacade;
  /** The collections' CDXJ indexes (GET /cdx). */
  cdx: CdxService;
  /** `http://host:port` of the REST control API, or null when it is off. */
  controlUrl: string | null;
  /** Graceful stop: finish in-flight captures, close and rename every file. */
  stop(graceMs?: number): Promise<void>;
}

export interface StartOptions {
  clock?: Clock;
  ids?: IdSource;
  log?: Logger;
  /** DNS resolver for upstream connections (tests point names at chosen addresses). */
  lookup?: LookupFunction;
}

/** The composition root: build everything from a Config and start listening. */
export async function startLathe(config: Config, o: StartOptions = {}): Promise<Lathe> {
  assertNotOpenProxy(config);
  const log = o.log ?? createLogger({ level: config.log.level, json: config.log.json });
  const clock = o.clock ?? systemClock;
  const ids = o.ids ?? randomIds;
  const { warcDir, dedupStore } = await openWarcDirectory(config, log);
  const { ca, leaves, leafSource } = await loadCertificates(config, log);

  let port = config.proxy.port;
  const { collections, sessions, cdx } = await openCollectionsAndIndex(config, warcDir, log);
  const pipeline = buildArchivePipeline({ config, warcDir, clock, ids, log, dedupStore, collections, cdx, proxyPort: () => port });
  const own = new OwnEndpoints();
  const connector = buildConnector(config, own, o.lookup);

  const inFlight = new InFlightExchanges();
  const counters = new CollectionCounters();
  // >>> fleet stats (issue #22). The next line is TEMPORARY: the lead replaces it with the one shared SharedDatabase instance.
  const shared = config.shared.postgresql ?? process.env.LATHE_POSTGRESQL ? await openSharedDatabase((config.shared.postgresql ?? process.env.LATHE_POSTGRESQL)!, config.shared.postgresql ? "shared.postgresql" : "LATHE_POSTGRESQL", { instanceId: config.shared.instanceId ?? `${hostname()}:${config.proxy.port || `pid${process.pid}`}`, log }) : null;
  const stats = await openStatsStore(config, shared, log);
  // <<< fleet stats
  const reports = new StatusReports({ config, dedupStore, pipeline, inFlight, sessions, collections, counters, stats });
  const ctx = buildProxyContext({ config, clock, ids, log, connector, pipeline, collections, sessions, stats, counters, inFlight, reports });
  const proxy = createProxyServer(ctx, leafSource);
  const sessionServers = new SessionServers(ctx, leafSource, own);
  const facade = buildControlFacade({ config, clock, ids, collections, sessions, pipeline, caPem: ca.caCertPem, sessionServers, reports });

  const address = await proxy.listen(config.proxy.port, config.proxy.host);
  port = address.port;
  own.set("proxy", address);
  const control = await startControlServer({ config, log, warcDir, facade, collections, sessions, pipeline, cdx, own, proxy });
  ctx.crawlLog = openCrawlLog(config, warcDir, port);
  const proxyHostPort = hostPortOf(address);
  log.info("proxy-listening", { address: proxyHostPort, ca: ca.certPath, warcDir, hostname: hostname() });

  return {
    config,
    address,
    proxyUrl: `http://${proxyHostPort}`,
    ca,
    leaves,
    warcDir,
    archiver: pipeline.archiver,
    writers: pipeline.writerRegistry.map,
    dedupStore,
    facade,
    cdx,
    controlUrl: control?.url ?? null,
    stop: gracefulStop({ log, proxy, control, connector, sessionServers, pipeline, cdx, collections, reports, crawlLog: ctx.crawlLog, dedupStore, stats, shared }),
  };
}
