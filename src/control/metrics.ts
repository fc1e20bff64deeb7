/**
 * Prometheus text exposition format 0.0.4 (served as `text/plain; version=0.0.4`) from a flat
 * list of samples. Pure.
 *
 * Samples that share a `name` form one family: its `# HELP` and `# TYPE` lines are written once,
 * before its first sample, and families keep the order in which they first appear. Histogram and
 * summary samples carry their `suffix` (`_bucket`, `_sum`, `_count`) and share the family name.
 */

export type MetricType = "counter" | "gauge" | "histogram" | "summary" | "untyped";

export interface MetricSample {
  /** Family name, `[a-zA-Z_:][a-zA-Z0-9_:]*` (a counter's name conventionally ends in `_total`). */
  name: string;
  help: string;
  type: MetricType;
  labels?: Record<string, string | number | boolean>;
  value: number | bigint;
  /** Histogram and summary lines only. */
  suffix?: "_bucket" | "_sum" | "_count";
  /** Milliseconds since the epoch, rarely wanted. */
  timestampMs?: number;
}

/** The media type to answer `/metrics` with. */
export const METRICS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8";

const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;

/** HELP text: backslash and line feed are escaped. */
export function escapeHelp(s: string): string {
  return s.replace(/\\/g, "\\\\").replace(/\n/g, "\\n");
}

/** Label values: backslash, double quote and line feed are escaped. */
export function escapeLabelValue(s: string): string {
  return s.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n");
}

/** A sample value as Prometheus parses it: `NaN`, `+Inf`, `-Inf` or a Go-style float. */
export function formatValue(v: number | bigint): string {
  if (typeof v === "bigint") return v.toString();
  if (Number.isNaN(v)) return "NaN";
  if (v === Infinity) return "+Inf";
  if (v === -Infinity) return "-Inf";
  if (Object.is(v, -0)) return "0";
  return String(v);
}

function labelsText(labels: MetricSample["labels"], where: string): string {
  if (!labels) return "";
  const parts: string[] = [];
  for (const [k, v] of Object.entries(labels)) {
    if (!LABEL_NAME.test(k) || k.startsWith("__")) throw new TypeError(`${where}: invalid label name ${JSON.stringify(k)}`);
    const text = typeof v === "number" ? formatValue(v) : String(v);
    parts.push(`${k}="${escapeLabelValue(text)}"`);
  }
  return parts.length ? `{${parts.join(",")}}` : "";
}

/**
 * Render samples as one exposition document (ends with a line feed; empty input → empty string).
 * Throws TypeError on an invalid metric or label name, or one name given two types or helps.
 */
export function renderMetrics(samples: readonly MetricSample[]): string {
  const families = new Map<string, { help: string; type: MetricType; lines: string[] }>();
  for (const s of samples) {
    if (!METRIC_NAME.test(s.name)) throw new TypeError(`metric name ${JSON.stringify(s.name)} is invalid`);
    let f = families.get(s.name);
    if (!f) {
      f = { help: s.help, type: s.type, lines: [] };
      families.set(s.name, f);
    } else if (f.type !== s.type || f.help !== s.help) {
      throw new TypeError(`metric ${s.name} is given with two different types or help texts`);
    }
    if (s.suffix !== undefined && s.type !== "histogram" && s.type !== "summary") {
      throw new TypeError(`metric ${s.name}: suffix ${s.suffix} is only for histogram and summary samples`);
    }
    if (s.suffix === "_bucket" && s.type === "histogram" && !(s.labels && "le" in s.labels)) {
      throw new TypeError(`metric ${s.name}: a histogram bucket needs an "le" label`);
    }
    const ts = s.timestampMs !== undefined ? ` ${Math.trunc(s.timestampMs)}` : "";
    f.lines.push(`${s.name}${s.suffix ?? ""}${labelsText(s.labels, s.name)} ${formatValue(s.value)}${ts}`);
  }
  let out = "";
  for (const [name, f] of families) {
    out += `# HELP ${name} ${escapeHelp(f.help)}\n# TYPE ${name} ${f.type}\n`;
    for (const line of f.lines) out += line + "\n";
  }
  return out;
}
