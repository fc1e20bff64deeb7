#!/usr/bin/env node
// `npm run bench` (after `npm run build`; scripts/bench-all.mjs runs this first and passes it the
// options): the shared proxybench harness against a direct connection, the two bare Node proxies
// that are the floors of issue #25 (tinyproxy: plain HTTP and blind tunnels; tinymitm: TLS
// interception with pre-made leaves, nothing recorded), a freshly started lathe with a user's
// defaults (gzip, dedup, live index, crawl log, control API and live page) and, when `mitmdump` is
// on PATH, mitmproxy — all in one session, rounds alternating. Then per row: req/s share of direct,
// each proxy's CPU per exchange (per MB on the large rows), lathe's ratio to its floor; the bars'
// PASS/FAIL lines; the size of the WARCs lathe wrote. Node built-ins only.
//
//   npm run bench [-- proxybench options]       e.g. npm run bench -- --quick --scenarios http-small,slow
//
// Environment:
//   LATHE_BENCH_DIR        the harness directory (default ../shared/bench next to the repository)
//   LATHE_BENCH_ROUNDS     alternate direct / tinyproxy / tinymitm / lathe / mitmproxy this many
//                          times (default 1); medians are scored
//   LATHE_BENCH_OUT        where the result JSON files go (default a temp dir, kept and printed)
//   LATHE_BENCH_NO_MITM=1  skip mitmproxy even when mitmdump is installed
//   LATHE_BENCH_ONLY       comma-separated labels to run (e.g. "tinyproxy,lathe"; direct always runs)
//   LATHE_BENCH_KEEP=1     keep the WARCs, certs and logs lathe wrote (default: deleted after the run)
//   LATHE_BENCH_NODE_ARGS  node options for lathe only, split on spaces, e.g. "--cpu-prof
//                          --cpu-prof-dir=/tmp/prof" (profiles are written when lathe exits)
//   LATHE_BENCH_WARMUP=1   before each proxy's scored run, one unscored --quick pass of the small
//                          rows through the same process, so V8 has compiled the hot paths (a long-
//                          running proxy's steady state; a fresh lathe spends 12-25% of its first
//                          6,000 requests compiling). Off by default: the bars are scored cold.
//   LATHE_BENCH_PROXY_CMD  dry runs: a command started instead of lathe, split on spaces (no shell),
//                          with {port} {dir} {certs} {config} substituted, e.g.
//                          "node ../shared/bench/tinyproxy.mjs --port {port}"
import { spawn, execFileSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { freePort, sleep, startServer } from "./lib/servers.mjs";
import { launcherNodeFlags } from "./lib/launcher.mjs";
import { barChecks, rowTable, rowsOf } from "./lib/benchBars.mjs";

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const benchDir = path.resolve(process.env.LATHE_BENCH_DIR ?? path.resolve(repoRoot, "..", "shared", "bench"));
const proxybench = path.join(benchDir, "proxybench.mjs");
const extra = process.argv.slice(2);
const quick = extra.includes("--quick");
const rounds = Math.max(1, Number(process.env.LATHE_BENCH_ROUNDS ?? 1) | 0);
const keep = process.env.LATHE_BENCH_KEEP === "1";
const proxyCmd = process.env.LATHE_BENCH_PROXY_CMD?.trim() || null;
const mitmdump = process.env.LATHE_BENCH_NO_MITM === "1" ? null : which("mitmdump");
const only = process.env.LATHE_BENCH_ONLY?.split(",").map((s) => s.trim()).filter(Boolean) ?? null;
const nodeArgs = process.env.LATHE_BENCH_NODE_ARGS?.trim().split(/\s+/) ?? [];
const warmup = process.env.LATHE_BENCH_WARMUP === "1";
const WARMUP_ARGS = ["--quick", "--scenarios", "http-small,https-small,mixed"];
const PROXIES = ["tinyproxy", "tinymitm", "lathe", ...(mitmdump ? ["mitmproxy"] : [])].filter((p) => !only || only.includes(p));

function which(cmd) {
  for (const dir of (process.env.PATH ?? "").split(path.delimiter)) {
    if (!dir) continue;
    const f = path.join(dir, cmd);
    try {
      if (statSync(f).isFile()) return f;
    } catch {}
  }
  return null;
}

const say = (s) => process.stdout.write(`${s}\n`);

/** Runs proxybench with the given args plus the pass-through ones; resolves with its exit code. */
function runBench(args, { quiet = false, passThrough = true } = {}) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [proxybench, ...args, ...(passThrough ? extra : [])], { stdio: quiet ? "ignore" : "inherit" });
    child.once("error", reject);
    child.once("exit", (code, sig) => resolve(code ?? (sig ? 128 : 1)));
  });
}

