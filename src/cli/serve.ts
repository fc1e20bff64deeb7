import { parseArgs } from "node:util";
import { loadConfig } from "./loadConfig.js";
import { startLathe } from "../main.js";
import { ProxyError } from "../core/errors.js";
import { mallocTrimHelper, startMallocTrimming } from "../core/mallocTrim.js";

/**
 * How often a running `lathe serve` gives freed heap memory back to the kernel (core/mallocTrim).
 * `LATHE_MALLOC_TRIM_MS` overrides it (0 turns trimming off), for measuring its effect.
 */
function mallocTrimIntervalMs(): number {
  const v = process.env.LATHE_MALLOC_TRIM_MS;
  if (v === undefined || v === "") return 10_000;
  if (!/^\d+$/.test(v)) throw new ProxyError("ERR_CONFIG", `LATHE_MALLOC_TRIM_MS must be a whole number of milliseconds (0 = off), got ${JSON.stringify(v)}`);
  return Number(v);
}

export const SERVE_HELP = `lathe serve [options]   run the recording proxy

  --host HOST      address to listen on (default 127.0.0.1)
  --port PORT      proxy port (default 8000)
  --dir DIR        WARC output directory (default ./warcs)
  --certs DIR      CA directory (default ./certs)
  --control-port P  REST control API port (default 8001; --control-port=-1 disables it)
  --config FILE    settings file (default ./proxy.config.json); flags override it
  --json-logs      one JSON object per log line
  --postgresql URL  share dedup, stats, limits and the registry with other instances through
                   PostgreSQL (postgresql://user:password@host:port/db; also LATHE_POSTGRESQL)
`;

/** The start-up lines about the control API at `controlUrl` (its index, the OpenAPI document, the live page). */
export function controlBanner(controlUrl: string): string {
  return `control API: ${controlUrl}/api/v1/ (OpenAPI at ${controlUrl}/openapi.json)\nlive page: ${controlUrl}/\n`;
}

export async function serveCommand(argv: string[], out: (s: string) => void): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    options: {
      host: { type: "string" },
      port: { type: "string" },
      dir: { type: "string" },
      certs: { type: "string" },
      config: { type: "string" },
      "control-port": { type: "string" },
      "json-logs": { type: "boolean" },
      postgresql: { type: "string" },
      help: { type: "boolean", short: "h" },
    },
    strict: true,
  });
  if (values.help) {
    out(SERVE_HELP);
    return 0;
  }
  let port: number | undefined;
  if (values.port !== undefined) {
    port = Number(values.port);
    if (!/^\d+$/.test(values.port) || port > 65535) throw new ProxyError("ERR_CONFIG", `--port must be a number from 0 to 65535, got ${JSON.stringify(values.port)}`);
  }
  let controlPort: number | undefined;
  if (values["control-port"] !== undefined) {
    controlPort = Number(values["control-port"]);
    if (!/^-?\d+$/.test(values["control-port"]) || controlPort < -1 || controlPort > 65535) throw new ProxyError("ERR_CONFIG", `--control-port must be a number from -1 to 65535, got ${JSON.stringify(values["control-port"])}`);
  }
  const overrides = {
    control: controlPort !== undefined ? { port: controlPort } : {},
    proxy: { ...(values.host !== undefined ? { host: values.host } : {}), ...(port !== undefined ? { port } : {}) },
    warc: values.dir !== undefined ? { dir: values.dir } : {},
    certs: values.certs !== undefined ? { dir: values.certs } : {},
    log: values["json-logs"] ? { json: true } : {},
    shared: values.postgresql !== undefined ? { postgresql: values.postgresql } : {},
  };
  const config = loadConfig(values.config, overrides);
  const trimMs = mallocTrimIntervalMs();
  const lathe = await startLathe(config);
  // Only the process that owns the allocator trims it, so this lives here and not in startLathe
  // (which tests run inside their own processes).
  const { trimmer, missing } = mallocTrimHelper();
  const stopTrimming = startMallocTrimming(trimMs, trimmer);
  if (missing) out(`note: memory is not trimmed: ${missing}\n`);
  out(`lathe proxy listening on ${lathe.proxyUrl}\n`);
  out(`CA certificate: ${lathe.ca.certPath}\n`);
  out(`WARC directory: ${lathe.warcDir}\n`);
  if (lathe.shared) out(`shared store: ${lathe.shared.url.redacted} (instance ${lathe.shared.instanceId})\n`);
  if (lathe.controlUrl) out(controlBanner(lathe.controlUrl));

  await new Promise<void>((resolve) => {
    let stopping = false;
    const stop = (sig: string) => {
      if (stopping) {
        out(`second ${sig}: exiting now; .open files will be recovered at the next start\n`);
        process.exit(130);
      }
      stopping = true;
      out(`${sig}: finishing captures in flight and closing WARC files...\n`);
      lathe.stop().then(resolve, (e) => {
        out(`error while stopping: ${(e as Error).message}\n`);
        resolve();
      });
    };
    process.on("SIGINT", () => stop("SIGINT"));
    process.on("SIGTERM", () => stop("SIGTERM"));
  });
  stopTrimming();
  for (const w of lathe.writers.values()) {
    for (const f of w.state().filesWritten) out(`wrote ${f}\n`);
  }
  return 0;
}
