#!/usr/bin/env node
/**
 * npm run soak [-- --minutes N --clients C --restarts R]   (issue #7 "Load")
 *
 * A bounded run (default 6 minutes, at most 15) of mixed HTTP/HTTPS traffic at full speed through
 * the built lathe (`node bin/lathe.js serve`, temp directories), with graceful restarts (SIGTERM,
 * start again on the same port). At the end:
 *   - every response a client received completely is in the WARCs, byte-exact (a response record
 *     with the same body, or a revisit whose original has it);
 *   - RSS of the lathe process stayed within 20% of its level after warm-up (last process,
 *     sampled from /proc/PID/status every second; a level is the median of 5 samples; warm-up
 *     lasts until lathe's bounded caches are full, 55,000 responses, or 55% of the rest; then a
 *     short idle pause counts the idle fds, and sampling starts once the load is back, 10 s or
 *     5,000 responses later, so the reference is a level under load like every later one);
 *   - open file descriptors (/proc/PID/fd) returned to their idle count once the load stopped.
 * Exit status 0 when all hold, 1 otherwise, with a summary. Not part of `npm test`.
 */
import { spawn, execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { createReadStream, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, writeFileSync } from "node:fs";
import http from "node:http";
import https from "node:https";
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { ProxyAgent, request as undiciRequest } from "undici";
import { WARCParser } from "warcio";
import { launcherNodeFlags } from "./lib/launcher.mjs";

const { values } = parseArgs({
  options: {
    minutes: { type: "string", default: "6" },
    clients: { type: "string", default: "16" },
    restarts: { type: "string", default: "3" },
    keep: { type: "boolean", default: false },
  },
});
const minutes = Math.min(Math.max(Number(values.minutes), 0.5), 15);
const CLIENTS = Math.max(1, Number(values.clients));
const RESTARTS = Math.max(0, Number(values.restarts));
const DURATION_MS = Math.round(minutes * 60_000);
const ROOT = new URL("..", import.meta.url).pathname;
const BIN = join(ROOT, "bin/lathe.js");
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const sha1 = (b) => createHash("sha1").update(b).digest("hex");
const log = (s) => process.stdout.write(`[soak ${new Date().toISOString().slice(11, 19)}] ${s}\n`);

// ---- deterministic payloads ---------------------------------------------------------------
function bytesOf(n, seed) {
  const out = Buffer.alloc(n);
  let x = seed >>> 0 || 1;
  for (let i = 0; i < n; i++) {
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    out[i] = x & 0xff;
  }
  return out;
}
/** /p/<size>/<seed>[?chunked][&...]: `size` bytes from `seed`, Content-Length or chunked. */
function originHandler(req, res) {
  const u = new URL(req.url, "http://x");
  const [, kind, size, seed] = u.pathname.split("/");
  if (kind !== "p") {
    res.writeHead(404, { "Content-Length": 0 });
    return res.end();
  }
  const body = bytesOf(Number(size), Number(seed));
  req.resume();
  if (u.searchParams.has("chunked")) {
    res.writeHead(200, { "Content-Type": "application/octet-stream" });
    for (let i = 0; i < body.length; i += 16384) res.write(body.subarray(i, i + 16384));
    res.end();
  } else {
    res.writeHead(200, { "Content-Type": "application/octet-stream", "Content-Length": body.length });
    res.end(body);
  }
}

// ---- lathe process ---------------------------------------------------------------------------
async function freePort() {
  const s = net.createServer();
  await new Promise((r) => s.listen(0, "127.0.0.1", r));
  const p = s.address().port;
  await new Promise((r) => s.close(r));
  return p;
}

function startLathe(dirs, port) {
  const proc = spawn(process.execPath, [...launcherNodeFlags(ROOT), BIN, "serve", "--port", String(port), "--control-port=-1", "--dir", dirs.warcs, "--certs", dirs.certs, "--config", dirs.config], { stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`lathe did not start: ${out}`)), 30_000);
    proc.stdout.on("data", (d) => {
      out += d;
      const ca = /CA certificate: (.+)\n/.exec(out);
      if (/listening on http:\/\/127\.0\.0\.1:\d+/.test(out) && ca) {
        clearTimeout(t);
        resolve({ proc, caPem: readFileSync(ca[1].trim(), "utf8"), output: () => out });
      }
    });
    proc.stderr.on("data", (d) => {
      out += d;
      if (out.length > 1e6) out = out.slice(-1e5);
    });
    proc.once("exit", (code) => reject(new Error(`lathe exited (${code}) while starting: ${out}`)));
  });
}