/** Peak VmRSS of a process over its whole life (not only the measured rows), sampled every 100 ms. */
function rssSampler(pid) {
  let peakKB = 0;
  const read = () => {
    try {
      const kb = Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "latin1"))[1]);
      if (kb > peakKB) peakKB = kb;
    } catch {}
  };
  read();
  const t = setInterval(read, 100);
  return { stop: () => (clearInterval(t), read(), peakKB) };
}

function warcTotals(dir) {
  let files = 0;
  let bytes = 0;
  let open = 0;
  const walk = (d) => {
    let entries;
    try {
      entries = readdirSync(d, { withFileTypes: true });
    } catch {
      return;
    }
    for (const e of entries) {
      const p = path.join(d, e.name);
      if (e.isDirectory()) walk(p);
      else if (/\.warc(\.gz)?(\.open)?$/.test(e.name)) {
        files++;
        bytes += statSync(p).size;
        if (e.name.endsWith(".open")) open++;
      }
    }
  };
  walk(dir);
  return { files, bytes, open };
}

// --- one proxy under measurement ------------------------------------------------------------------

/** How to start each proxy of a round: command, args and the CA the client verifies HTTPS against. */
function proxySpec(label, { port, inst, benchCa }) {
  const node = process.execPath;
  if (label === "tinyproxy" || label === "tinymitm") {
    // Both trust the bench CA (tinyproxy tunnels blindly; tinymitm's leaves are signed by it).
    return { cmd: node, args: [path.join(benchDir, `${label}.mjs`), "--port", String(port)], caArgs: [], log: path.join(inst, `${label}.log`) };
  }
  if (label === "mitmproxy") {
    const confdir = path.join(inst, "mitmproxy");
    mkdirSync(confdir, { recursive: true });
    const args = ["--listen-host", "127.0.0.1", "--listen-port", String(port), "--ssl-insecure", "-q", "--set", `confdir=${confdir}`];
    return { cmd: mitmdump, args, ca: path.join(confdir, "mitmproxy-ca-cert.pem"), log: path.join(confdir, "mitmdump.log") };
  }
  const dir = path.join(inst, "warcs");
  const certs = path.join(inst, "certs");
  const config = path.join(inst, "proxy.config.json");
  writeFileSync(config, `${JSON.stringify({ upstream: { caFile: benchCa } }, null, 2)}\n`);
  if (proxyCmd) {
    const subst = (a) => a.replaceAll("{port}", String(port)).replaceAll("{dir}", dir).replaceAll("{certs}", certs).replaceAll("{config}", config);
    const [cmd, ...args] = proxyCmd.split(/\s+/).map(subst);
    return { cmd, args, ca: path.join(certs, "lathe-ca.pem"), log: path.join(inst, "lathe.log"), warcDir: dir };
  }
  // A user's defaults, started as its launcher starts it (bin/lathe.js's node flags): the control API
  // (live page and feed) on a free port, crawl log and live index in the WARC directory, gzip and
  // digest dedup from the config defaults.
  const lathe = path.join(repoRoot, "bin", "lathe.js");
  const args = [...launcherNodeFlags(repoRoot), ...nodeArgs, lathe, "serve", "--port", String(port), "--control-port", "0", "--dir", dir, "--certs", certs, "--config", config];
  return { cmd: node, args, ca: path.join(certs, "lathe-ca.pem"), log: path.join(inst, "lathe.log"), warcDir: dir };
}

