/** The `/metrics` text of a running lathe (Prometheus exposition format 0.0.4). */
import type { Archiver } from "../archive/pipeline.js";
import type { WriterRegistry } from "../archive/writers.js";

export interface MetricSources {
  archiver: Archiver;
  writerRegistry: WriterRegistry;
  warcBytes: number;
  inFlight: number;
  sessionsOpen: number;
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
  metric("lathe_writer_failed", "1 while the writer of a series cannot write.", "gauge", writerRegistry.all().length ? [...writerRegistry.map.entries()].map(([series, w]) => [{ series }, w.state().failed ? 1 : 0]) : [[{}, 0]]);
  return lines.join("\n") + "\n";
}
