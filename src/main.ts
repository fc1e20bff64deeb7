import "reflect-metadata";
import { hostname } from "node:os";
import { mkdir } from "node:fs/promises";
import { join, resolve } from "node:path";
import type { AddressInfo } from "node:net";
import type { Config } from "./config/schema.js";
import { type Clock, systemClock } from "./core/clock.js";
import { ProxyError } from "./core/errors.js";
import { type IdSource, randomIds } from "./core/ids.js";
import { type Logger, createLogger } from "./core/log.js";
import { VERSION } from "./core/version.js";
import { Archiver } from "./archive/pipeline.js";
import { Deduplicator } from "./archive/dedup.js";
import { RunningStats } from "./control/runningStats.js";
import { warcproxStatus } from "./control/status.js";
import { openSqliteDedupStore } from "./dedup/sqliteStore.js";
import type { DedupStore } from "./dedup/types.js";
import { type ProxyServer, createProxyServer } from "./proxy/server.js";
import type { ProxyContext } from "./proxy/context.js";
import { LeafCache } from "./tls/leafCache.js";
import { type CaStore, loadOrCreateCa } from "./tls/store.js";
import { createConnector } from "./upstream/connector.js";
import { recoverOpenFiles } from "./warc/recovery.js";
import type { WarcWriter } from "./warc/types.js";
import { createWarcWriter } from "./warc/writer.js";

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
  /** Graceful stop: finish in-flight captures, close and rename every file. */
  stop(graceMs?: number): Promise<void>;
}

export interface StartOptions {
  clock?: Clock;
  ids?: IdSource;
  log?: Logger;
}

/** The composition root: build everything from a Config and start listening. */
export async function startLathe(config: Config, o: StartOptions = {}): Promise<Lathe> {
  const log = o.log ?? createLogger({ level: config.log.level, json: config.log.json });
  const clock = o.clock ?? systemClock;
  const ids = o.ids ?? randomIds;
  const warcDir = resolve(config.warc.dir);
  try {
    await mkdir(warcDir, { recursive: true });
  } catch (e) {
    throw new ProxyError("ERR_CONFIG", `cannot create the WARC directory ${warcDir} (warc.dir / --dir): ${(e as Error).message}`, e);
  }
  const dedupStore = openSqliteDedupStore(config.dedup.dbPath ? resolve(config.dedup.dbPath) : join(warcDir, "lathe-dedup.sqlite3"), { log });
  // Recovery cuts torn tails off `.open` files; no dedup entry may point into what was cut.
  for (const r of await recoverOpenFiles(warcDir, log)) {
    const removed = dedupStore.removeFileTail(r.file, r.keptBytes);
    if (removed) log.warn("dedup-entries-removed", { file: r.file, removed });
  }
  const ca = await loadOrCreateCa(resolve(config.certs.dir), log);
  const leaves = new LeafCache({ ca: ca.ca, leafKey: ca.leafKey, caCertPem: ca.caCertPem, maxEntries: config.certs.leafCacheSize });

  const writers = new Map<string, WarcWriter>();
  let port = config.proxy.port;
  const writerFor = (prefix: string): WarcWriter => {
    let w = writers.get(prefix);
    if (!w) {
      const c = config.warc;
      w = createWarcWriter({
        dir: warcDir,
        prefix,
        template: c.filenameTemplate,
        gzip: c.gzip,
        gzipLevel: c.gzipLevel,
        skipLength: c.gzipSkipLength,
        version: c.version,
        digest: c.digest,
        maxFileBytes: c.maxFileBytes,
        idleRolloverMs: c.idleRolloverMs,
        durability: c.durability,
        warcinfo: config.warcinfo,
        software: `lathe/${VERSION}`,
        port,
        clock,
        ids,
        log,
        spoolDir: config.capture.spoolDir ?? undefined,
      });
      writers.set(prefix, w);
    }
    return w;
  };
  const dedup = new Deduplicator(dedupStore, log);
  const archiver = new Archiver({ writerFor, dedup, dedupPolicy: config.dedup, ids, version: config.warc.version, digest: config.warc.digest, log });
  const connector = createConnector(config.upstream);

  // While a writer is failed, requests get 503; a probe at most every second finds out when
  // writing works again, so recording resumes without a restart.
  let probing = false;
  let lastProbe = 0;
  const probeSoon = (w: WarcWriter) => {
    if (probing || Date.now() - lastProbe < 1000) return;
    probing = true;
    lastProbe = Date.now();
    w.probe().finally(() => {
      probing = false;
    });
  };

  const active = new Map<number, number>(); // exchange id → start (ms)
  let nextExchange = 0;
  let idleWaiters: Array<() => void> = [];
  const startedAt = new Date();
  const warcBytes = () => [...writers.values()].reduce((n, w) => n + w.state().bytesWritten, 0);
  const rates = new RunningStats(() => ({ urls: archiver.stats.captures, bytes: warcBytes() }));
  const latheStatus = () => ({
    version: VERSION,
    compat: "warcprox-2.13.1",
    captures: archiver.stats.captures,
    revisits: archiver.stats.revisits,
    failed: archiver.stats.failed,
    bytesSaved: archiver.stats.bytesSaved,
    dedup: { policy: config.dedup.policy, entries: dedupStore.count(), buckets: Object.fromEntries(dedup.counters) },
    writers: [...writers.entries()].map(([prefix, w]) => {
      const st = w.state();
      return { prefix, currentFile: st.currentFile, filesWritten: st.filesWritten.length, records: st.recordsWritten, bytes: st.bytesWritten, failed: st.failed?.message ?? null };
    }),
  });
  const ctx: ProxyContext = {
    config,
    connector,
    archiver,
    clock,
    ids,
    log,
    writerFailure: () => {
      for (const w of writers.values()) {
        const f = w.state().failed;
        if (f) {
          probeSoon(w);
          return f;
        }
      }
      return null;
    },
    seriesFor: () => config.warc.prefix,
    begin: () => {
      const id = nextExchange++;
      active.set(id, Date.now());
      return () => {
        if (!active.delete(id)) return;
        if (active.size === 0) {
          const w = idleWaiters;
          idleWaiters = [];
          for (const f of w) f();
        }
      };
    },
    idle: () => (active.size === 0 ? Promise.resolve() : new Promise<void>((r) => idleWaiters.push(r))),
    status: (socket) =>
      warcproxStatus(
        { version: VERSION, startedAt, activeStarts: () => [...active.values()], urlsProcessed: () => archiver.stats.captures, warcBytesWritten: warcBytes, rates, lathe: latheStatus },
        socket,
      ),
  };
  const proxy: ProxyServer = createProxyServer(ctx, { contextFor: (name) => leaves.get(name) });
  const address = await proxy.listen(config.proxy.port, config.proxy.host);
  port = address.port;
  const host = address.family === "IPv6" ? `[${address.address}]` : address.address;
  log.info("proxy-listening", { address: `${host}:${address.port}`, ca: ca.certPath, warcDir, hostname: hostname() });

  let stopped: Promise<void> | null = null;
  return {
    config,
    address,
    proxyUrl: `http://${host}:${address.port}`,
    ca,
    leaves,
    warcDir,
    archiver,
    writers,
    dedupStore,
    stop(graceMs = 10_000) {
      stopped ??= (async () => {
        await proxy.close(graceMs);
        connector.destroy();
        await Promise.all([...writers.values()].map((w) => w.close()));
        rates.stop();
        dedupStore.close();
        log.info("proxy-stopped", { captures: archiver.stats.captures, failed: archiver.stats.failed });
      })();
      return stopped;
    },
  };
}