/** Starts one proxy, runs proxybench through it, stops it; returns the JSON path (or null). */
async function measure(label, round, ctx) {
  const port = await freePort();
  const inst = path.join(ctx.work, `${label}-${round}`);
  mkdirSync(inst, { recursive: true });
  const spec = proxySpec(label, { port, inst, benchCa: ctx.benchCa });
  if (spec.warcDir) ctx.warcDirs.push(spec.warcDir);
  say(`\n=== round ${round}: ${label} (${[spec.cmd === process.execPath ? "node" : spec.cmd, ...spec.args].join(" ")})`);
  const server = await startServer(label, spec.cmd, spec.args, port, spec.log);
  ctx.running = server;
  const rss = rssSampler(server.pid);
  let caArgs = spec.caArgs ?? [];
  if (spec.ca) {
    for (let i = 0; i < 100 && !existsSync(spec.ca); i++) await sleep(100);
    if (existsSync(spec.ca)) caArgs = ["--ca", spec.ca];
    else say(`bench: ${spec.ca} does not exist; HTTPS is verified against the bench CA (right only for a tunnelling proxy)`);
  }
  if (warmup) {
    say(`bench: warm-up pass through ${label} (unscored: ${WARMUP_ARGS.join(" ")})`);
    await runBench(["--proxy", `http://127.0.0.1:${port}`, ...caArgs, ...WARMUP_ARGS], { quiet: true, passThrough: false });
  }
  const out = path.join(ctx.outDir, `${label}-${round}.json`);
  await runBench(["--proxy", `http://127.0.0.1:${port}`, ...caArgs, "--pid", String(server.pid), "--label", label, "--json", out]);
  if (label === "lathe") ctx.wholeRunPeakKB = Math.max(ctx.wholeRunPeakKB, rss.stop());
  else rss.stop();
  const st = await server.stop(label === "mitmproxy" ? 10_000 : 60_000);
  ctx.running = null;
  if (st.code !== 0 && label === "lathe") say(`bench: lathe exited with ${st.code ?? st.sig} after SIGTERM; its output: ${spec.log}`);
  return existsSync(out) ? out : null;
}

// --- main --------------------------------------------------------------------------------------

function report(json, ctx) {
  const load = (files) => files.map((f) => JSON.parse(readFileSync(f, "utf8")));
  const byLabel = {};
  for (const [label, files] of Object.entries(json)) if (files.length) byLabel[label] = rowsOf(load(files));
  const shown = PROXIES.filter((p) => byLabel[p]);
  say(`\n=== rows (${rounds > 1 ? `medians of ${rounds} alternating rounds` : "one round"}; ×dir = req/s (MB/s) share of direct; cpu = the proxy's CPU, all threads, per exchange or per MB)`);
  for (const l of rowTable(byLabel, shown)) say(l);
  if (!byLabel.direct || !byLabel.lathe) {
    say("\nbench: no direct or lathe results: bars not checked");
    return true;
  }
  const largeId = `http-large/${quick ? 20 : 50}MB-c1`;
  const res = barChecks(byLabel, { largeId, wholeRunPeakKB: ctx.wholeRunPeakKB });
  say(`\n=== bars of issue #25 (same session; load average at start ${ctx.loadAtStart}, at end ${os.loadavg().map((x) => x.toFixed(2)).join(" ")})`);
  for (const l of res.lines) say(l);
  return res.failed;
}

