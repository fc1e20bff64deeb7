/**
 * `GET /status` on the proxy port, in warcprox's shape (warcprox-compat.md §4): brozzler reads
 * `role` to decide whether it talks to warcprox. lathe's own fields live under `"lathe"`.
 */
import { hostname } from "node:os";
import type { Socket } from "node:net";
import type { RunningStats } from "./runningStats.js";

export interface StatusSources {
  version: string;
  startedAt: Date;
  /** Start times (ms) of the exchanges in flight. */
  activeStarts(): number[];
  urlsProcessed(): number;
  warcBytesWritten(): number;
  rates: RunningStats;
  lathe(): Record<string, unknown>;
}

/** Python's datetime.isoformat() for an aware UTC datetime: µs only when non-zero. */
export function pythonIsoformat(d: Date): string {
  const iso = d.toISOString(); // ...sss Z
  const ms = d.getUTCMilliseconds();
  return ms === 0 ? `${iso.slice(0, 19)}+00:00` : `${iso.slice(0, 19)}.${String(ms).padStart(3, "0")}000+00:00`;
}

export function warcproxStatus(src: StatusSources, socket: Socket, nowMs = Date.now()): Record<string, unknown> {
  const starts = src.activeStarts();
  const earliest = starts.length ? Math.min(...starts) : null;
  return {
    role: "warcprox",
    version: src.version,
    host: hostname(),
    address: socket.localAddress ?? "",
    port: socket.localPort ?? 0,
    pid: process.pid,
    threads: 0,
    active_requests: starts.length,
    unaccepted_requests: 0,
    load: 0,
    queued_urls: 0,
    queue_max_size: 0,
    urls_processed: src.urlsProcessed(),
    warc_bytes_written: src.warcBytesWritten(),
    start_time: pythonIsoformat(src.startedAt),
    rates_1min: src.rates.rates(1, nowMs),
    rates_5min: src.rates.rates(5, nowMs),
    rates_15min: src.rates.rates(15, nowMs),
    earliest_still_active_fetch_start: earliest === null ? null : pythonIsoformat(new Date(earliest)),
    earliest_still_active_socket: { socket: "None", name: null, peername: null, future_status: null, exception: null },
    earliest_still_active_postfetch: { url: null, postfetch_plugin: null },
    seconds_behind: earliest === null ? 0 : (nowMs - earliest) / 1000,
    postfetch_chain: ["MimeTypeFilter", "DedupLoader", "WarcWriterProcessor", "DedupDb", "StatsProcessor", "RunningStats"].map((processor) => ({
      processor,
      queued_urls: 0,
    })),
    lathe: src.lathe(),
  };
}
