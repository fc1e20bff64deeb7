/**
 * `lathe serve` as a child process (the real command, from dist/ via bin/lathe.js; needs dist/,
 * built by npm run build): the control API on an ephemeral port unless `args` say otherwise,
 * resolved once it prints its proxy address (and control URL, when enabled).
 */
import { type ChildProcess, spawn } from "node:child_process";

export const BIN = new URL("../../bin/lathe.js", import.meta.url).pathname;

export interface ServeProcess {
  proc: ChildProcess;
  /** Everything it printed so far (stdout and stderr). */
  out(): string;
  proxyUrl: string;
  /** `http://host:port` of the control API, or null when disabled. */
  controlUrl: string | null;
  /** SIGTERM and wait for the exit (graceful stop: files closed). */
  stop(): Promise<number | null>;
}

export type Served = ServeProcess;

export function startServe(args: string[], env: NodeJS.ProcessEnv = {}, timeoutMs = 30_000): Promise<ServeProcess> {
  const control = args.some((a) => a.startsWith("--control-port")) ? [] : ["--control-port", "0"];
  const proc = spawn(process.execPath, [BIN, "serve", ...control, ...args], { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, ...env } });
  let out = "";
  const exited = new Promise<number | null>((r) => proc.once("exit", (code) => r(code)));
  const stop = async () => {
    if (proc.exitCode === null && proc.signalCode === null) proc.kill("SIGTERM");
    return exited;
  };
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => {
      proc.kill("SIGKILL");
      reject(new Error(`lathe serve did not start: ${out}`));
    }, timeoutMs);
    const onData = (d: Buffer) => {
      out += d;
      const proxy = /listening on (http:\/\/\S+)/.exec(out);
      const control = /control API: (http:\/\/\S+?)\/api\/v1\//.exec(out);
      const controlOff = /--control-port[= ]-1\b/.test(args.join(" "));
      if (proxy && /WARC directory: /.test(out) && (control || controlOff)) {
        clearTimeout(t);
        resolve({ proc, out: () => out, proxyUrl: proxy[1]!, controlUrl: control?.[1] ?? null, stop });
      }
    };
    proc.stdout!.on("data", onData);
    proc.stderr!.on("data", (d: Buffer) => (out += d));
    proc.once("exit", (code) => {
      clearTimeout(t);
      reject(new Error(`lathe serve exited ${code}: ${out}`));
    });
  });
}
