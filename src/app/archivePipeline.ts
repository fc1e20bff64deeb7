/** The one pipeline every capture takes: dedup decision, then the shared writer of its series (which feeds the CDXJ index). */
import type { Config } from "../config/schema.js";
import type { Clock } from "../core/clock.js";
import type { IdSource } from "../core/ids.js";
import type { Logger } from "../core/log.js";
import { VERSION } from "../core/version.js";
import type { CollectionRegistry } from "../archive/collections.js";
import { Deduplicator } from "../archive/dedup.js";
import { Archiver } from "../archive/pipeline.js";
import { WriterRegistry } from "../archive/writers.js";
import type { DedupIndex } from "../dedup/types.js";
import type { CdxService } from "../index/service.js";

export interface ArchivePipelineDeps {
  config: Config;
  warcDir: string;
  clock: Clock;
  ids: IdSource;
  log: Logger;
  dedupIndex: DedupIndex;
  collections: CollectionRegistry;
  cdx: CdxService;
  /** The proxy's port, written into warcinfo: only known once the proxy listens. */
  proxyPort(): number;
}

export interface ArchivePipeline {
  writerRegistry: WriterRegistry;
  dedup: Deduplicator;
  archiver: Archiver;
}

export function buildArchivePipeline(d: ArchivePipelineDeps): ArchivePipeline {
  const { config, collections, cdx } = d;
  const writerRegistry = new WriterRegistry({
    config,
    warcDir: d.warcDir,
    software: `lathe/${VERSION}`,
    clock: d.clock,
    ids: d.ids,
    log: d.log,
    port: d.proxyPort,
    defaults: () => collections.get("default")!,
    indexFor: (collection) => cdx.hookFor(collection),
  });
  const dedup = new Deduplicator(d.dedupIndex, d.log);
  const archiver = new Archiver({ writerFor: writerRegistry.writerFor, dedup, dedupPolicy: config.dedup, ids: d.ids, version: config.warc.version, digest: config.warc.digest, log: d.log });
  return { writerRegistry, dedup, archiver };
}
