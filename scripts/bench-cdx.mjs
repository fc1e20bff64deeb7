// CDX query bar (issue "CDXJ index"): a query on a 10-million-line sorted CDXJ index answers in
// under 50 ms. Generates the index (realistic SURT keys: reversed host labels, paths, sorted
// queries; 1–8 captures per URL, sorted timestamps), then times exact, prefix (host) and closest
// queries through the query code GET /cdx uses (parseCdxQuery → runQuery over a SortedFile held
// open across queries as the server holds it, every answer line formatted). Timings include
// the page cache as the generation left it (the file was just written).
//   node scripts/bench-cdx.mjs [--lines=10000000] [--queries=300] [--keep=PATH]
// --keep reuses (or leaves) the generated index at PATH; otherwise it is written to a temp dir
// and removed. Bounded: generation stops at --lines, each query type runs --queries times.
import { createWriteStream, existsSync, mkdtempSync, rmSync, statSync } from "node:fs";
import { once } from "node:events";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseCdxQuery, runQuery, formatLine } from "../dist/index/query.js";
import { SortedFile } from "../dist/index/sortedFile.js";
import { surt } from "../dist/index/surt.js";

const arg = (name, dflt) => process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3) ?? dflt;
const LINES = Number(arg("lines", 10_000_000));
const QUERIES = Number(arg("queries", 300));
const keep = arg("keep", null);
const BAR_MS = 50;

// Deterministic pseudo-random numbers (xorshift32).
let seed = 0x2545f491;
const rnd = () => {
  seed ^= seed << 13;
  seed ^= seed >>> 17;
  seed ^= seed << 5;
  return (seed >>> 0) / 4294967296;
};
const pick = (a) => a[Math.floor(rnd() * a.length)];

const TLDS = ["com", "org", "net", "de", "fr", "uk", "io", "edu"];
const WORDS = ["news", "shop", "blog", "data", "archive", "media", "forum", "wiki", "docs", "photo", "travel", "music", "sport", "health", "city", "books"];
const SEGS = ["article", "category", "tag", "page", "static", "img", "css", "js", "user", "search", "2019", "2020", "2021", "about", "contact", "index.html"];
const MIMES = ["text/html", "text/html", "text/html", "image/jpeg", "image/png", "text/css", "application/javascript", "application/json"];

/** URLs whose keys are built directly (and spot-checked against surt()). */
function makeUrls(n) {
  const urls = [];
  const hosts = Math.max(1, Math.floor(n / 60));
  for (let h = 0; h < hosts; h++) {
    const tld = pick(TLDS);
    const name = `${pick(WORDS)}${h.toString(36)}`;
    const sub = rnd() < 0.3 ? pick(["en", "m", "static", "cdn"]) : null;
    const hostKey = sub ? `${tld},${name},${sub}` : `${tld},${name}`;
    const host = sub ? `${sub}.${name}.${tld}` : `${name}.${tld}`;
    const scheme = rnd() < 0.5 ? "https" : "http";
    const paths = 20 + Math.floor(rnd() * 80);
    urls.push({ key: `${hostKey})/`, url: `${scheme}://${host}/` });
    for (let p = 0; p < paths; p++) {
      const depth = 1 + Math.floor(rnd() * 3);
      const segs = [];
      for (let d = 0; d < depth; d++) segs.push(d === depth - 1 ? `${pick(SEGS)}-${Math.floor(rnd() * 5000)}` : pick(SEGS));
      const path = "/" + segs.join("/");
      const q = rnd() < 0.2 ? `?id=${Math.floor(rnd() * 1e6)}&p=${Math.floor(rnd() * 9)}` : "";
      urls.push({ key: `${hostKey})${path}${q}`, url: `${scheme}://${host}${path}${q}` });
    }
  }
  return urls;
}

function tsOf(sec) {
  return new Date(sec * 1000).toISOString().replace(/\D/g, "").slice(0, 14);
}

