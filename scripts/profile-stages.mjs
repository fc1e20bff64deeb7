#!/usr/bin/env node
// The cost of an exchange by stage (issue #25), from a V8 CPU profile of lathe taken under a bench row:
//
//   LATHE_BENCH_ONLY=lathe LATHE_BENCH_OUT=/tmp/p LATHE_BENCH_NODE_ARGS="--cpu-prof --cpu-prof-dir=/tmp/p" \
//     node scripts/bench.mjs --scenarios http-small
//   node scripts/profile-stages.mjs /tmp/p/CPU.*.cpuprofile EXCHANGES [CPU_US_PER_EXCHANGE] [--last=S]
//
// --last=S: only the last S seconds of work before the profile's final idle stretch (>= 1 s), i.e.
// one row: let lathe idle for a second or two after the bench, then give the row's `durationS`
// and `ok` (the c32 row is the one the bars score; the c1 row before it batches nothing).
//
// EXCHANGES: requests lathe served while profiled (the rows' `ok` plus their warm-ups). Each sample
// goes to the nearest frame (leaf first) whose file belongs to a stage; generic runtime frames
// (streams, events, buffers) are skipped so their time lands on the code that called them. Native
// socket writes go to "socket I/O", file writes to the stage that asked for them.
// V8 samples the main thread by wall clock: on a loaded machine the shares hold, the absolute µs do
// not. Given CPU_US_PER_EXCHANGE (the bench's measured CPU, all threads), the shares are scaled to it.
import fs from "node:fs";
const flags = process.argv.slice(2).filter((a) => a.startsWith("--"));
const [file, exchangesArg, cpuArg] = process.argv.slice(2).filter((a) => !a.startsWith("--"));
const lastS = Number(flags.find((f) => f.startsWith("--last="))?.slice(7) ?? 0);
if (!file || !(Number(exchangesArg) > 0)) {
  console.error("usage: profile-stages.mjs PROFILE.cpuprofile EXCHANGES [CPU_US_PER_EXCHANGE]");
  process.exit(2);
}
const exchanges = Number(exchangesArg);
const p = JSON.parse(fs.readFileSync(file, "utf8"));
const byId = new Map(p.nodes.map((n) => [n.id, n]));
const parent = new Map(); for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
const RULES = [
  ["startup", /modules\/|cjs-module-lexer|node:internal\/main|node:internal\/bootstrap/],
  ["live feed", /dist\/control\/liveFeed/],
  ["crawl log", /dist\/warcprox\/crawlLog/],
  ["stats", /dist\/warcprox\/(stats|statsStore|runningStats|fleet)|dist\/app\/(statsStore|collectionCounters|prometheus)|dist\/archive\/collections/],
  ["live index", /dist\/index\//],
  ["dedup lookup and insert", /dist\/dedup\/|dist\/archive\/dedup|better-sqlite3/],
  ["digests", /node:internal\/crypto\/hash|dist\/warc\/digest|dist\/core\/digest/],
  ["deflate", /dist\/warc\/(deflate|gzipMember|gzipHeader)|node:zlib/],
  ["record serialisation", /dist\/warc\/(serialize|httpHead|records|warcRecord|date|headerFields|groupEncoder)|dist\/archive\/(pipeline|writers)/],
  ["write", /dist\/warc\/|node:internal\/fs|node:fs$/],
  ["byte tap", /dist\/upstream\/tap|dist\/capture\/(messageCapture|httpHead|dechunk)/],
  ["capture and spool", /dist\/capture\/spool|dist\/proxy\/(archiveCapture|captures)/],
  ["TLS (both legs)", /node:_tls|node:tls|node:internal\/tls|dist\/tls\/|dist\/proxy\/(connect|leafSource)/],
  ["upstream request", /node:_http_client|node:_http_agent|dist\/upstream\/|dist\/proxy\/(http1Upstream|upstreamLeg|http2Upstream)/],
  ["client parse", /node:_http_server|dist\/proxy\/(http1Client|clientLeg|server|target|requestPolicy|headers|sessionOf|context)/],
  ["forwarding glue (exchange, response to client)", /dist\/proxy\//],
  ["other lathe", /dist\//],
];
const SKIP = /node:events|node:internal\/streams|node:internal\/stream_base_commons|node:net|node:buffer|node:internal\/buffer|node:internal\/process|node:_http_outgoing|node:_http_common|node:_http_incoming|node:internal\/abort_controller|node:internal\/timers|node:internal\/util|node:internal\/validators|node:internal\/errors|node:internal\/url|node:url|^$/;
const stageOf = (leafId) => {
  const leaf = byId.get(leafId).callFrame;
  if (leaf.functionName === "(garbage collector)") return "GC";
  if (leaf.functionName === "(idle)") return "idle";
  if (leaf.functionName === "(program)") return "V8/runtime (program)";
  let io = null; let fsSeen = false;
  for (let x = leafId; x !== undefined; x = parent.get(x)) {
    const cf = byId.get(x).callFrame;
    if (!io && /stream_base_commons/.test(cf.url)) io = "socket I/O (kernel writes)";
    if (/dist\/index\//.test(cf.url)) return "live index";
    if (/dist\/warcprox\/crawlLog/.test(cf.url)) return "crawl log";
    if (/node:internal\/fs/.test(cf.url)) { fsSeen = true; continue; }
    if (fsSeen && /dist\//.test(cf.url) && !/dist\/warc\//.test(cf.url)) return `fs write from ${cf.url.replace(/^.*\/dist\//, "")}`;
    if (fsSeen && /dist\/warc\//.test(cf.url)) return "write";
    if (SKIP.test(cf.url)) continue;
    if (io && /dist\/(upstream\/tap|proxy\/)/.test(cf.url)) return io;
    for (const [name, re] of RULES) if (re.test(cf.url)) return name;
    return /^node:/.test(cf.url) ? "other Node internals" : `other: ${cf.url.replace(/^.*\/dist\//, "")}`;
  }
  return io ?? "other (native, no owner)";
};
if (lastS > 0) keepLastRow(lastS);
const cnt = new Map(); for (let i = 0; i < p.samples.length; i++) cnt.set(p.samples[i], (cnt.get(p.samples[i]) ?? 0) + (p.timeDeltas[i] ?? 0));
const st = new Map(); let busy = 0; const leaves = new Map();
for (const [id, t] of cnt) { const s = stageOf(id); const cf = byId.get(id).callFrame; const lk = s + "|" + (cf.functionName || "(anon)") + "@" + cf.url.replace(/^.*\/dist\//, ""); leaves.set(lk, (leaves.get(lk) ?? 0) + t); st.set(s, (st.get(s) ?? 0) + t); if (s !== "idle" && s !== "startup") busy += t; }
const scale = Number(cpuArg) > 0 ? Number(cpuArg) / (busy / exchanges) : 1;
console.log(`profile ${file}; busy (not idle, not startup) ${(busy / 1e6).toFixed(2)} s over ${exchanges} exchanges = ${(busy / exchanges).toFixed(0)} µs/exchange of main-thread samples${scale !== 1 ? `; scaled to ${cpuArg} µs measured` : ""}`);
for (const [k, v] of [...st].sort((a, b) => b[1] - a[1])) if (k !== "idle" && k !== "startup") console.log(`${((v * scale) / exchanges).toFixed(1).padStart(7)} µs  ${(100 * v / busy).toFixed(1).padStart(5)}%  ${k}`);
// STAGE="name": the top leaf functions of one stage.
if (process.env.STAGE) for (const [k, v] of [...leaves].filter(([k]) => k.startsWith(process.env.STAGE + "|")).sort((a, b) => b[1] - a[1]).slice(0, 25)) console.log(`   ${(v / exchanges).toFixed(1).padStart(7)} µs  ${k}`);

/** Keep the samples of the last `seconds` of busy time before the last idle gap of >= 1 s. */
function keepLastRow(seconds) {
  let t = p.startTime;
  const times = p.timeDeltas.map((d) => (t += d));
  const idle = (i) => byId.get(p.samples[i]).callFrame.functionName === "(idle)";
  let last = null;
  let end = p.samples.length - 1;
  for (let i = 0; i < p.samples.length; i++) {
    if (idle(i)) continue;
    if (last !== null && times[i] - times[last] > 1e6) end = last;
    last = i;
  }
  let start = end;
  while (start > 0 && times[start - 1] >= times[end] - seconds * 1e6) start--;
  p.samples = p.samples.slice(start, end + 1);
  p.timeDeltas = p.timeDeltas.slice(start, end + 1);
  p.timeDeltas[0] = 0;
}