async function main() {
  if (!existsSync(proxybench)) {
    console.error(`bench: the harness ${proxybench} is missing; set LATHE_BENCH_DIR to the directory holding proxybench.mjs`);
    return 2;
  }
  if (!proxyCmd && !existsSync(path.join(repoRoot, "dist", "cli", "main.js"))) {
    console.error("bench: dist/ is missing; run `npm run bench` (it builds first) or `npm run build`");
    return 2;
  }
  const work = mkdtempSync(path.join(os.tmpdir(), "lathe-bench-"));
  const ctx = {
    work,
    benchCa: execFileSync(process.execPath, [proxybench, "--print-ca"], { encoding: "utf8" }).trim(),
    outDir: path.resolve(process.env.LATHE_BENCH_OUT ?? path.join(work, "results")),
    warcDirs: [],
    wholeRunPeakKB: 0,
    running: null,
    loadAtStart: os.loadavg().map((x) => x.toFixed(2)).join(" "),
  };
  mkdirSync(ctx.outDir, { recursive: true });
  process.on("exit", () => {
    try {
      ctx.running?.child.kill("SIGKILL");
    } catch {}
  });
  for (const sig of ["SIGINT", "SIGTERM"]) process.on(sig, () => process.exit(130));

  say(`bench: harness ${benchDir}; ${rounds} round(s)${quick ? ", --quick" : ""}${extra.length ? `; proxybench options: ${extra.join(" ")}` : ""}`);
  say(`bench: proxies ${PROXIES.join(", ")}; mitmproxy: ${mitmdump ?? "not installed (apt-get install mitmproxy), skipped"}; results in ${ctx.outDir}`);
  if (proxyCmd) say(`bench: DRY RUN: LATHE_BENCH_PROXY_CMD="${proxyCmd}" is measured under the label "lathe"`);

  const json = { direct: [], ...Object.fromEntries(PROXIES.map((p) => [p, []])) };
  for (let round = 1; round <= rounds; round++) {
    say(`\n=== round ${round}: direct`);
    const directJson = path.join(ctx.outDir, `direct-${round}.json`);
    const dc = await runBench(["--direct", "--label", "direct", "--json", directJson]);
    if (dc === 2) return 2; // usage error: the same arguments would fail for every run
    if (existsSync(directJson)) json.direct.push(directJson);
    for (const label of PROXIES) {
      const out = await measure(label, round, ctx);
      if (out) json[label].push(out);
    }
  }
  const failed = report(json, ctx);

  const t = ctx.warcDirs.map(warcTotals).reduce((a, b) => ({ files: a.files + b.files, bytes: a.bytes + b.bytes, open: a.open + b.open }), { files: 0, bytes: 0, open: 0 });
  const body = json.lathe?.map((f) => JSON.parse(readFileSync(f, "utf8"))).flatMap((r) => r.results).reduce((s, r) => s + (r.bodyBytes || 0), 0);
  if (json.lathe?.length) {
    say(`\nWARCs written by lathe: ${t.files} file(s), ${(t.bytes / 1e6).toFixed(1)} MB (${t.bytes} bytes)` +
      `${body ? `; measured body bytes through lathe ${(body / 1e6).toFixed(1)} MB (warm-up requests are recorded too)` : ""}` +
      `${t.open ? `; ${t.open} still .open after shutdown` : ""}`);
  }
  if (keep) say(`bench: kept the proxies' WARCs, certs and logs in ${work}`);
  else {
    for (const e of readdirSync(work)) if (path.join(work, e) !== ctx.outDir) rmSync(path.join(work, e), { recursive: true, force: true });
    if (!ctx.outDir.startsWith(work + path.sep)) rmSync(work, { recursive: true, force: true });
  }
  say(`bench: result JSON files in ${ctx.outDir}`);
  return failed ? 1 : 0;
}

main().then(
  (code) => process.exit(code),
  (e) => {
    console.error(`bench: ${e.stack ?? e.message}`);
    process.exit(1);
  },
);