async function generate(path) {
  const t0 = performance.now();
  const capturesPer = 4; // on average (1–8)
  let urls = makeUrls(Math.ceil(LINES / capturesPer));
  for (let i = 0; i < 200; i++) {
    const u = urls[Math.floor(rnd() * urls.length)];
    if (surt(u.url) !== u.key) throw new Error(`key construction differs from surt(): ${u.url} → ${surt(u.url)} vs ${u.key}`);
  }
  urls.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  urls = urls.filter((u, i) => i === 0 || u.key !== urls[i - 1].key);
  const ws = createWriteStream(path, { highWaterMark: 4 << 20 });
  let lines = 0;
  let offset = 0;
  let buf = "";
  const start = Date.UTC(2015, 0, 1) / 1000;
  const span = 10 * 365 * 86400;
  for (let i = 0; lines < LINES; i = (i + 1) % urls.length) {
    const u = urls[i];
    const n = Math.min(1 + Math.floor(rnd() * 8), LINES - lines);
    const times = [];
    for (let k = 0; k < n; k++) times.push(start + Math.floor(rnd() * span));
    times.sort((a, b) => a - b);
    const mime = pick(MIMES);
    for (const t of times) {
      const revisit = rnd() < 0.2;
      const len = 300 + Math.floor(rnd() * 40000);
      const digest = `sha1:${Math.floor(rnd() * 2 ** 52).toString(32).toUpperCase().padStart(32, "A")}`;
      buf += `${u.key} ${tsOf(t)} {"url": "${u.url}", "mime": "${revisit ? "warc/revisit" : mime}", "status": "200", "digest": "${digest}", "length": "${len}", "offset": "${offset}", "filename": "bench-${String(Math.floor(offset / 1e9)).padStart(5, "0")}.warc.gz"}\n`;
      offset += len;
      lines++;
    }
    if (buf.length > 1 << 20) {
      if (!ws.write(buf)) await once(ws, "drain");
      buf = "";
    }
  }
  ws.end(buf);
  await once(ws, "finish");
  console.log(`generated ${lines.toLocaleString("en")} lines, ${(statSync(path).size / 1e9).toFixed(2)} GB, ${urls.length.toLocaleString("en")} URLs, in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  return urls;
}

const dir = keep ? null : mkdtempSync(join(tmpdir(), "lathe-bench-cdx-"));
const path = keep ?? join(dir, "bench.cdxj");
let urls;
if (keep && existsSync(keep)) {
  console.log(`reusing ${keep}`);
  urls = makeUrls(Math.ceil(LINES / 4));
} else urls = await generate(path);

// Held open across queries, as GET /cdx holds each index file (its probe cache with it).
const file = await SortedFile.open(path);
async function timeQuery(params) {
  const t = performance.now();
  const q = parseCdxQuery(new URLSearchParams(params));
  let n = 0;
  let out = "";
  for await (const l of runQuery(q, [file])) {
    out += formatLine(l, q);
    n++;
  }
  return { ms: performance.now() - t, n, bytes: out.length };
}

const pct = (xs, p) => xs[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))];
const kinds = {
  exact: (u) => ({ url: u.url }),
  "prefix-host-limit100": (u) => ({ url: u.url.replace(/^(https?:\/\/[^/]+\/).*$/, "$1"), matchType: "host", limit: "100" }),
  "closest-limit10": (u) => ({ url: u.url, sort: "closest", closest: tsOf(Date.UTC(2015 + Math.floor(rnd() * 10), 5, 1) / 1000), limit: "10" }),
  "reverse-limit10": (u) => ({ url: u.url, sort: "reverse", limit: "10" }),
};
// Warm-up (JIT, the page cache of the search path's upper levels); not counted.
for (let i = 0; i < 50; i++) for (const make of Object.values(kinds)) await timeQuery(make(pick(urls)));
let worst = 0;
console.log("| query | n | p50 ms | p99 ms | max ms | lines/query |");
console.log("| --- | ---: | ---: | ---: | ---: | ---: |");
for (const [name, make] of Object.entries(kinds)) {
  const ms = [];
  let lines = 0;
  for (let i = 0; i < QUERIES; i++) {
    const r = await timeQuery(make(pick(urls)));
    ms.push(r.ms);
    lines += r.n;
  }
  ms.sort((a, b) => a - b);
  worst = Math.max(worst, pct(ms, 99));
  console.log(`| ${name} | ${QUERIES} | ${pct(ms, 50).toFixed(2)} | ${pct(ms, 99).toFixed(2)} | ${ms[ms.length - 1].toFixed(2)} | ${(lines / QUERIES).toFixed(1)} |`);
}
await file.close();
// Without the probe cache: the index file opened for each query (the first query after a merge).
{
  const ms = [];
  for (let i = 0; i < QUERIES; i++) {
    const u = pick(urls);
    const t = performance.now();
    const f = await SortedFile.open(path);
    const q = parseCdxQuery(new URLSearchParams({ url: u.url }));
    for await (const l of runQuery(q, [f])) formatLine(l, q);
    await f.close();
    ms.push(performance.now() - t);
  }
  ms.sort((a, b) => a - b);
  worst = Math.max(worst, pct(ms, 99));
  console.log(`| exact, file opened per query | ${QUERIES} | ${pct(ms, 50).toFixed(2)} | ${pct(ms, 99).toFixed(2)} | ${ms[ms.length - 1].toFixed(2)} | |`);
}
if (dir) rmSync(dir, { recursive: true, force: true });
console.log(worst < BAR_MS ? `PASS: p99 ${worst.toFixed(2)} ms < ${BAR_MS} ms` : `FAIL: p99 ${worst.toFixed(2)} ms >= ${BAR_MS} ms`);
process.exitCode = worst < BAR_MS ? 0 : 1;
