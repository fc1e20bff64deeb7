/** The REST control API on its own port, with the live page (`/`) and `GET /cdx`. */
import type { Config } from "../config/schema.js";
import { ProxyError } from "../core/errors.js";
import type { Logger } from "../core/log.js";
import { VERSION } from "../core/version.js";
import type { CollectionRegistry } from "../archive/collections.js";
import type { SessionRegistry } from "../archive/sessions.js";
import { type ControlServer, createControlServer } from "../control/api.js";
import { cdxRoute } from "../control/cdxRoute.js";
import type { ControlFacade } from "../control/facade.js";
import { LiveFeed, type LivePoliteness } from "../control/liveFeed.js";
import type { Politeness } from "../politeness/politeness.js";
import { liveRoutes } from "../control/livePage.js";
import type { CdxService } from "../index/service.js";
import type { ProxyServer } from "../proxy/server.js";
import type { ArchivePipeline } from "./archivePipeline.js";
import { hostPortOf } from "./listenAddress.js";
import type { OwnEndpoints } from "./upstream.js";

export interface ControlDeps {
  config: Config;
  log: Logger;
  warcDir: string;
  facade: ControlFacade;
  collections: CollectionRegistry;
  sessions: SessionRegistry;
  pipeline: ArchivePipeline;
  cdx: CdxService;
  own: OwnEndpoints;
  /** Already listening: closed (at once) when the control API cannot start, before the error is thrown. */
  proxy: ProxyServer;
  politeness: Politeness;
}

export interface RunningControl {
  server: ControlServer;
  liveFeed: LiveFeed;
  /** `http://host:port` */
  url: string;
}

/** The control API listening, or null when it is off (control.port -1). */
export async function startControlServer(d: ControlDeps): Promise<RunningControl | null> {
  const { config, collections, sessions, pipeline } = d;
  // The REST control API, on its own port; never reachable off loopback without a token.
  const token = config.control.token ?? process.env.LATHE_CONTROL_TOKEN ?? null;
  if (config.control.port === -1) return null;
  const loopback = /^(127\.|::1$|localhost$)/.test(config.control.host);
  if (!loopback && !token) {
    await d.proxy.close(0);
    throw new ProxyError("ERR_CONFIG", `control.host ${config.control.host} is not a loopback address: set control.token (or LATHE_CONTROL_TOKEN) so the control API is not open to anyone`);
  }
  // The live page (`/`) and its data: recent captures per session and collection, fed after each write.
  const liveFeed = new LiveFeed({ version: VERSION, warcDir: d.warcDir, sessions: () => sessions.list(), collections: () => collections.list(), writers: () => pipeline.writerRegistry.map.entries(), politeness: () => livePoliteness(d.politeness) });
  liveFeed.attach(pipeline.archiver);
  const extraRoutes = [...liveRoutes(liveFeed, { version: VERSION, tokenConfigured: token !== null }), cdxRoute(d.cdx, collections)];
  const server = createControlServer(d.facade, { token, log: d.log.child({ component: "control" }), extraRoutes });
  try {
    const a = await server.listen(config.control.port, config.control.host);
    const url = `http://${hostPortOf(a)}`;
    d.own.set("control", a);
    d.log.info("control-listening", { address: url });
    return { server, liveFeed, url };
  } catch (e) {
    await d.proxy.close(0);
    throw new ProxyError("ERR_CONFIG", `cannot listen for the control API on ${config.control.host}:${config.control.port}: ${(e as Error).message} (choose another with --control-port, or -1 to turn it off)`, e);
  }
}

/** The hosts the live page shows: those with requests at or waiting for them, or in back-off (at most 20). */
function livePoliteness(p: Politeness): LivePoliteness {
  const r = p.report();
  const busy = r.hosts.filter((h) => h.active > 0 || h.queued > 0 || h.backoffMs > 0).slice(0, 20);
  return { hosts: busy.map((h) => ({ host: h.host, active: h.active, queued: h.queued, delayMs: h.delayMs, backoffMs: h.backoffMs })), queued: r.queued, backingOff: r.backingOff };
}
