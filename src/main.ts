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
import { RunningStats } from "./warcprox/runningStats.js";
import { warcproxStatus } from "./warcprox/status.js";
import { openSqliteDedupStore } from "./dedup/sqliteStore.js";
import { CollectionRegistry } from "./archive/collections.js";
import { SessionRegistry } from "./archive/sessions.js";
import { WriterRegistry } from "./archive/writers.js";
import { summaryOf, type SessionCounters } from "./archive/sessions.js";
import { createFacade } from "./control/facadeImpl.js";
import { StatsRegistry } from "./warcprox/stats.js";
import { CrawlLog } from "./warcprox/crawlLog.js";
import type { ControlFacade } from "./control/facade.js";
import { createControlServer } from "./control/api.js";
import { cdxRoute } from "./control/cdxRoute.js";
import { regenerateIndex } from "./index/live.js";
import { CdxService } from "./index/service.js";
import { LiveFeed } from "./control/liveFeed.js";
import { liveRoutes } from "./control/livePage.js";
import type { DedupStore } from "./dedup/types.js";
import { type ProxyServer, createProxyServer } from "./proxy/server.js";
import type { ProxyContext } from "./proxy/context.js";
import { LeafCache } from "./tls/leafCache.js";
import { type CaStore, loadOrCreateCa } from "./tls/store.js";
import { createConnector } from "./upstream/connector.js";
import { type Endpoint, createDestinationGuard } from "./upstream/destinations.js";
import { assertNotOpenProxy } from "./config/validate.js";
import type { LookupFunction } from "node:net";
import { recoverOpenFiles } from "./warc/recovery.js";
import type { WarcWriter } from "./warc/types.js";

