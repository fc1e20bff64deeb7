/** `lathe serve` as a child process (the real command; needs dist/, built by npm run build). */
import { type ChildProcess, spawn } from "node:child_process";

export const BIN = new URL("../../bin/lathe.js", import.meta.url).pathname;

export interface Served {
  proc: ChildProcess;
  /** stdout and stderr so far. */
  out: () => string;
  proxyUrl: string;
}

/** Start `lathe serve --control-port 0 …args`; resolves once it says where it listens. */
export function startServe(args: string[]): Promise<Served> {
  const proc = spawn(process.execPath, [BIN, "serve", "--control-port", "0", ...args], { stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  proc.stdout!.on("data", (d) => (out += d));
  proc.stderr!.on("data", (d) => (out += d));
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`lathe serve did not start: ${out}`)), 20000);
    proc.stdout!.on("data", () => {
      const m = /listening on (http:\/\/\S+)/.exec(out);
      if (m && /WARC directory: /.test(out)) {
        clearTimeout(t);
        resolve({ proc, out: () => out, proxyUrl: m[1]! });
      }
    });
    proc.on("exit", (code) => reject(new Error(`lathe serve exited ${code}: ${out}`)));
  });
}
