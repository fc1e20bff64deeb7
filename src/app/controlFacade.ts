/** The ControlFacade the REST API drives: collections, sessions (each on its own port), resources, status and metrics. */
import { resolve } from "node:path";
import type { Config } from "../config/schema.js";
import type { Clock } from "../core/clock.js";
import type { IdSource } from "../core/ids.js";
import { VERSION } from "../core/version.js";
import type { CollectionRegistry } from "../archive/collections.js";
import type { SessionRegistry } from "../archive/sessions.js";
import type { ControlFacade, FleetAnswer } from "../control/facade.js";
import { createFacade } from "../control/facadeImpl.js";
import type { ArchivePipeline } from "./archivePipeline.js";
import type { SessionServers } from "./sessionServers.js";
import type { StatusReports } from "./statusReports.js";
import type { Politeness } from "../politeness/politeness.js";

export interface ControlFacadeDeps {
  config: Config;
  clock: Clock;
  ids: IdSource;
  collections: CollectionRegistry;
  sessions: SessionRegistry;
  pipeline: ArchivePipeline;
  caPem: string;
  sessionServers: SessionServers;
  reports: StatusReports;
  fleet: () => Promise<FleetAnswer>;
  politeness: Politeness;
}

export function buildControlFacade(d: ControlFacadeDeps): ControlFacade {
  return createFacade({
    version: VERSION,
    config: d.config,
    warcDir: resolve(d.config.warc.dir),
    collections: d.collections,
    sessions: d.sessions,
    writers: d.pipeline.writerRegistry,
    archiver: d.pipeline.archiver,
    clock: d.clock,
    ids: d.ids,
    caPem: d.caPem,
    startSessionServer: d.sessionServers.start,
    status: d.reports.controlStatus,
    fleet: d.fleet,
    metrics: d.reports.metrics,
    politeness: () => d.politeness.report(),
  });
}
