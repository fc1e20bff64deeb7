// Starting and stopping the servers a benchmark measures (scripts/bench.mjs, bench-postgres.mjs):
// a free loopback port, and a child process that is ready when it says "listening" or its port
// accepts connections. Node built-ins only.
import { spawn } from "node:child_process";
import { writeFileSync } from "node:fs";
import net from "node:net";

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

export function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

export const canConnect = (port) =>
  new Promise((resolve) => {
    const c = net.connect({ host: "127.0.0.1", port });
    c.once("connect", () => (c.destroy(), resolve(true)));
    c.once("error", () => resolve(false));
  });

/**
 * Starts a server process and waits until it is ready: it printed "listening" (lathe) or its port
 * accepts connections. Its output goes to logFile. Rejects if it exits first or after 30 s.
 */
export async function startServer(name, cmd, args, port, logFile, env = process.env) {
  const child = spawn(cmd, args, { stdio: ["ignore", "pipe", "pipe"], env });
  const log = [];
  let said = false;
  let exited = null;
  const onData = (chunk) => {
    log.push(chunk);
    if (/listening/i.test(chunk.toString("latin1"))) said = true;
  };
  child.stdout.on("data", onData);
  child.stderr.on("data", onData);
  const exitedP = new Promise((resolve) =>
    child.once("exit", (code, sig) => {
      exited = { code, sig };
      resolve(exited);
    }),
  );
  child.once("error", (e) => {
    exited = { code: null, sig: null, error: e };
  });
  const flush = () => writeFileSync(logFile, Buffer.concat(log));
  const t0 = Date.now();
  for (;;) {
    if (exited) {
      flush();
      throw new Error(`${name} exited before it was ready (${exited.error?.message ?? exited.code ?? exited.sig}); its output: ${logFile}\n${Buffer.concat(log).toString().slice(-2000)}`);
    }
    if (said || (await canConnect(port))) break;
    if (Date.now() - t0 > 30_000) {
      child.kill("SIGKILL");
      flush();
      throw new Error(`${name} was not ready after 30 s; its output: ${logFile}`);
    }
    await sleep(100);
  }
  // "listening" is printed right after listen(); make sure the port really accepts before measuring.
  for (let i = 0; i < 50 && !(await canConnect(port)); i++) await sleep(100);
  return {
    child,
    pid: child.pid,
    /** SIGTERM, wait for the exit (SIGKILL after graceMs); returns the exit status. */
    async stop(graceMs = 60_000) {
      if (!exited) {
        child.kill("SIGTERM");
        const timer = setTimeout(() => child.kill("SIGKILL"), graceMs);
        await exitedP;
        clearTimeout(timer);
      }
      flush();
      return exited;
    },
  };
}
