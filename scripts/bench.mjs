#!/usr/bin/env node
// `npm run bench` (after `npm run build`): the shared proxybench harness against a direct
// connection, a freshly started lathe and, when `mitmdump` is on PATH, a freshly started mitmproxy,
// all in one session; then the ratio table (summarize.mjs), the issue's goal checks and the size of
// the WARCs lathe wrote. Node built-ins only.
//
//   npm run bench [-- proxybench options]       e.g. npm run bench -- --quick --scenarios http-small,slow
//
// Environment:
//   LATHE_BENCH_DIR        the harness directory (default ../shared/bench next to the repository)
//   LATHE_BENCH_ROUNDS     alternate direct / lathe / mitmproxy this many times (default 1); medians are scored
//   LATHE_BENCH_OUT        where the result JSON files go (default a temp dir, kept and printed)
//   LATHE_BENCH_NO_MITM=1  skip mitmproxy even when mitmdump is installed
//   LATHE_BENCH_KEEP=1     keep the WARCs, certs and logs lathe wrote (default: deleted after the run)
//   LATHE_BENCH_PROXY_CMD  dry runs: a command started instead of lathe, split on spaces (no shell),
//                          with {port} {dir} {certs} {config} substituted, e.g.
//                          "node ../shared/bench/tinyproxy.mjs --port {port}"
import { spawn, execFileSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { freePort, sleep, startServer } from "./lib/servers.mjs";

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const benchDir = path.resolve(process.env.LATHE_BENCH_DIR ?? path.resolve(repoRoot, "..", "shared", "bench"));
const proxybench = path.join(benchDir, "proxybench.mjs");
const summarize = path.join(benchDir, "summarize.mjs");
const extra = process.argv.slice(2);
const quick = extra.includes("--quick");
const rounds = Math.max(1, Number(process.env.LATHE_BENCH_ROUNDS ?? 1) | 0);
const keep = process.env.LATHE_BENCH_KEEP === "1";
const proxyCmd = process.env.LATHE_BENCH_PROXY_CMD?.trim() || null;
const mitmdump = process.env.LATHE_BENCH_NO_MITM === "1" ? null : which("mitmdump");

const GOALS = {
  httpSmall: 0.5, // http-small/c32 req/s, lathe / direct
  httpsSmall: 0.4, // https-small/c32
  newconn: 0.5, // https-newconn/first-c1
  slowTtfbMs: 20, // slow/c16 ttfb50, lathe - direct
  largeVsMitm: 3, // http-large/50MB-c1 (20MB-c1 with --quick) MB/s, lathe / mitmproxy
  rssMB: 200, // lathe peak RSS over the whole run
};

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
function runBench(args) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [proxybench, ...args, ...extra], { stdio: "inherit" });
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

// --- scoring -----------------------------------------------------------------------------------

const median = (xs) => {
  const v = xs.filter((x) => typeof x === "number" && Number.isFinite(x)).sort((a, b) => a - b);
  if (!v.length) return null;
  const m = v.length >> 1;
  return v.length % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
};

/** Per row id over the runs of one label: median metrics and total errors. */
function rowsOf(runs) {
  const byId = new Map();
  for (const run of runs) for (const r of run.results) {
    if (!byId.has(r.id)) byId.set(r.id, []);
    byId.get(r.id).push(r);
  }
  const out = new Map();
  for (const [id, rs] of byId) {
    out.set(id, {
      errors: rs.reduce((s, r) => s + (r.errors || 0), 0),
      reqPerSec: median(rs.map((r) => r.reqPerSec)),
      mbPerSec: median(rs.map((r) => r.mbPerSec)),
      ttfb50: median(rs.map((r) => r.ttfbMs?.p50)),
      peakRssKB: Math.max(0, ...rs.map((r) => r.proxy?.peakRssKB ?? 0)),
    });
  }
  return out;
}

const f2 = (x) => (x === null || x === undefined ? "-" : x.toFixed(2));

