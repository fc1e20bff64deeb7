/**
 * What a running lathe reports about itself: `GET /status` on the proxy port (warcprox's shape),
 * `GET /api/v1/status` and `/metrics` on the control port. All read the same live counters.
 */
import type { Socket } from "node:net";
import type { Config } from "../config/schema.js";
import { VERSION } from "../core/version.js";
import type { CollectionRegistry } from "../archive/collections.js";
import { type SessionRegistry, summaryOf } from "../archive/sessions.js";
import type { DedupIndex } from "../dedup/types.js";
import { RunningStats } from "../warcprox/runningStats.js";
import { errorMessage } from "../core/errors.js";
import type { StatsStore } from "../warcprox/statsStore.js";
import type { Politeness } from "../politeness/politeness.js";
import { warcproxStatus } from "../warcprox/status.js";
import type { ArchivePipeline } from "./archivePipeline.js";
import type { CollectionCounters } from "./collectionCounters.js";
import type { InFlightExchanges } from "./inFlight.js";
import { prometheusText } from "./prometheus.js";
import { refusalFor, waitingTotals } from "./writerHealth.js";

export interface StatusSources {
  config: Config;
  dedupIndex: DedupIndex;
  pipeline: ArchivePipeline;
  inFlight: InFlightExchanges;
  sessions: SessionRegistry;
  collections: CollectionRegistry;
  counters: CollectionCounters;
  stats: StatsStore;
  politeness: Politeness;
}

export class StatusReports {
  readonly #s: StatusSources;
  readonly startedAt = new Date();
  /** URLs and bytes per second over recent windows (warcprox's rates); stop() it at shutdown. */
  readonly rates: RunningStats;

  constructor(s: StatusSources) {
    this.#s = s;
    this.rates = new RunningStats(() => ({ urls: s.pipeline.archiver.stats.captures, bytes: this.warcBytes() }));
  }

  warcBytes = (): number => this.#s.pipeline.writerRegistry.all().reduce((n, w) => n + w.state().bytesWritten, 0);

  /** lathe's own counters: the `lathe` part of the proxy's /status, and the base of the control API's. */
  lathe = (): Record<string, unknown> => {
    const { config, dedupIndex, pipeline } = this.#s;
    const { archiver, dedup, writerRegistry } = pipeline;
    return {
      version: VERSION,
      compat: "warcprox-2.13.1",
      captures: archiver.stats.captures,
      revisits: archiver.stats.revisits,
      failed: archiver.stats.failed,
      bytesSaved: archiver.stats.bytesSaved,
      dedup: { policy: config.dedup.policy, engine: dedupIndex.engine, entries: dedupIndex.count(), ...dedupIndex.report(), buckets: Object.fromEntries(dedup.counters) },
      writers: [...writerRegistry.map.entries()].map(([prefix, w]) => {
        const st = w.state();
        return { prefix, currentFile: st.currentFile, filesWritten: st.filesWritten.length, records: st.recordsWritten, bytes: st.bytesWritten, failed: st.failed?.message ?? null, waiting: st.waiting };
      }),
      ...this.waiting(),
      ...archiver.troubles.report(),
      politeness: this.#s.politeness.report(),
    };
  };

  /**
   * Captures waiting for writers that cannot write (issue #26): how many, their bytes, how long
   * the oldest has waited, the writers' failure, and why new exchanges are refused (or null).
   */
  waiting = (): { waiting: { captures: number; bytes: number; oldestMs: number | null; failure: string | null; refusing: string | null } } => {
    const states = this.#s.pipeline.writerRegistry.all().map((w) => w.state());
    const t = waitingTotals(states);
    const now = Date.now();
    const refusing = refusalFor(states, this.#s.config.capture, now)?.message ?? null;
    return { waiting: { captures: t.captures, bytes: t.bytes, oldestMs: t.since === null ? null : now - t.since, failure: t.failure?.message ?? null, refusing } };
  };

  /** `GET /status` on the proxy port, for a request that arrived on `socket`. */
  proxyStatus = async (socket: Socket): Promise<Record<string, unknown>> => {
    const { archiver } = this.#s.pipeline;
    const buckets = await this.#statsBuckets();
    const lathe = () => ({ ...this.lathe(), ...buckets });
    const sources = { version: VERSION, startedAt: this.startedAt, activeStarts: () => this.#s.inFlight.starts(), urlsProcessed: () => archiver.stats.captures, warcBytesWritten: this.warcBytes, rates: this.rates, lathe };
    return warcproxStatus(sources, socket);
  };

  /** The Warcprox-Meta stats buckets (a fleet's, read from the shared store), or null and why. */
  async #statsBuckets(): Promise<{ statsBuckets: Record<string, unknown> | null; statsBucketsError?: string }> {
    try {
      return { statsBuckets: Object.fromEntries((await this.#s.stats.buckets()).map((b) => [b.bucket, b])) };
    } catch (e) {
      return { statsBuckets: null, statsBucketsError: errorMessage(e) };
    }
  }

  /**
   * `GET /api/v1/status`: lathe's counters, per session, per collection and per stats bucket (in
   * a fleet: the fleet's buckets, read from the shared store; null with the reason while it is away).
   */
  controlStatus = async (): Promise<Record<string, unknown>> => {
    const { sessions, collections, counters } = this.#s;
    const base = {
      ...this.lathe(),
      sessions: sessions.list().map((x) => summaryOf(x)),
      collections: Object.fromEntries(collections.list().map((c) => [c.name, { prefix: c.prefix, ...counters.report(c.name) }])),
    };
    return { ...base, ...(await this.#statsBuckets()) };
  };

  /** `/metrics`, Prometheus text. */
  metrics = (): string => {
    const { pipeline, inFlight, sessions } = this.#s;
    return prometheusText({ archiver: pipeline.archiver, writerRegistry: pipeline.writerRegistry, warcBytes: this.warcBytes(), inFlight: inFlight.size, sessionsOpen: sessions.list().length, politeness: this.#s.politeness.report(0) });
  };
}