async function stopLathe(l) {
  const exited = new Promise((r) => l.proc.once("exit", (code, sig) => r({ code, sig })));
  l.proc.kill("SIGTERM");
  const t = setTimeout(() => l.proc.kill("SIGKILL"), 60_000);
  const r = await exited;
  clearTimeout(t);
  return r;
}

const rssKb = (pid) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1] ?? NaN);
const fdCount = (pid) => readdirSync(`/proc/${pid}/fd`).length;
const fdList = (pid) => readdirSync(`/proc/${pid}/fd`).map((f) => { try { return readlinkSync(`/proc/${pid}/fd/${f}`); } catch { return "?"; } });

// ---- clients -----------------------------------------------------------------------------------
/** Completely received responses: url → sha1 of the body. */
const received = new Map();
const stats = { ok: 0, failed: 0, wrongBody: 0, bytes: 0, https: 0 };
let nextId = 0;
/** Failure reasons (restarts make some), counted. */
const failures = new Map();

function pickRequest(rng, originHttp, originHttps) {
  const r = rng();
  const size = r < 0.7 ? 1 + Math.floor(rng() * 16384) : r < 0.95 ? 16384 + Math.floor(rng() * 131072) : 262144 + Math.floor(rng() * 786432);
  const id = nextId++;
  // A third are duplicates of a few payloads (revisits), the rest unique.
  const seed = rng() < 0.33 ? 1 + (size % 7) : 1000 + id;
  const dupSize = seed < 1000 ? [1000, 20000, 150000, 5000, 70000, 300, 9000][seed - 1] : size;
  const secure = rng() < 0.5;
  const base = secure ? originHttps : originHttp;
  const url = `${base}/p/${dupSize}/${seed}?id=${id}${rng() < 0.2 ? "&chunked" : ""}`;
  return { url, secure, expected: [dupSize, seed] };
}

function httpGet(proxyPort, agent, url) {
  return new Promise((resolve, reject) => {
    const req = http.get({ host: "127.0.0.1", port: proxyPort, path: url, agent, headers: { Host: new URL(url).host } }, (res) => {
      const chunks = [];
      res.on("data", (c) => chunks.push(c));
      res.on("end", () => (res.complete ? resolve({ status: res.statusCode, body: Buffer.concat(chunks) }) : reject(new Error("incomplete"))));
      res.on("error", reject);
    });
    req.setTimeout(30_000, () => req.destroy(new Error("timeout")));
    req.on("error", reject);
  });
}

async function httpsGet(dispatcher, url) {
  const r = await undiciRequest(url, { dispatcher, headersTimeout: 30_000, bodyTimeout: 30_000 });
  const body = Buffer.from(await r.body.arrayBuffer());
  return { status: r.statusCode, body };
}