function goalChecks(results, wholeRunPeakKB) {
  const direct = rowsOf(results.direct);
  const lathe = rowsOf(results.lathe);
  const mitm = results.mitmproxy.length ? rowsOf(results.mitmproxy) : null;
  const lines = [];
  const verdicts = [];
  const put = (verdict, text) => {
    verdicts.push(verdict);
    lines.push(`${verdict.padEnd(4)}  ${text}`);
  };
  const ratioGoal = (id, goal, metric = "reqPerSec") => {
    const a = direct.get(id);
    const b = lathe.get(id);
    if (!a || !b) return put("SKIP", `${id} ${metric === "reqPerSec" ? "req/s" : metric} ≥ ${goal}× direct: row not run`);
    if (a.errors || b.errors) return put("FAIL", `${id} ≥ ${goal}× direct: row had errors (direct ${a.errors}, lathe ${b.errors}), not scored`);
    const r = a[metric] > 0 ? b[metric] / a[metric] : null;
    put(r !== null && r >= goal ? "PASS" : "FAIL", `${id} req/s lathe/direct = ${f2(r)} (goal ≥ ${goal}; lathe ${f2(b[metric])}, direct ${f2(a[metric])})`);
  };
  ratioGoal("http-small/c32", GOALS.httpSmall);
  ratioGoal("https-small/c32", GOALS.httpsSmall);
  ratioGoal("https-newconn/first-c1", GOALS.newconn);

  {
    const id = "slow/c16";
    const a = direct.get(id);
    const b = lathe.get(id);
    if (!a || !b) put("SKIP", `${id} ttfb50 within ${GOALS.slowTtfbMs} ms of direct: row not run`);
    else if (a.errors || b.errors) put("FAIL", `${id} ttfb50: row had errors (direct ${a.errors}, lathe ${b.errors}), not scored`);
    else {
      const d = b.ttfb50 - a.ttfb50;
      put(d <= GOALS.slowTtfbMs ? "PASS" : "FAIL", `${id} ttfb50 lathe - direct = ${f2(d)} ms (goal ≤ ${GOALS.slowTtfbMs}; lathe ${f2(b.ttfb50)}, direct ${f2(a.ttfb50)})`);
    }
  }

  {
    const id = `http-large/${quick ? 20 : 50}MB-c1`;
    const b = lathe.get(id);
    const m = mitm?.get(id);
    if (!mitm) put("SKIP", `${id} MB/s ≥ ${GOALS.largeVsMitm}× mitmproxy: mitmproxy not run (install it: apt-get install mitmproxy)`);
    else if (!b || !m) put("SKIP", `${id} MB/s ≥ ${GOALS.largeVsMitm}× mitmproxy: row not run`);
    else if (b.errors || m.errors) put("FAIL", `${id} MB/s: row had errors (lathe ${b.errors}, mitmproxy ${m.errors}), not scored`);
    else {
      const r = m.mbPerSec > 0 ? b.mbPerSec / m.mbPerSec : null;
      put(r !== null && r >= GOALS.largeVsMitm ? "PASS" : "FAIL", `${id} MB/s lathe/mitmproxy = ${f2(r)} (goal ≥ ${GOALS.largeVsMitm}; lathe ${f2(b.mbPerSec)}, mitmproxy ${f2(m.mbPerSec)})`);
    }
  }

  {
    const rowsPeak = Math.max(0, ...[...lathe.values()].map((r) => r.peakRssKB));
    const peakKB = Math.max(rowsPeak, wholeRunPeakKB);
    const mb = peakKB / 1024;
    if (!peakKB) put("SKIP", `lathe peak RSS ≤ ${GOALS.rssMB} MB: not sampled`);
    else put(mb <= GOALS.rssMB ? "PASS" : "FAIL", `lathe peak RSS = ${mb.toFixed(0)} MB over the whole run (goal ≤ ${GOALS.rssMB} MB)`);
  }

  {
    const errs = [...lathe.entries()].filter(([, r]) => r.errors);
    const total = errs.reduce((s, [, r]) => s + r.errors, 0);
    put(total === 0 ? "PASS" : "FAIL", total === 0 ? `zero errors through lathe (${lathe.size} rows)` : `${total} errors through lathe in ${errs.map(([id]) => id).join(", ")}`);
    const derr = [...direct.values()].reduce((s, r) => s + r.errors, 0);
    if (derr) lines.push(`note  ${derr} errors in the direct run: its rows are not scored`);
  }
  return { lines, failed: verdicts.includes("FAIL") };
}

// --- main --------------------------------------------------------------------------------------

