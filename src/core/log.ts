/**
 * Structured logging: one line per event, a constant event name plus fields.
 * Human-readable `event key=value ...` by default, one JSON object per line with `json: true`.
 * Field values named like credentials are never printed.
 */
export type Level = "debug" | "info" | "warn" | "error";
export type Fields = Record<string, unknown>;

export interface Logger {
  debug(event: string, fields?: Fields): void;
  info(event: string, fields?: Fields): void;
  warn(event: string, fields?: Fields): void;
  error(event: string, fields?: Fields): void;
  child(fields: Fields): Logger;
}

const ORDER: Record<Level, number> = { debug: 10, info: 20, warn: 30, error: 40 };
const SECRET = /^(authorization|proxy-authorization|cookie|set-cookie|password|token|secret)$/i;

export interface LoggerOptions {
  level?: Level;
  json?: boolean;
  write?: (line: string) => void;
  base?: Fields;
}

function render(v: unknown): string {
  if (v instanceof Error) return JSON.stringify(v.message);
  if (typeof v === "string") return /^[\w.:/@+-]*$/.test(v) && v !== "" ? v : JSON.stringify(v);
  if (typeof v === "bigint") return v.toString();
  return JSON.stringify(v);
}

function clean(fields: Fields): Fields {
  const out: Fields = {};
  for (const [k, v] of Object.entries(fields)) {
    if (v === undefined) continue;
    out[k] = SECRET.test(k) ? "[redacted]" : v instanceof Error ? v.message : typeof v === "bigint" ? v.toString() : v;
  }
  return out;
}

export function createLogger(opts: LoggerOptions = {}): Logger {
  const min = ORDER[opts.level ?? "info"];
  const write = opts.write ?? ((line: string) => process.stderr.write(line + "\n"));
  const base = opts.base ?? {};
  const emit = (level: Level, event: string, fields: Fields = {}) => {
    if (ORDER[level] < min) return;
    const all = clean({ ...base, ...fields });
    if (opts.json) {
      write(JSON.stringify({ time: new Date().toISOString(), level, event, ...all }));
    } else {
      const parts = Object.entries(all).map(([k, v]) => `${k}=${render(v)}`);
      write(`${new Date().toISOString()} ${level.padEnd(5)} ${event}${parts.length ? " " + parts.join(" ") : ""}`);
    }
  };
  return {
    debug: (e, f) => emit("debug", e, f),
    info: (e, f) => emit("info", e, f),
    warn: (e, f) => emit("warn", e, f),
    error: (e, f) => emit("error", e, f),
    child: (fields) => createLogger({ ...opts, base: { ...base, ...fields } }),
  };
}

export const silentLogger: Logger = {
  debug() {},
  info() {},
  warn() {},
  error() {},
  child() {
    return silentLogger;
  },
};
