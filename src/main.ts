import { hostname } from "node:os";
import type { AddressInfo, LookupFunction } from "node:net";
import type { Config } from "./config/schema.js";
import { assertNotOpenProxy } from "./config/validate.js";
import { type Clock, systemClock } from "./core/clock.js";
import { type IdSource, randomIds } from "./core/ids.js";
import { type Logger, createLogger } from "./core/log.js";
import type { Archiver } from "./archive/pipeline.js";
import type { ControlFacade } from "./control/facade.js";
import type { DedupIndex } from "./dedup/types.js";
import type { SharedDatabase } from "./postgres/database.js";
import type { CdxService } from "./index/service.js";
import { createProxyServer } from "./proxy/server.js";
import { startDigestWorker } from "./capture/digestThread.js";
import type { LeafCache } from "./tls/leafCache.js";
import type { CaStore } from "./tls/store.js";
import type { WarcWriter } from "./warc/types.js";
import { buildArchivePipeline } from "./app/archivePipeline.js";
import { loadCertificates } from "./app/certificates.js";
import { CollectionCounters } from "./app/collectionCounters.js";
import { openCollectionsAndIndex } from "./app/collectionsAndIndex.js";
import { buildControlFacade } from "./app/controlFacade.js";
import { Politeness } from "./politeness/politeness.js";
import { startControlServer } from "./app/controlServer.js";
import { FleetMembership, instanceIdOf } from "./app/fleetRegistry.js";
import { InFlightExchanges } from "./app/inFlight.js";
import { hostPortOf } from "./app/listenAddress.js";
import { buildProxyContext, openCrawlLog } from "./app/proxyContext.js";
import { SessionServers } from "./app/sessionServers.js";
import { gracefulStop } from "./app/shutdown.js";
import { openStatsStore } from "./app/statsStore.js";
import { StatusReports } from "./app/statusReports.js";
import { OwnEndpoints, buildConnector } from "./app/upstream.js";
import { openWarcDirectory } from "./app/warcDirectory.js";
import { fleetNaming, sharedUrl } from "./app/sharedState.js";

export interface Lathe {
  config: Config;
  address: AddressInfo;
  proxyUrl: string;
  ca: CaStore;
  leaves: LeafCache;
  warcDir: string;
  archiver: Archiver;
  writers: Map<string, WarcWriter>;
  dedupIndex: DedupIndex;
  /** The shared PostgreSQL (issue "A fleet…"), or null when standalone. */
  shared: SharedDatabase | null;
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
export async function startLathe(given: Config, o: StartOptions = {}): Promise<Lathe> {
  assertNotOpenProxy(given);
  const log = o.log ?? createLogger({ level: given.log.level, json: given.log.json });
  const config = sharedUrl(given) ? fleetNaming(given, log) : given;
  const clock = o.clock ?? systemClock;
  const ids = o.ids ?? randomIds;
  const { warcDir, dedupIndex, shared } = await openWarcDirectory(config, log);
  const { ca, leaves, leafSource } = await loadCertificates(config, log);
  startDigestWorker();

  let port = config.proxy.port;
  const { collections, sessions, cdx } = await openCollectionsAndIndex(config, warcDir, log);
  const pipeline = buildArchivePipeline({ config, warcDir, clock, ids, log, dedupIndex, collections, cdx, proxyPort: () => port });
  const own = new OwnEndpoints();
  const connector = buildConnector(config, own, o.lookup);

  const inFlight = new InFlightExchanges();
  const counters = new CollectionCounters();
  const stats = await openStatsStore(config, shared, log);
  const politeness = new Politeness();
  const reports = new StatusReports({ config, dedupIndex, pipeline, inFlight, sessions, collections, counters, stats, politeness });
  const ctx = buildProxyContext({ config, clock, ids, log, connector, pipeline, collections, sessions, stats, counters, inFlight, reports, politeness });
  const proxy = createProxyServer(ctx, leafSource);
  const sessionServers = new SessionServers(ctx, leafSource, own);
  const fleet = new FleetMembership({ config, log, inFlight, captures: () => pipeline.archiver.stats.captures });
  const facade = buildControlFacade({ config, clock, ids, collections, sessions, pipeline, caPem: ca.caCertPem, sessionServers, reports, fleet: fleet.answer, politeness });

  const address = await proxy.listen(config.proxy.port, config.proxy.host);
  port = address.port;
  if (shared) shared.instanceId = instanceIdOf(config, port);
  own.set("proxy", address);
  const control = await startControlServer({ config, log, warcDir, facade, collections, sessions, pipeline, cdx, own, proxy, politeness });
  ctx.crawlLog = openCrawlLog(config, warcDir, port);
  const proxyHostPort = hostPortOf(address);
  log.info("proxy-listening", { address: proxyHostPort, ca: ca.certPath, warcDir, hostname: hostname() });
  const stop = gracefulStop({ log, fleet, proxy, control, connector, sessionServers, pipeline, cdx, collections, reports, crawlLog: ctx.crawlLog, dedupIndex, stats, shared });
  try {
    await fleet.start(shared, { proxy: address, control: control?.url ?? null });
  } catch (e) {
    await stop(0);
    throw e;
  }

  return {
    config,
    address,
    proxyUrl: `http://${proxyHostPort}`,
    ca,
    leaves,
    warcDir,
    archiver: pipeline.archiver,
    writers: pipeline.writerRegistry.map,
    dedupIndex,
    shared,
    facade,
    cdx,
    controlUrl: control?.url ?? null,
    stop,
  };
}
