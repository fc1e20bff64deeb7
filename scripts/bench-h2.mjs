#!/usr/bin/env node
// `npm run bench:h2` (after `npm run build`; also part of `npm run bench`): HTTP/2 through lathe.
// Small bodies with 32 requests in flight, three ways, alternating rounds, medians:
//   direct-h2   32 streams on one h2 connection straight to the origin (the machine's limit)
//   lathe-h2    32 streams on one h2 connection through one lathe tunnel (h2 on both legs)
//   lathe-h1    32 HTTP/1.1 keep-alive tunnels through lathe (h2 toward the origin)
//   lathe-h1-h1 the same through a second lathe with upstream.http2 off (HTTP/1.1 on both legs)
// It prints requests per second, lathe's CPU per exchange (all its threads, /proc) and its peak
// RSS, and checks every body byte for byte. Goal (issue #21): h2 CPU per exchange no worse than
// HTTP/1.1's. The origin (node:http2, h2 and HTTP/1.1) runs in a child process of its own.
// Node built-ins only.
//
//   node scripts/bench-h2.mjs [--requests N] [--rounds R]     defaults 3000 and 3
import { fork, spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import http2 from "node:http2";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import tls from "node:tls";
import { fileURLToPath } from "node:url";

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const certDir = path.resolve(process.env.LATHE_BENCH_DIR ?? path.resolve(repoRoot, "..", "shared", "bench"), "testcerts");
const arg = (name, dflt) => {
  const i = process.argv.indexOf(name);
  return i > 0 ? Number(process.argv[i + 1]) : dflt;
};
const REQUESTS = arg("--requests", 3000);
const ROUNDS = arg("--rounds", 3);
const CONCURRENCY = 32;
const BODY = Buffer.alloc(1024, "lathe h2 bench ");
const TIME_CAP_MS = 60_000;

if (process.argv[2] === "--origin") runOrigin();
else await main();

/** The child: an h2 + HTTP/1.1 origin answering every request with BODY. */
function runOrigin() {
  const server = http2.createSecureServer({
    key: readFileSync(path.join(certDir, "origin.key")),
    cert: readFileSync(path.join(certDir, "hosts", "127.0.0.1.pem")),
    allowHTTP1: true,
  });
  server.on("request", (_req, res) => {
    res.writeHead(200, { "content-type": "application/octet-stream", "content-length": BODY.length });
    res.end(BODY);
  });
  server.listen(0, "127.0.0.1", () => process.send({ port: server.address().port }));
}

async function main() {
  const origin = fork(fileURLToPath(import.meta.url), ["--origin"], { stdio: "inherit" });
  const originPort = await new Promise((r) => origin.once("message", (m) => r(m.port)));
  const work = mkdtempSync(path.join(os.tmpdir(), "lathe-bench-h2-"));
  const lathe = await startLathe(path.join(work, "a"), true);
  const h1only = await startLathe(path.join(work, "b"), false);
  const rows = { "direct-h2": [], "lathe-h2": [], "lathe-h1": [], "lathe-h1-h1": [] };
  try {
    // Warm-up: leaves minted, sessions and pools open.
    await runRow(() => h2Load({ port: originPort, proxy: lathe.port }, lathe.ca, 200), lathe.pid);
    await runRow(() => h1Load(originPort, h1only.port, h1only.ca, 200), h1only.pid);
    for (let round = 0; round < ROUNDS; round++) {
      rows["direct-h2"].push(await runRow(() => h2Load({ port: originPort }, null, REQUESTS), null));
      rows["lathe-h2"].push(await runRow(() => h2Load({ port: originPort, proxy: lathe.port }, lathe.ca, REQUESTS), lathe.pid));
      rows["lathe-h1"].push(await runRow(() => h1Load(originPort, lathe.port, lathe.ca, REQUESTS), lathe.pid));
      rows["lathe-h1-h1"].push(await runRow(() => h1Load(originPort, h1only.port, h1only.ca, REQUESTS), h1only.pid));
    }
  } finally {
    for (const l of [lathe, h1only]) l.child.kill("SIGTERM");
    origin.kill();
    await Promise.all([lathe, h1only].map((l) => new Promise((r) => l.child.once("exit", r))));
    rmSync(work, { recursive: true, force: true });
  }
  report(rows);
}

/** lathe serve on a free port, trusting the bench CA upstream; resolves once it listens. */
async function startLathe(work, upstreamH2) {
  mkdirSync(work, { recursive: true });
  const config = path.join(work, "config.json");
  writeFileSync(config, JSON.stringify({ upstream: { caFile: path.join(certDir, "bench-ca.pem"), http2: upstreamH2 }, log: { level: "warn" } }));
  const port = await freePort();
  const child = spawn(process.execPath, [path.join(repoRoot, "bin", "lathe.js"), "serve", "--config", config, "--port", String(port), "--dir", path.join(work, "warcs"), "--certs", path.join(work, "certs"), "--control-port=-1"], { stdio: ["ignore", "pipe", "inherit"] });
  await new Promise((resolve, reject) => {
    child.stdout.on("data", (d) => /listening/.test(d.toString()) && resolve());
    child.once("exit", (code) => reject(new Error(`lathe exited (${code}) before it listened`)));
  });
  return { child, pid: child.pid, port, ca: readFileSync(path.join(work, "certs", "lathe-ca.pem")) };
}

function freePort() {
  return new Promise((resolve) => {
    const s = net.createServer().listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

/** Runs one load and measures lathe around it: CPU ticks of all its threads, peak RSS. */
async function runRow(load, pid) {
  const cpu0 = pid ? cpuSeconds(pid) : 0;
  let peakKB = 0;
  const sample = () => pid && (peakKB = Math.max(peakKB, rssKB(pid)));
  const timer = setInterval(sample, 50);
  const t0 = performance.now();
  const done = await load();
  const seconds = (performance.now() - t0) / 1000;
  clearInterval(timer);
  sample();
  const cpu = pid ? cpuSeconds(pid) - cpu0 : null;
  return { requests: done, seconds, rps: done / seconds, cpuUsPerExchange: cpu === null ? null : (cpu * 1e6) / done, peakMB: pid ? peakKB / 1024 : null };
}

function cpuSeconds(pid) {
  const f = readFileSync(`/proc/${pid}/stat`, "latin1");
  const fields = f.slice(f.lastIndexOf(")") + 2).split(" ");
  return (Number(fields[11]) + Number(fields[12])) / 100; // utime + stime, in clock ticks of 1/100 s
}

function rssKB(pid) {
  const m = /VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "latin1"));
  return m ? Number(m[1]) : 0;
}

/** A TLS socket to the origin: straight, or through a CONNECT tunnel of lathe's. */
function connectTls(port, proxy, ca, alpn) {
  return new Promise((resolve, reject) => {
    const done = (raw) => {
      const t = tls.connect({ socket: raw, host: "127.0.0.1", servername: "", ALPNProtocols: alpn, ca: ca ?? readFileSync(path.join(certDir, "bench-ca.pem")) }, () => resolve(t));
      t.once("error", reject);
    };
    if (!proxy) return done(net.connect(port, "127.0.0.1"));
    const s = net.connect(proxy, "127.0.0.1");
    s.once("error", reject);
    s.write(`CONNECT 127.0.0.1:${port} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n\r\n`);
    s.once("data", (d) => (/^HTTP\/1\.1 200/.test(d.toString("latin1")) ? done(s) : reject(new Error(d.toString()))));
  });
}

/** `total` GETs as 32 concurrent streams on one h2 connection; every body is checked. */
async function h2Load({ port, proxy }, ca, total) {
  const socket = await connectTls(port, proxy, ca, ["h2"]);
  if (socket.alpnProtocol !== "h2") throw new Error(`negotiated ${socket.alpnProtocol}, not h2`);
  const session = http2.connect(`https://127.0.0.1:${port}`, { createConnection: () => socket });
  let issued = 0;
  let done = 0;
  const deadline = Date.now() + TIME_CAP_MS;
  const one = () =>
    new Promise((resolve, reject) => {
      const r = session.request({ ":path": `/small?i=${issued}` });
      const parts = [];
      r.on("data", (c) => parts.push(c));
      r.on("end", () => (Buffer.concat(parts).equals(BODY) ? resolve() : reject(new Error("h2 body differs"))));
      r.on("error", reject);
    });
  const worker = async () => {
    while (issued < total && Date.now() < deadline) {
      issued++;
      await one();
      done++;
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
  session.close();
  return done;
}

/** `total` GETs over 32 HTTP/1.1 keep-alive tunnels through lathe; every body is checked. */
async function h1Load(port, proxy, ca, total) {
  let issued = 0;
  let done = 0;
  const deadline = Date.now() + TIME_CAP_MS;
  const worker = async () => {
    const t = await connectTls(port, proxy, ca, ["http/1.1"]);
    let buf = Buffer.alloc(0);
    let wake = null;
    t.on("data", (d) => {
      buf = Buffer.concat([buf, d]);
      wake?.();
    });
    const until = async (ok) => {
      while (!ok()) await new Promise((r) => (wake = r));
    };
    while (issued < total && Date.now() < deadline) {
      issued++;
      t.write(`GET /small?i=${issued} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n\r\n`);
      let end = -1;
      await until(() => (end = buf.indexOf("\r\n\r\n")) >= 0);
      const length = Number(/content-length: (\d+)/i.exec(buf.subarray(0, end).toString("latin1"))?.[1]);
      await until(() => buf.length >= end + 4 + length);
      if (!buf.subarray(end + 4, end + 4 + length).equals(BODY)) throw new Error("HTTP/1.1 body differs");
      buf = buf.subarray(end + 4 + length);
      done++;
    }
    t.destroy();
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
  return done;
}

function report(rows) {
  const median = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
  const fmt = (x, d = 0) => (x === null || x === undefined ? "-" : x.toFixed(d));
  console.log(`\nHTTP/2 through lathe: ${REQUESTS} GETs of ${BODY.length} B, ${CONCURRENCY} in flight, medians of ${ROUNDS} alternating rounds`);
  console.log("| row | req/s | lathe CPU µs/exchange | lathe peak RSS MB |\n| --- | --- | --- | --- |");
  const m = {};
  for (const [id, runs] of Object.entries(rows)) {
    m[id] = { rps: median(runs.map((r) => r.rps)), cpu: runs[0].cpuUsPerExchange === null ? null : median(runs.map((r) => r.cpuUsPerExchange)), peak: runs[0].peakMB === null ? null : Math.max(...runs.map((r) => r.peakMB)) };
    console.log(`| ${id} | ${fmt(m[id].rps)} | ${fmt(m[id].cpu)} | ${fmt(m[id].peak, 1)} |`);
  }
  const ratio = m["lathe-h2"].cpu / m["lathe-h1-h1"].cpu;
  console.log(`\nh2 CPU per exchange / HTTP/1.1's (both legs each): ${ratio.toFixed(2)} (goal ≤ 1.00: ${ratio <= 1 ? "PASS" : "FAIL"}); lathe-h2 req/s / direct-h2: ${(m["lathe-h2"].rps / m["direct-h2"].rps).toFixed(2)}`);
}