async function main() {
  if (!existsSync(proxybench)) {
    console.error(`bench: the harness ${proxybench} is missing; set LATHE_BENCH_DIR to the directory holding proxybench.mjs`);
    return 2;
  }
  const lathe = path.join(repoRoot, "bin", "lathe.js");
  if (!proxyCmd && !existsSync(path.join(repoRoot, "dist", "cli", "main.js"))) {
    console.error("bench: dist/ is missing; run `npm run bench` (it builds first) or `npm run build`");
    return 2;
  }
  const benchCa = execFileSync(process.execPath, [proxybench, "--print-ca"], { encoding: "utf8" }).trim();
  const work = mkdtempSync(path.join(os.tmpdir(), "lathe-bench-"));
  const outDir = path.resolve(process.env.LATHE_BENCH_OUT ?? path.join(work, "results"));
  mkdirSync(outDir, { recursive: true });
  const json = { direct: [], lathe: [], mitmproxy: [] };
  const warcDirs = [];
  let wholeRunPeakKB = 0;
  let server = null;
  const cleanup = () => {
    try {
      server?.child.kill("SIGKILL");
    } catch {}
  };
  process.on("exit", cleanup);
  for (const sig of ["SIGINT", "SIGTERM"]) process.on(sig, () => process.exit(130));

  say(`bench: harness ${benchDir}; ${rounds} round(s)${quick ? ", --quick" : ""}${extra.length ? `; proxybench options: ${extra.join(" ")}` : ""}`);
  say(`bench: results in ${outDir}; mitmproxy: ${mitmdump ?? "not installed (apt-get install mitmproxy), skipped"}`);
  if (proxyCmd) say(`bench: DRY RUN: LATHE_BENCH_PROXY_CMD="${proxyCmd}" is measured under the label "lathe"`);

  for (let round = 1; round <= rounds; round++) {
    // (a) direct: the limit of this machine.
    say(`\n=== round ${round}: direct`);
    const directJson = path.join(outDir, `direct-${round}.json`);
    const dc = await runBench(["--direct", "--label", "direct", "--json", directJson]);
    if (dc === 2) return 2; // usage error: the same arguments would fail for every run
    if (existsSync(directJson)) json.direct.push(directJson);

    // (b) lathe, freshly started (empty leaf cache: first-c1 includes certificate issuance).
    const port = await freePort();
    const inst = path.join(work, `lathe-${round}`);
    const dir = path.join(inst, "warcs");
    const certs = path.join(inst, "certs");
    const config = path.join(inst, "proxy.config.json");
    mkdirSync(inst, { recursive: true });
    writeFileSync(config, `${JSON.stringify({ upstream: { caFile: benchCa } }, null, 2)}\n`);
    warcDirs.push(dir);
    const subst = (a) => a.replaceAll("{port}", String(port)).replaceAll("{dir}", dir).replaceAll("{certs}", certs).replaceAll("{config}", config);
    const [cmd, ...args] = proxyCmd
      ? proxyCmd.split(/\s+/).map(subst)
      : [process.execPath, lathe, "serve", "--port", String(port), "--control-port=-1", "--dir", dir, "--certs", certs, "--config", config];
    say(`\n=== round ${round}: lathe (${[cmd === process.execPath ? "node" : cmd, ...args].join(" ")})`);
    server = await startServer("lathe", cmd, args, port, path.join(inst, "lathe.log"));
    const rss = rssSampler(server.pid);
    const caPem = path.join(certs, "lathe-ca.pem");
    const caArgs = existsSync(caPem) ? ["--ca", caPem] : [];
    if (!caArgs.length) say(`bench: ${caPem} does not exist; HTTPS is verified against the bench CA (right only for a tunnelling proxy)`);
    const latheJson = path.join(outDir, `lathe-${round}.json`);
    await runBench(["--proxy", `http://127.0.0.1:${port}`, ...caArgs, "--pid", String(server.pid), "--label", "lathe", "--json", latheJson]);
    wholeRunPeakKB = Math.max(wholeRunPeakKB, rss.stop());
    const st = await server.stop();
    server = null;
    if (st.code !== 0) say(`bench: lathe exited with ${st.code ?? st.sig} after SIGTERM; its output: ${path.join(inst, "lathe.log")}`);
    if (existsSync(latheJson)) json.lathe.push(latheJson);

    // (c) mitmproxy, freshly started, as ../shared/bench/run-mitmproxy.sh does (its own confdir, so
    // its CA is ours to find and the user's ~/.mitmproxy is left alone).
    if (mitmdump) {
      const mport = await freePort();
      const confdir = path.join(work, `mitmproxy-${round}`);
      mkdirSync(confdir, { recursive: true });
      say(`\n=== round ${round}: mitmproxy (${mitmdump})`);
      server = await startServer("mitmdump", mitmdump, ["--listen-host", "127.0.0.1", "--listen-port", String(mport), "--ssl-insecure", "-q", "--set", `confdir=${confdir}`], mport, path.join(confdir, "mitmdump.log"));
      const mca = path.join(confdir, "mitmproxy-ca-cert.pem");
      for (let i = 0; i < 100 && !existsSync(mca); i++) await sleep(100);
      const mitmJson = path.join(outDir, `mitmproxy-${round}.json`);
      await runBench(["--proxy", `http://127.0.0.1:${mport}`, "--ca", mca, "--pid", String(server.pid), "--label", "mitmproxy", "--json", mitmJson]);
      await server.stop(10_000);
      server = null;
      if (existsSync(mitmJson)) json.mitmproxy.push(mitmJson);
    }
  }

  // Ratios.
  const files = [...json.direct, ...json.lathe, ...json.mitmproxy];
  say("\n=== summary (summarize.mjs; A = direct)");
  if (json.direct.length && files.length >= 2) {
    execFileSync(process.execPath, [summarize, ...files, "--base", "direct"], { stdio: "inherit" });
  } else say("bench: not enough result files to summarize");
  if (json.mitmproxy.length && json.lathe.length) {
    say("\n=== lathe against mitmproxy (A = mitmproxy)");
    execFileSync(process.execPath, [summarize, ...json.mitmproxy, ...json.lathe, "--base", "mitmproxy"], { stdio: "inherit" });
  }

  // Goals (the issue's "Benchmark" section; decisions.md §8 says which rows count).
  let failed = true;
  if (json.direct.length && json.lathe.length) {
    const load = (fs_) => fs_.map((f) => JSON.parse(readFileSync(f, "utf8")));
    const res = goalChecks({ direct: load(json.direct), lathe: load(json.lathe), mitmproxy: load(json.mitmproxy) }, wholeRunPeakKB);
    say(`\n=== goals (${rounds > 1 ? `medians of ${rounds} rounds` : "one round"}; ratios to direct on this run)`);
    for (const l of res.lines) say(l);
    failed = res.failed;
  } else say("\nbench: no direct or lathe results: goals not checked");

  // What lathe wrote.
  const t = warcDirs.map(warcTotals).reduce((a, b) => ({ files: a.files + b.files, bytes: a.bytes + b.bytes, open: a.open + b.open }), { files: 0, bytes: 0, open: 0 });
  const body = json.lathe.map((f) => JSON.parse(readFileSync(f, "utf8"))).flatMap((r) => r.results).reduce((s, r) => s + (r.bodyBytes || 0), 0);
  say(`\nWARCs written by lathe: ${t.files} file(s), ${(t.bytes / 1e6).toFixed(1)} MB (${t.bytes} bytes)` +
    `${body ? `; measured body bytes through lathe ${(body / 1e6).toFixed(1)} MB (warm-up requests are recorded too)` : ""}` +
    `${t.open ? `; ${t.open} still .open after shutdown` : ""}`);
  if (keep) say(`bench: kept lathe's WARCs, certs and logs in ${work}`);
  else {
    for (const d of warcDirs) rmSync(path.dirname(d), { recursive: true, force: true });
    for (let r = 1; r <= rounds; r++) rmSync(path.join(work, `mitmproxy-${r}`), { recursive: true, force: true });
    if (!outDir.startsWith(work + path.sep)) rmSync(work, { recursive: true, force: true });
  }
  say(`bench: result JSON files in ${outDir}`);
  return failed ? 1 : 0;
}

main().then(
  (code) => process.exit(code),
  (e) => {
    console.error(`bench: ${e.stack ?? e.message}`);
    process.exit(1);
  },
);