function mulberry(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Run `CLIENTS` workers until `state.stop`; each (re)builds its agents when lathe restarts. */
function runClients(state, proxyPort, originHttp, originHttps) {
  const workers = Array.from({ length: CLIENTS }, async (_, w) => {
    const rng = mulberry(0x9e3779b9 ^ w);
    let gen = -1;
    let agent = null;
    let dispatcher = null;
    while (!state.stop) {
      if (state.paused) {
        // Idle: no client connection stays open while the idle fd count is taken.
        agent?.destroy();
        await dispatcher?.close().catch(() => undefined);
        agent = dispatcher = null;
        gen = -1;
        await sleep(50);
        continue;
      }
      if (gen !== state.generation) {
        agent?.destroy();
        await dispatcher?.close().catch(() => undefined);
        gen = state.generation;
        agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
        dispatcher = new ProxyAgent({ uri: `http://127.0.0.1:${proxyPort}`, requestTls: { ca: state.caPem }, connections: 1 });
      }
      const q = pickRequest(rng, originHttp, originHttps);
      try {
        const r = q.secure ? await httpsGet(dispatcher, q.url) : await httpGet(proxyPort, agent, q.url);
        if (r.status !== 200) {
          stats.failed++;
          const k = `status ${r.status}: ${r.body.toString().slice(0, 80)}`;
          failures.set(k, (failures.get(k) ?? 0) + 1);
          continue;
        }
        if (!r.body.equals(bytesOf(...q.expected))) {
          stats.wrongBody++;
          continue;
        }
        received.set(q.url, sha1(r.body));
        stats.ok++;
        stats.bytes += r.body.length;
        if (q.secure) stats.https++;
      } catch (e) {
        stats.failed++;
        const k = `${q.secure ? "https" : "http"}: ${String(e?.code ?? "")} ${String(e?.message ?? e).slice(0, 60)}`;
        failures.set(k, (failures.get(k) ?? 0) + 1);
        await sleep(20);
      }
    }
    agent?.destroy();
    await dispatcher?.close().catch(() => undefined);
  });
  return Promise.all(workers);
}

// ---- reading the WARCs back --------------------------------------------------------------------
async function readWarcs(dir) {
  const byUri = new Map(); // target URI → { type, sha1, payloadDigest, refersTo }
  const bodyById = new Map(); // record id → sha1 of the body (responses)
  const bodyByDigest = new Map(); // payload digest → sha1 of the body (untruncated responses)
  let records = 0;
  let truncated = 0;
  const truncations = new Map();
  const files = readdirSync(dir).filter((f) => /\.warc(\.gz)?$/.test(f)).sort();
  for (const f of files) {
    const parser = new WARCParser(createReadStream(join(dir, f)), { keepHeadersCase: true });
    for await (const rec of parser) {
      records++;
      const type = rec.warcType;
      if (type !== "response" && type !== "revisit") {
        await rec.readFully(false);
        continue;
      }
      const uri = rec.warcTargetURI;
      // The payload as stored (readFully(true) would also undo content codings, and gives "" for 1-byte bodies in warcio 2.4).
      const payload = Buffer.from(await rec.readFully(false));
      const h = rec.warcHeaders.headers;
      const entry = { type, sha1: type === "response" ? sha1(payload) : null, digest: h.get("WARC-Payload-Digest"), refersTo: h.get("WARC-Refers-To"), truncated: h.get("WARC-Truncated") };
      if (entry.truncated && type === "response") {
        truncated++;
        truncations.set(entry.truncated, (truncations.get(entry.truncated) ?? 0) + 1);
      }
      byUri.set(uri, entry);
      if (type === "response") {
        bodyById.set(h.get("WARC-Record-ID"), entry.sha1);
        if (!entry.truncated) bodyByDigest.set(entry.digest, entry.sha1);
      }
    }
  }
  return { files: files.length, records, truncated, truncations, byUri, bodyById, bodyByDigest };
}

// ---- main --------------------------------------------------------------------------------------
async function main() {
  const base = mkdtempSync(join(tmpdir(), "lathe-soak-"));
  const dirs = { warcs: join(base, "warcs"), certs: join(base, "certs"), config: join(base, "proxy.config.json") };
  writeFileSync(dirs.config, JSON.stringify({ warc: { maxFileBytes: 100_000_000 }, log: { level: "warn" } }));
  execFileSync("openssl", ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", join(base, "o.key"), "-out", join(base, "o.pem"), "-days", "2", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"], { stdio: "ignore" });

  const originHttp = http.createServer(originHandler);
  const originHttps = https.createServer({ key: readFileSync(join(base, "o.key")), cert: readFileSync(join(base, "o.pem")) }, originHandler);
  for (const s of [originHttp, originHttps]) {
    s.keepAliveTimeout = 2000;
    await new Promise((r) => s.listen(0, "127.0.0.1", r));
  }
  const httpUrl = `http://127.0.0.1:${originHttp.address().port}`;
  const httpsUrl = `https://127.0.0.1:${originHttps.address().port}`;
  const port = await freePort();
  log(`${minutes} min, ${CLIENTS} clients, ${RESTARTS} graceful restarts; lathe on port ${port}; files in ${base}`);

  const state = { stop: false, paused: false, generation: 0, caPem: "" };
  let lathe = await startLathe(dirs, port);
  state.caPem = lathe.caPem;
  const t0 = Date.now();
  const clients = runClients(state, port, httpUrl, httpsUrl);
  const problems = [];

  // Restarts in the first quarter; the last process runs the rest, where RSS and fds are measured.
  const restartAt = Array.from({ length: RESTARTS }, (_, i) => Math.round(((i + 1) * 0.25 * DURATION_MS) / (RESTARTS + 1)));
  for (const at of restartAt) {
    await sleep(Math.max(0, at - (Date.now() - t0)));
    const before = stats.ok;
    const r = await stopLathe(lathe);
    if (r.code !== 0) problems.push(`lathe exited with ${r.code ?? r.sig} on SIGTERM`);
    lathe = await startLathe(dirs, port);
    state.caPem = lathe.caPem;
    state.generation++;
    log(`restart at ${Math.round((Date.now() - t0) / 1000)} s (${before} responses so far)`);
  }

  // The last process: warm up, measure idle fds, then load with RSS samples until the end.
  // Warm-up: until lathe's bounded caches are full (the page-attribution map keeps the last
  // 50,000 captures), or 55% of what is left of the run, whichever comes first.
  const pid = lathe.proc.pid;
  const remaining = DURATION_MS - (Date.now() - t0);
  const warmStart = Date.now();
  const okAtStart = stats.ok;
  const WARM_RESPONSES = 55_000;
  while (stats.ok - okAtStart < WARM_RESPONSES && Date.now() - warmStart < remaining * 0.55) await sleep(250);
  const warmupMs = Date.now() - warmStart;
  const warmResponses = stats.ok - okAtStart;
  state.paused = true;
  await sleep(3500); // clients' keep-alive sockets and lathe's pooled upstream sockets (origin keepAliveTimeout 2 s) go idle
  const idleFds = fdCount(pid);
  const idleFdList = fdList(pid);
  state.paused = false;
  // The reference level must be a level under load like every later one: the first seconds after
  // the idle pause have no bodies in flight and no writer backlog, and freed memory was just given
  // back, so a reference taken there is an idle level (it read ~90 MB under the loaded plateau).
  // Sample once the clients are back at full speed: 10 s, or 5,000 responses, after resuming.
  const resumedAt = Date.now();
  const okAtResume = stats.ok;
  while (Date.now() - resumedAt < 10_000 && stats.ok - okAtResume < 5_000) await sleep(100);
  const settleMs = Date.now() - resumedAt;
  const samples = [];
  const sampler = setInterval(() => {
    try {
      samples.push({ t: Date.now() - t0, rss: rssKb(pid), fds: fdCount(pid) });
    } catch {
      /* process gone */
    }
  }, 1000);
  await sleep(Math.max(5_000, DURATION_MS - (Date.now() - t0)));
  clearInterval(sampler);
  state.stop = true;
  await clients;
  // Load stopped: fds must come back to the idle count (pooled sockets close with the origins' keep-alive timeout).
  let endFds = fdCount(pid);
  for (let i = 0; i < 30 && endFds > idleFds; i++) {
    await sleep(500);
    endFds = fdCount(pid);
  }
  const endFdList = fdList(pid);
  const idleRss = rssKb(pid); // informational: what lathe keeps once the load is gone
  const r = await stopLathe(lathe);
  if (r.code !== 0) problems.push(`lathe exited with ${r.code ?? r.sig} on SIGTERM`);
  for (const s of [originHttp, originHttps]) {
    s.closeAllConnections();
    s.close();
  }

  // RSS level: the median of 5 consecutive 1 s samples (a level, not a single GC or a burst of
  // 1 MB bodies in flight). The first level after warm-up is the reference; every later level
  // must stay within 20% of it. The raw peak is reported too.
  const median5 = (i) => samples.slice(i, i + 5).map((s) => s.rss).sort((a, b) => a - b)[2];
  const levels = samples.slice(0, Math.max(0, samples.length - 4)).map((s, i) => ({ t: s.t, rss: median5(i) }));
  const ref = levels[0]?.rss ?? NaN;
  const peak = Math.max(...samples.map((s) => s.rss));
  const peakLevel = Math.max(...levels.map((l) => l.rss));
  const last = levels.at(-1)?.rss ?? NaN;
  const tooHigh = levels.filter((l) => l.rss > ref * 1.2);
  if (!(levels.length >= 5)) problems.push(`too few RSS samples (${samples.length}): run longer`);
  if (tooHigh.length) problems.push(`RSS level above 120% of ${ref} kB after warm-up ${tooHigh.length} times (highest level ${peakLevel} kB, raw peak ${peak} kB)`);
  if (endFds !== idleFds) {
    const extra = [...endFdList];
    for (const f of idleFdList) {
      const i = extra.indexOf(f);
      if (i >= 0) extra.splice(i, 1);
    }
    problems.push(`open fds ${endFds} after the load, ${idleFds} when idle; extra: ${extra.join(", ")}`);
  }

  // Every complete response is archived, byte-exact.
  log(`reading the WARCs back...`);
  const w = await readWarcs(dirs.warcs);
  let missing = 0;
  let mismatched = 0;
  const examples = [];
  for (const [url, hash] of received) {
    const e = w.byUri.get(url);
    if (!e) {
      missing++;
      if (examples.length < 5) examples.push(`missing ${url}`);
      continue;
    }
    const stored = e.type === "response" ? e.sha1 : (w.bodyById.get(e.refersTo) ?? w.bodyByDigest.get(e.digest));
    if (stored !== hash) {
      mismatched++;
      if (examples.length < 5) examples.push(`${e.type} for ${url} does not hold the bytes the client got`);
    }
  }
  if (missing) problems.push(`${missing} complete responses are not in the WARCs`);
  if (mismatched) problems.push(`${mismatched} archived responses differ from what the client received`);
  if (stats.wrongBody) problems.push(`${stats.wrongBody} responses reached a client with wrong bytes`);
  if (received.size < 100) problems.push(`only ${received.size} complete responses: the load did not run`);

  const secs = (Date.now() - t0) / 1000;
  log("summary");
  console.log(
    [
      `  duration            ${secs.toFixed(0)} s, ${RESTARTS} graceful restarts`,
      `  responses           ${stats.ok} complete (${stats.https} HTTPS), ${(stats.ok / secs).toFixed(0)}/s, ${(stats.bytes / 1e6).toFixed(0)} MB; ${stats.failed} failed (restarts), ${stats.wrongBody} wrong bytes`,
      `  WARCs               ${w.files} files, ${w.records} records (${w.truncated} truncated); ${received.size - missing - mismatched}/${received.size} complete responses found byte-exact`,
      `  RSS (last process)  ${ref} kB after ${(warmupMs / 1000).toFixed(0)} s / ${warmResponses} responses of warm-up and ${(settleMs / 1000).toFixed(0)} s of load after the idle pause${warmResponses < WARM_RESPONSES ? ` (caches not yet full: fewer than ${WARM_RESPONSES}; run longer)` : ""}, highest level ${peakLevel} kB (${peakLevel >= ref ? "+" : ""}${((peakLevel / ref - 1) * 100).toFixed(1)}%, limit +20%), last level ${last} kB, raw peak ${peak} kB (+${((peak / ref - 1) * 100).toFixed(1)}%); ${samples.length} samples; ${idleRss} kB once idle after the load`,
      `  RSS curve (MB)      ${samples.filter((_, i) => i % Math.max(1, Math.floor(samples.length / 12)) === 0).map((s) => `${Math.round(s.t / 1000)}s:${Math.round(s.rss / 1024)}`).join(" ")}`,
      `  open fds            idle ${idleFds}, after the load ${endFds}`,
      `  failures            ${[...failures].sort((a, b) => b[1] - a[1]).slice(0, 6).map(([k, n]) => `${n}× ${k}`).join("; ") || "none"}`,
      `  truncated records   ${[...w.truncations].map(([k, n]) => `${n}× ${k}`).join(", ") || "none"}`,
      ...examples.map((e) => `  e.g. ${e}`),
      problems.length ? `FAIL:\n${problems.map((p) => `  - ${p}`).join("\n")}` : "PASS",
    ].join("\n"),
  );
  if (!values.keep) rmSync(base, { recursive: true, force: true });
  else log(`kept ${base}`);
  process.exit(problems.length ? 1 : 0);
}

main().catch((e) => {
  console.error(`[soak] error: ${e.stack ?? e}`);
  process.exit(1);
});
