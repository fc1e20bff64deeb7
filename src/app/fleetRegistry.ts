/**
 * This instance's place in the fleet (issue #22): its row in the shared registry, refreshed
 * every `shared.heartbeatMs` with its load, and the answer of `GET /api/v1/fleet`. Without
 * PostgreSQL the fleet is this instance alone, in the same shape.
 */
import type { AddressInfo } from "node:net";
import { hostname } from "node:os";
import type { Config } from "../config/schema.js";
import type { Logger } from "../core/log.js";
import { VERSION } from "../core/version.js";
import type { FleetAnswer } from "../control/facade.js";
import type { SharedDatabase } from "../postgres/database.js";
import { type InstanceIdentity, type InstanceLoad, InstanceRegistry } from "../postgres/registry.js";
import type { InFlightExchanges } from "./inFlight.js";
import { hostPortOf } from "./listenAddress.js";

/** `shared.instanceId`, or `<hostname>:<proxy port>`. */
export function instanceIdOf(config: Config, proxyPort: number): string {
  return config.shared.instanceId ?? `${hostname()}:${proxyPort}`;
}

const WILDCARD = new Set(["0.0.0.0", "::", "[::]"]);

/** `host:port` another machine can use: a wildcard bind (0.0.0.0, ::) is named by this host's name. */
export function advertisedHostPort(a: AddressInfo): string {
  return WILDCARD.has(a.address) ? `${hostname()}:${a.port}` : hostPortOf(a);
}

/** The control API's URL, a wildcard host replaced the same way. */
function advertisedUrl(url: string): string {
  const u = new URL(url);
  if (WILDCARD.has(u.hostname)) u.hostname = hostname();
  return u.origin;
}

/** Captures per second between one sample and the next. */
class CaptureRate {
  readonly #count: () => number;
  #last: { t: number; n: number };

  constructor(count: () => number) {
    this.#count = count;
    this.#last = { t: performance.now(), n: count() };
  }

  sample(): number {
    const now = { t: performance.now(), n: this.#count() };
    const seconds = (now.t - this.#last.t) / 1000;
    const rate = seconds > 0 ? (now.n - this.#last.n) / seconds : 0;
    this.#last = now;
    return Math.round(rate * 100) / 100;
  }
}

export interface FleetDeps {
  config: Config;
  log: Logger;
  inFlight: InFlightExchanges;
  /** Captures written so far (the archiver's counter). */
  captures: () => number;
}

export interface FleetPlace {
  /** The proxy's listening address. */
  proxy: AddressInfo;
  /** `http://host:port` of the control API, or null. */
  control: string | null;
}

export class FleetMembership {
  readonly #d: FleetDeps;
  readonly #rate: CaptureRate;
  readonly #startedAt = new Date();
  #me: InstanceIdentity | null = null;
  #db: SharedDatabase | null = null;
  #registry: InstanceRegistry | null = null;
  /** Standalone: samples the capture rate every heartbeat, as the registry's heartbeat does. */
  #sampler: NodeJS.Timeout | null = null;
  #capturesPerSec = 0;

  constructor(d: FleetDeps) {
    this.#d = d;
    this.#rate = new CaptureRate(d.captures);
  }

  /**
   * Join the fleet in `shared` (null = standalone). The id is the database's (see
   * instanceIdOf); a live instance with the same id refuses the start (ProxyError "ERR_CONFIG").
   */
  async start(shared: SharedDatabase | null, where: FleetPlace): Promise<void> {
    const { config, log } = this.#d;
    this.#db = shared;
    const id = shared ? shared.instanceId : instanceIdOf(config, where.proxy.port);
    const me = { id, hostname: hostname(), pid: process.pid, proxy: advertisedHostPort(where.proxy), control: where.control ? advertisedUrl(where.control) : null, version: VERSION };
    if (!shared) {
      this.#me = me;
      this.#sampler = setInterval(() => this.#sample(), config.shared.heartbeatMs);
      this.#sampler.unref();
      return;
    }
    const registry = new InstanceRegistry(shared, me, { heartbeatMs: config.shared.heartbeatMs, log, load: () => this.#sample() });
    await registry.start();
    this.#registry = registry;
    this.#me = me;
  }

  /** `GET /api/v1/fleet`: the live instances, least loaded first. */
  answer = async (): Promise<FleetAnswer> => {
    if (this.#db) return { shared: true, store: this.#db.name, instances: this.#registry ? await this.#registry.list() : [] };
    if (!this.#me) return { shared: false, instances: [] };
    const now = new Date().toISOString();
    const load = { inFlight: this.#d.inFlight.size, capturesPerSec: this.#capturesPerSec };
    return { shared: false, instances: [{ ...this.#me, startedAt: this.#startedAt.toISOString(), heartbeatAt: now, load }] };
  };

  /** Leave the fleet at once (crawlers stop picking this instance while it drains). */
  async stop(): Promise<void> {
    if (this.#sampler) clearInterval(this.#sampler);
    await this.#registry?.stop();
  }

  #sample(): InstanceLoad {
    this.#capturesPerSec = this.#rate.sample();
    return { inFlight: this.#d.inFlight.size, capturesPerSec: this.#capturesPerSec };
  }
}
