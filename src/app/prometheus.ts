/** The `/metrics` text of a running lathe (Prometheus exposition format 0.0.4). */
import type { Archiver } from "../archive/pipeline.js";
import type { WriterRegistry } from "../archive/writers.js";
import { waitingTotals } from "./writerHealth.js";
import type { PolitenessReport } from "../politeness/politeness.js";

export interface MetricSources {
  archiver: Archiver;
  writerRegistry: WriterRegistry;
  warcBytes: number;
  inFlight: number;
  sessionsOpen: number;
  politeness: PolitenessReport;
}

export function prometheusText(s: MetricSources): string {
  const { archiver, writerRegistry } = s;
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
  metric("lathe_warc_bytes_written_total", "Bytes written to WARC files.", "counter", [[{}, s.warcBytes]]);
  metric("lathe_exchanges_in_flight", "Exchanges in progress.", "gauge", [[{}, s.inFlight]]);
  metric("lathe_sessions_open", "Recording sessions open.", "gauge", [[{}, s.sessionsOpen]]);
  const writers = [...writerRegistry.map.entries()].map(([series, w]) => ({ series, st: w.state() }));
  metric("lathe_writer_failed", "1 while the writer of a series cannot write.", "gauge", writers.length ? writers.map(({ series, st }) => [{ series }, st.failed ? 1 : 0]) : [[{}, 0]]);
  metric("lathe_writer_failure_info", "1 per writer that cannot write, with the reason.", "gauge", writers.filter(({ st }) => st.failed).map(({ series, st }) => [{ series, reason: st.failed!.message }, 1]));
  const waiting = waitingTotals(writerRegistry.all().map((w) => w.state()));
  metric("lathe_captures_waiting", "Captures waiting for a writer that cannot write (rollover durability keeps them and writes them later).", "gauge", [[{}, waiting.captures]]);
  metric("lathe_capture_bytes_waiting", "Bytes (memory + spool) of the captures waiting for a writer.", "gauge", [[{}, waiting.bytes]]);
  metric("lathe_capture_wait_seconds", "How long the oldest capture waiting for a writer has waited.", "gauge", [[{}, waiting.since === null ? 0 : (Date.now() - waiting.since) / 1000]]);
  metric("lathe_captures_lost_total", "Captures a closing writer gave up (written to lost/ if possible).", "counter", [[{}, archiver.troubles.lostCount]]);
  metric("lathe_captures_spool_truncated_total", "Captures recorded truncated because their spool could not be written.", "counter", [[{}, archiver.troubles.truncatedCount]]);
  politenessMetrics(s.politeness, metric);
  return lines.join("\n") + "\n";
}

type Metric = (name: string, help: string, type: string, samples: Array<[Record<string, string>, number]>) => void;

/** Totals only: a label per host would grow without bound on a crawl (the hosts are in /status and the control API). */
function politenessMetrics(p: PolitenessReport, metric: Metric): void {
  metric("lathe_politeness_hosts", "Hosts the politeness gates hold state for.", "gauge", [[{}, p.hostsKnown]]);
  metric("lathe_politeness_requests_active", "Requests to polite hosts in flight.", "gauge", [[{}, p.active]]);
  metric("lathe_politeness_requests_queued", "Requests waiting for their turn at a host.", "gauge", [[{}, p.queued]]);
  metric("lathe_politeness_hosts_backing_off", "Hosts in back-off after a 5xx or 429.", "gauge", [[{}, p.backingOff]]);
  metric("lathe_politeness_refused_total", "Requests politeness refused, by rule.", "counter", Object.entries(p.refused).map(([rule, n]) => [{ rule }, n]));
  metric("lathe_politeness_robots_fetches_total", "robots.txt fetches.", "counter", [[{}, p.robotsFetches]]);
  metric("lathe_politeness_embeds_exempted_total", "Page requisites robots.txt disallows that went ahead (obey-except-embeds).", "counter", [[{}, p.embedsExempted]]);
}