type ControlServer = ReturnType<typeof createControlServer>;

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
    // Its CDXJ index is read again from what recovery kept (decisions.md §6).
    await regenerateIndex(join(warcDir, r.file), r.deleted === true).catch((e: unknown) => log.error("cdx-index-regeneration-failed", { file: r.file, error: (e as Error).message }));
  }
  const ca = await loadOrCreateCa(resolve(config.certs.dir), log);
  const leaves = new LeafCache({ ca: ca.ca, leafKey: ca.leafKey, caCertPem: ca.caCertPem, maxEntries: config.certs.leafCacheSize });

  let port = config.proxy.port;
  const collections = new CollectionRegistry(join(warcDir, "lathe-state.sqlite3"), config);
  const sessions = new SessionRegistry();
  const cdx = new CdxService({ warcDir, log, collections: () => collections.list().map((c) => c.name) });
  await cdx.start();
  const writerRegistry = new WriterRegistry({
    config,
    warcDir,
    software: `lathe/${VERSION}`,
    clock,
    ids,
    log,
    port: () => port,
    defaults: () => collections.get("default")!,
    indexFor: (collection) => cdx.hookFor(collection),
  });
  const writers = writerRegistry.map;
  const writerFor = writerRegistry.writerFor;
  const dedup = new Deduplicator(dedupStore, log);
  const archiver = new Archiver({ writerFor, dedup, dedupPolicy: config.dedup, ids, version: config.warc.version, digest: config.warc.digest, log });
  // lathe's own listening sockets, for loop detection (README "Security").
  const ownEndpoints = new Map<string, Endpoint>();
  const guard = createDestinationGuard({
    denyAddresses: config.upstream.denyAddresses,
    ownEndpoints: () => [...ownEndpoints.values()],
    ...(o.lookup ? { lookup: o.lookup as unknown as typeof import("node:dns").lookup } : {}),
  });
  const connector = createConnector({ ...config.upstream, guard });

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
  const collectionCounters = new Map<string, SessionCounters>();
  const warcBytes = () => writerRegistry.all().reduce((n, w) => n + w.state().bytesWritten, 0);
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
      for (const w of writerRegistry.all()) {
        const f = w.state().failed;
        if (f) {
          probeSoon(w);
          return f;
        }
      }
      return null;
    },
    collections,
    sessions,
    stats: new StatsRegistry(),
    collectionCounters: (name) => {
      let c = collectionCounters.get(name);
      if (!c) collectionCounters.set(name, (c = { captures: 0, revisits: 0, failed: 0, skipped: 0, bytes: 0 }));
      return c;
    },
    crawlLog: null,
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
  const leafSource = { contextFor: (name: string) => leaves.get(name) };
  const proxy: ProxyServer = createProxyServer(ctx, leafSource);
  const sessionServers = new Map<string, ProxyServer>();
  const facade = createFacade({
    version: VERSION,
    config,
    collections,
    sessions,
    writers: writerRegistry,
    archiver,
    clock,
    ids,
    caPem: ca.caCertPem,
    async startSessionServer(session, wanted) {
      const server = createProxyServer(ctx, leafSource, { session });
      const addr = await server.listen(wanted, config.proxy.host);
      sessionServers.set(session.id, server);
      server.server.once("close", () => sessionServers.delete(session.id));
      ownEndpoints.set(`session:${session.id}`, { address: addr.address, port: addr.port });
      const closeServer = server.close.bind(server);
      server.close = (graceMs) => {
        ownEndpoints.delete(`session:${session.id}`);
        return closeServer(graceMs);
      };
      return { server, port: addr.port };
    },
    status: () => ({
      ...latheStatus(),
      sessions: sessions.list().map((x) => summaryOf(x)),
      collections: Object.fromEntries(collections.list().map((c) => [c.name, { prefix: c.prefix, ...(collectionCounters.get(c.name) ?? { captures: 0, revisits: 0, failed: 0, skipped: 0, bytes: 0 }) }])),
      statsBuckets: Object.fromEntries(ctx.stats.names().map((b) => [b, ctx.stats.get(b)])),
    }),
    metrics: () => prometheus(),
  });
  const prometheus = () => {
    const lines: string[] = [];
    const metric = (name: string, help: string, type: string, samples: Array<[Record<string, string>, number]>) => {
      lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`);
      for (const [labels, v] of samples) {
        const l = Object.entries(labels).map(([k, x]) => `${k}="${x.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n")}"`).join(",");
        lines.push(`${name}${l ? `{${l}}` : ""} ${v}`);
      }
    };
    metric("lathe_captures_total", "Captures written (responses and revisits).", "counter", [[{}, archiver.stats.captures]]);
    metric("lathe_revisits_total", "Captures written as revisits.", "counter", [[{}, archiver.stats.revisits]]);
    metric("lathe_capture_failures_total", "Captures that could not be written.", "counter", [[{}, archiver.stats.failed]]);
    metric("lathe_dedup_bytes_saved_total", "Payload bytes not written again thanks to revisits.", "counter", [[{}, archiver.stats.bytesSaved]]);
    metric("lathe_warc_bytes_written_total", "Bytes written to WARC files.", "counter", [[{}, warcBytes()]]);
    metric("lathe_exchanges_in_flight", "Exchanges in progress.", "gauge", [[{}, active.size]]);
    metric("lathe_sessions_open", "Recording sessions open.", "gauge", [[{}, sessions.list().length]]);
    metric("lathe_writer_failed", "1 while the writer of a series cannot write.", "gauge", writerRegistry.all().length ? [...writerRegistry.map.entries()].map(([series, w]) => [{ series }, w.state().failed ? 1 : 0]) : [[{}, 0]]);
    return lines.join("\n") + "\n";
  };
  const address = await proxy.listen(config.proxy.port, config.proxy.host);
  port = address.port;
  ownEndpoints.set("proxy", { address: address.address, port: address.port });
  // The REST control API, on its own port; never reachable off loopback without a token.
  const token = config.control.token ?? process.env.LATHE_CONTROL_TOKEN ?? null;
  let control: ControlServer | null = null;
  let liveFeed: LiveFeed | null = null;
  let controlUrl: string | null = null;
  if (config.control.port !== -1) {
    const loopback = /^(127\.|::1$|localhost$)/.test(config.control.host);
    if (!loopback && !token) {
      await proxy.close(0);
      throw new ProxyError("ERR_CONFIG", `control.host ${config.control.host} is not a loopback address: set control.token (or LATHE_CONTROL_TOKEN) so the control API is not open to anyone`);
    }
    // The live page (`/`) and its data: recent captures per session and collection, fed after each write.
    liveFeed = new LiveFeed({ version: VERSION, warcDir, sessions: () => sessions.list(), collections: () => collections.list(), writers: () => writerRegistry.map.entries() });
    liveFeed.attach(archiver);
    control = createControlServer(facade, { token, log: log.child({ component: "control" }), extraRoutes: [...liveRoutes(liveFeed, { version: VERSION, tokenConfigured: token !== null }), cdxRoute(cdx, collections)] });
    try {
      const a = await control.listen(config.control.port, config.control.host);
      controlUrl = `http://${a.family === "IPv6" ? `[${a.address}]` : a.address}:${a.port}`;
      ownEndpoints.set("control", { address: a.address, port: a.port });
      log.info("control-listening", { address: controlUrl });
    } catch (e) {
      await proxy.close(0);
      throw new ProxyError("ERR_CONFIG", `cannot listen for the control API on ${config.control.host}:${config.control.port}: ${(e as Error).message} (choose another with --control-port, or -1 to turn it off)`, e);
    }
  }
  if (config.log.crawlLogDir !== "") ctx.crawlLog = new CrawlLog({ dir: config.log.crawlLogDir ? resolve(config.log.crawlLogDir) : warcDir, port });
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
    facade,
    cdx,
    controlUrl,
    stop(graceMs = 10_000) {
      stopped ??= (async () => {
        await proxy.close(graceMs);
        liveFeed?.close();
        await control?.close();
        connector.destroy();
        await Promise.all([...sessionServers.values()].map((p) => p.close(graceMs)));
        await writerRegistry.closeAll();
        await cdx.close();
        collections.close();
        rates.stop();
        await ctx.crawlLog?.close();
        dedupStore.close();
        log.info("proxy-stopped", { captures: archiver.stats.captures, failed: archiver.stats.failed });
      })();
      return stopped;
    },
  };
}
