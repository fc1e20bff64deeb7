#!/usr/bin/env node
// The shared store benchmark (issue #22, "Benchmark"), on a private PostgreSQL this script starts
// (scripts/lib/postgres.mjs; durability off, shared_buffers 1 GB) and removes:
//   (a) bulk import: `lathe index --dedup-db URL` on generated gzipped WARCs (a response and a
//       request record per capture, 1–4 kB bodies), entries/s; the same files into a SQLite file;
//       reading and choosing the entries alone (no store); the COPY load path alone (entries
//       already made). Bar: ≥ 50,000 entries/s.
//   (b) dedup lookups with 10 million entries (loaded with COPY FREEZE, indexes built after):
//       random by-digest lookups, hits and misses, at concurrency 1 and 8, p50/p99 µs, through
//       the PostgreSQL dedup store itself (src/postgres/dedupIndex.ts, byDigest).
//   (c) http-small c32 through lathe with the SQLite store and with `--postgresql URL`, alternating
//       rounds, medians, the req/s ratio. Bar: PostgreSQL ≥ 0.8× SQLite.
// Needs the build (npm run build) and ../shared/bench/proxybench.mjs (LATHE_BENCH_DIR). Every step
// prints how long it took; a default run takes about 5–8 minutes on 2 cores, the 10M-row load most.
//
//   node scripts/bench-postgres.mjs [--quick] [--only import,lookup,proxy] [--entries N]
//                                   [--captures N] [--lookups N] [--rounds N]
//   --quick     1M entries, 20,000 captures, 5,000 lookups a row, 1 round, proxybench --quick
//   --entries   rows for the lookups (default 10,000,000)
//   --captures  captures in the generated WARCs (default 60,000, in 4 files)
//   --lookups   timed lookups per row (default 20,000)
//   --rounds    rounds of (c) (default 3)
// Exit 0 when every bar measured passes, 1 otherwise, 2 on usage errors.
import { execFile, spawn, execFileSync } from "node:child_process";
import { createHash, randomBytes, randomUUID } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { once } from "node:events";
import os from "node:os";
import path from "node:path";
import { finished } from "node:stream/promises";
import { fileURLToPath, pathToFileURL } from "node:url";
import { promisify } from "node:util";
import { gzipSync } from "node:zlib";
import pg from "pg";
import copyStreams from "pg-copy-streams";
import { startPostgres } from "./lib/postgres.mjs";
import { freePort, startServer } from "./lib/servers.mjs";

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const lathe = path.join(repoRoot, "bin", "lathe.js");
const dist = (p) => pathToFileURL(path.join(repoRoot, "dist", p)).href;
const benchDir = path.resolve(process.env.LATHE_BENCH_DIR ?? path.resolve(repoRoot, "..", "shared", "bench"));
const proxybench = path.join(benchDir, "proxybench.mjs");

const BARS = { importPerSec: 50_000, proxyRatio: 0.8 };

// --- arguments -----------------------------------------------------------------------------------

const argv = process.argv.slice(2);
const quick = argv.includes("--quick");
function arg(name, dflt) {
  const i = argv.indexOf(`--${name}`);
  if (i < 0) return dflt;
  const v = argv[i + 1];
  if (name === "only") return v ?? "";
  const n = Number(v);
  if (!Number.isInteger(n) || n <= 0) usage(`--${name} needs a positive whole number, got ${v}`);
  return n;
}
function usage(msg) {
  process.stderr.write(`bench-postgres: ${msg}\n`);
  process.exit(2);
}
const ENTRIES = arg("entries", quick ? 1_000_000 : 10_000_000);
const CAPTURES = arg("captures", quick ? 20_000 : 60_000);
const LOOKUPS = arg("lookups", quick ? 5_000 : 20_000);
const ROUNDS = arg("rounds", quick ? 1 : 3);
const ONLY = new Set(String(arg("only", "import,lookup,proxy")).split(",").filter(Boolean));
for (const p of ONLY) if (!["import", "lookup", "proxy"].includes(p)) usage(`--only takes import, lookup, proxy; got ${p}`);

const say = (s) => process.stdout.write(`${s}\n`);
const fmt = (n) => Math.round(n).toLocaleString("en-US");
const secs = (ms) => `${(ms / 1000).toFixed(1)} s`;
const run = promisify(execFile);

/** Run `fn`, print how long it took under `label`; returns fn's result. */
async function step(label, fn) {
  const t0 = performance.now();
  const r = await fn();
  say(`  [${secs(performance.now() - t0)}] ${label}`);
  return r;
}

const quantile = (sorted, q) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
const median = (xs) => {
  const v = [...xs].sort((a, b) => a - b);
  return v.length ? (v.length % 2 ? v[v.length >> 1] : (v[(v.length >> 1) - 1] + v[v.length >> 1]) / 2) : null;
};

/** COPY `rows()` (strings of COPY text, until null) into `table` on client `c`; resolves with the row count. */
async function copyIn(c, sql, rows) {
  const stream = c.query(copyStreams.from(sql));
  let failure = null;
  stream.on("error", (e) => (failure ??= e));
  for (let chunk = rows(); chunk !== null; chunk = rows()) {
    if (failure) throw failure;
    if (!stream.write(chunk)) await once(stream, "drain");
  }
  stream.end();
  await finished(stream);
  return stream.rowCount;
}

// --- (a) bulk import ---------------------------------------------------------------------------

const WORDS = "archive record crawl capture page index digest payload revisit original proxy lathe table row link anchor".split(" ");

/** A page body of about `n` bytes (compressible text, different per capture). */
function bodyOf(i, n) {
  let s = `<!doctype html><html><body><h1>page ${i}</h1>\n`;
  for (let k = 0; s.length < n; k++) s += `<p>${WORDS[(i + k) % WORDS.length]} ${WORDS[(i * 7 + k) % WORDS.length]} ${i * 31 + k}</p>\n`;
  return s;
}

/** A response and a request record, each its own gzip member, as crawlers write captures. */
function captureRecords(i) {
  const host = `www${i % 97}.example${i % 13}.org`;
  const target = `/section/${i % 1000}/page-${i}.html`;
  const url = `https://${host}${target}`;
  const body = bodyOf(i, 1000 + ((i * 2654435761) % 3000));
  const http = `HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nETag: "${i.toString(16)}"\r\nLast-Modified: Sun, 31 May 2026 08:00:00 GMT\r\n\r\n${body}`;
  const date = new Date(Date.UTC(2026, 5, 1) + i * 1000).toISOString().replace(/\.\d+Z$/, "Z");
  const id = `<urn:uuid:${randomUUID()}>`;
  const warc = (type, extra, block) =>
    gzipSync(`WARC/1.1\r\nWARC-Type: ${type}\r\n${extra}WARC-Date: ${date}\r\nWARC-Target-URI: ${url}\r\nContent-Type: application/http; msgtype=${type}\r\nContent-Length: ${Buffer.byteLength(block)}\r\n\r\n${block}\r\n\r\n`, { level: 1 }); // level 1: generation is the slow part of (a); reading costs the same
  const payload = createHash("sha1").update(body).digest("hex");
  const request = `GET ${target} HTTP/1.1\r\nHost: ${host}\r\nUser-Agent: bench/1.0\r\nAccept: */*\r\n\r\n`;
  return [warc("response", `WARC-Record-ID: ${id}\r\nWARC-Payload-Digest: sha1:${payload}\r\n`, http), warc("request", `WARC-Record-ID: <urn:uuid:${randomUUID()}>\r\nWARC-Concurrent-To: ${id}\r\n`, request)];
}

function writeWarcs(dir, captures, files) {
  const per = Math.ceil(captures / files);
  const names = [];
  for (let f = 0; f < files; f++) {
    const name = path.join(dir, `bench-import-${String(f).padStart(5, "0")}.warc.gz`);
    const parts = [];
    for (let i = f * per; i < Math.min(captures, (f + 1) * per); i++) parts.push(...captureRecords(i));
    writeFileSync(name, Buffer.concat(parts));
    names.push(name);
  }
  return names;
}

/** `lathe index --dedup-db TARGET FILES`: wall seconds and the entries its summary reports. */
async function latheIndex(target, files) {
  const t0 = performance.now();
  const { stdout } = await run(process.execPath, [lathe, "index", "--dedup-db", target, ...files], { maxBuffer: 16 << 20 });
  const seconds = (performance.now() - t0) / 1000;
  const entries = Number(/^entries added: +(\d+)/m.exec(stdout)?.[1] ?? NaN);
  return { seconds, entries, rate: entries / seconds };
}

/** Entries made in memory, through the COPY sink alone: what PostgreSQL takes when reading is not the limit. */
async function copyPathRate(url, n) {
  const { openCopyImport } = await import(dist("postgres/copyImport.js"));
  const { silentLogger } = await import(dist("core/log.js"));
  const digests = randomBytes(20 * n);
  const entries = Array.from({ length: n }, (_, i) => ({
    bucket: "default", digest: { alg: "sha1", bytes: digests.subarray(20 * i, 20 * i + 20) }, url: `https://www${i % 97}.example.org/copy/${i}.html`,
    date: "2026-06-01T12:00:00Z", recordId: `<urn:uuid:${randomUUID()}>`, filename: "copy-path.warc.gz", offset: i * 900, length: 880, status: 200, etag: null, lastModified: null,
  }));
  const target = await openCopyImport(url, "bench", silentLogger);
  try {
    const t0 = performance.now();
    await target.sink.beginFile("copy-path.warc.gz");
    for (let i = 0; i < n; i += target.sink.batchSize) await target.sink.add(entries.slice(i, i + target.sink.batchSize));
    await target.sink.endFile();
    return n / ((performance.now() - t0) / 1000);
  } finally {
    await target.close();
  }
}

/** The import's reading and choice of entries with a sink that keeps nothing. */
async function readingRate(files) {
  const { importWarcsInto } = await import(dist("dedup/importer.js"));
  const sink = { beginFile: async () => {}, add: async () => {}, endFile: async () => 0, addOriginals: async (e) => e.length };
  const t0 = performance.now();
  const s = await importWarcsInto(files, sink, { bucket: "default" });
  return s.entriesAdded / ((performance.now() - t0) / 1000);
}

async function importBench(server, work) {
  say(`\n=== (a) bulk import: ${fmt(CAPTURES)} captures (response + request records, gzip), 4 WARC files`);
  const dir = path.join(work, "import");
  mkdirSync(dir);
  const files = await step("generated the WARCs", () => writeWarcs(dir, CAPTURES, 4));
  const url = await server.createDatabase("bench_import");
  const pgRun = await step("lathe index --dedup-db postgresql://…", () => latheIndex(url, files));
  const sqRun = await step("lathe index --dedup-db FILE (SQLite)", () => latheIndex(path.join(dir, "dedup.sqlite3"), files));
  const reading = await step("reading and choosing entries alone (no store)", () => readingRate(files));
  const copyUrl = await server.createDatabase("bench_copy_path");
  const copyOnly = await step("COPY load path alone (entries already made)", () => copyPathRate(copyUrl, Math.min(CAPTURES, 200_000)));
  say(`  lathe index into PostgreSQL: ${fmt(pgRun.entries)} entries in ${pgRun.seconds.toFixed(2)} s = ${fmt(pgRun.rate)} entries/s (process start included)`);
  say(`  lathe index into SQLite:     ${fmt(sqRun.entries)} entries in ${sqRun.seconds.toFixed(2)} s = ${fmt(sqRun.rate)} entries/s`);
  say(`  reading + choosing alone:    ${fmt(reading)} entries/s (the ceiling any store sees on these files)`);
  say(`  COPY load path alone:        ${fmt(copyOnly)} entries/s`);
  rmSync(dir, { recursive: true, force: true });
  return { pgRate: pgRun.rate, copyOnly, reading, sqliteRate: sqRun.rate };
}

// --- (b) lookups with 10M entries --------------------------------------------------------------

/** Rows of synthetic entries in COPY text, `chunk` at a time; keeps `sample` digests to look up later. */
function syntheticRows(total, chunk, sample) {
  let done = 0;
  const every = Math.max(1, Math.floor(total / sample.size));
  return () => {
    if (done >= total) return null;
    const n = Math.min(chunk, total - done);
    const digests = randomBytes(20 * n);
    let out = "";
    for (let k = 0; k < n; k++) {
      const i = done + k;
      const d = digests.subarray(20 * k, 20 * k + 20);
      if (i % every === 0 && sample.list.length < sample.size) sample.list.push(Buffer.from(d));
      const file = `lathe-20260601-${String(i >> 16).padStart(5, "0")}-crawler${i % 4}.warc.gz`;
      out += `default\t1\t\\\\x${d.toString("hex")}\thttps://www${i % 9973}.example${i % 101}.org/path/${i % 50000}/item-${i}.html\t2026-06-01T12:00:00Z\t<urn:uuid:${randomUUID()}>\t${file}\t${(i & 0xffff) * 9000}\t8900\t200\t\\N\t\\N\n`;
    }
    done += n;
    return out;
  };
}

/** Fill dedup_entries with `total` rows fast: COPY FREEZE with the secondary indexes dropped, then rebuilt as schema.ts defines them. */
async function loadEntries(url, total, sample) {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    await c.query("SET maintenance_work_mem = '1GB'");
    const defs = (await c.query("SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'dedup_entries' AND indexname <> 'dedup_entries_pkey'")).rows;
    await step(`COPY FREEZE ${fmt(total)} synthetic rows (secondary indexes dropped)`, async () => {
      await c.query("BEGIN");
      await c.query("TRUNCATE dedup_entries");
      for (const d of defs) await c.query(`DROP INDEX ${d.indexname}`);
      const cols = "bucket, alg, digest, url, warc_date, record_id, filename, file_offset, record_length, status, etag, last_modified";
      await copyIn(c, `COPY dedup_entries (${cols}) FROM STDIN WITH (FREEZE)`, syntheticRows(total, 10_000, sample));
      await c.query("COMMIT");
    });
    for (const d of defs) await step(`CREATE INDEX ${d.indexname}`, () => c.query(d.indexdef));
    await step("ANALYZE", () => c.query("ANALYZE dedup_entries"));
    const size = (await c.query("SELECT pg_size_pretty(pg_total_relation_size('dedup_entries')) AS s")).rows[0].s;
    say(`  dedup_entries: ${fmt(total)} rows, ${size} with its indexes`);
  } finally {
    await c.end();
  }
}

/** `count` lookups of `keys` (cycled), `conc` at a time, through the store's byDigest; latencies in µs, sorted, and lookups/s. */
async function timeLookups(index, conc, keys, count) {
  const lat = new Float64Array(count);
  let next = 0;
  let found = 0;
  const t0 = performance.now();
  const worker = async () => {
    for (let i = next++; i < count; i = next++) {
      const s = process.hrtime.bigint();
      const e = await index.byDigest("default", { alg: "sha1", bytes: keys[i % keys.length] });
      lat[i] = Number(process.hrtime.bigint() - s) / 1000;
      if (e) found++;
    }
  };
  await Promise.all(Array.from({ length: conc }, worker));
  const qps = count / ((performance.now() - t0) / 1000);
  return { sorted: lat.sort(), qps, found };
}

/** lathe's PostgreSQL dedup store (src/postgres/dedupIndex.ts) on `url`, as `lathe serve --postgresql` opens it. */
async function openDedupIndex(url, dir) {
  const { openSharedDatabase } = await import(dist("postgres/database.js"));
  const { PostgresDedupIndex } = await import(dist("postgres/dedupIndex.js"));
  const { Outbox } = await import(dist("postgres/outbox.js"));
  const { silentLogger } = await import(dist("core/log.js"));
  const db = await openSharedDatabase(url, "bench", { instanceId: "bench", log: silentLogger });
  return { db, index: new PostgresDedupIndex(db, new Outbox(path.join(dir, "outbox"), 1 << 20, silentLogger), silentLogger) };
}

async function lookupBench(server, work) {
  say(`\n=== (b) dedup lookups by digest with ${fmt(ENTRIES)} entries (PostgresDedupIndex.byDigest, one pool as lathe serve has)`);
  // C collation: the index builds sort text (bucket, md5(url)) about 40% faster than under C.UTF-8;
  // lookups compare equal strings, which take the same path under any collation.
  await server.query(`CREATE DATABASE bench_lookup TEMPLATE template0 LC_COLLATE 'C' LC_CTYPE 'C.UTF-8'`);
  const url = server.url("bench_lookup");
  const { db, index } = await openDedupIndex(url, work); // creates lathe's schema
  const rows = [];
  try {
    const sample = { size: 100_000, list: [] };
    await loadEntries(url, ENTRIES, sample);
    const hits = sample.list.sort(() => Math.random() - 0.5);
    const misses = Array.from({ length: 100_000 }, () => randomBytes(20));
    await step("warm-up: 10,000 lookups at concurrency 8", () => timeLookups(index, 8, hits.slice(50_000), 10_000));
    for (const conc of [1, 8]) {
      for (const [kind, keys] of [["hit", hits], ["miss", misses]]) {
        const r = await step(`${fmt(LOOKUPS)} lookups (${kind}) at concurrency ${conc}`, () => timeLookups(index, conc, keys, LOOKUPS));
        const expected = kind === "hit" ? LOOKUPS : 0;
        if (r.found !== expected) throw new Error(`${kind} lookups found ${r.found} entries, expected ${expected}`);
        rows.push({ kind, conc, p50: quantile(r.sorted, 0.5), p99: quantile(r.sorted, 0.99), qps: r.qps });
      }
    }
  } finally {
    await db.close();
  }
  say(`  ${"lookup".padEnd(12)} ${"p50 µs".padStart(8)} ${"p99 µs".padStart(8)} ${"lookups/s".padStart(10)}`);
  for (const r of rows) say(`  ${`${r.kind} c${r.conc}`.padEnd(12)} ${r.p50.toFixed(0).padStart(8)} ${r.p99.toFixed(0).padStart(8)} ${fmt(r.qps).padStart(10)}`);
  return rows;
}

// --- (c) http-small through lathe: SQLite store against PostgreSQL ----------------------------

function runProxybench(args) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [proxybench, ...args], { stdio: ["ignore", "inherit", "inherit"] });
    child.once("error", reject);
    child.once("exit", (code, sig) => resolve(code ?? (sig ? 128 : 1)));
  });
}

/** One lathe (fresh WARC dir and store), proxybench http-small through it; the c32 row. */
async function proxyRun(work, label, round, postgresUrl) {
  const inst = path.join(work, `${label}-${round}`);
  mkdirSync(inst, { recursive: true });
  const config = path.join(inst, "proxy.config.json");
  writeFileSync(config, `${JSON.stringify({ upstream: { caFile: execFileSync(process.execPath, [proxybench, "--print-ca"], { encoding: "utf8" }).trim() } })}\n`);
  const port = await freePort();
  const args = [lathe, "serve", "--port", String(port), "--control-port=-1", "--dir", path.join(inst, "warcs"), "--certs", path.join(work, "certs"), "--config", config];
  if (postgresUrl) args.push("--postgresql", postgresUrl);
  say(`\n--- round ${round}: lathe with the ${label} store`);
  const server = await startServer("lathe", process.execPath, args, port, path.join(inst, "lathe.log"));
  const json = path.join(inst, "result.json");
  const ca = path.join(work, "certs", "lathe-ca.pem"); // lathe's CA, so proxybench's HTTPS probe passes
  try {
    await runProxybench(["--proxy", `http://127.0.0.1:${port}`, ...(existsSync(ca) ? ["--ca", ca] : []), "--scenarios", "http-small", "--pid", String(server.pid), "--label", label, "--json", json, ...(quick ? ["--quick"] : [])]);
  } finally {
    await server.stop();
  }
  const row = existsSync(json) ? JSON.parse(readFileSync(json, "utf8")).results.find((r) => r.id === "http-small/c32") : null;
  return row ? { reqPerSec: row.reqPerSec, errors: row.errors || 0 } : { reqPerSec: null, errors: 1 };
}

async function proxyBench(server, work) {
  say(`\n=== (c) http-small c32 through lathe: SQLite store against PostgreSQL, ${ROUNDS} alternating round(s)`);
  if (!existsSync(proxybench)) throw new Error(`the harness ${proxybench} is missing; set LATHE_BENCH_DIR to the directory holding proxybench.mjs`);
  const runs = { sqlite: [], postgresql: [] };
  let pgEntries = 0;
  for (let round = 1; round <= ROUNDS; round++) {
    runs.sqlite.push(await step(`round ${round}: SQLite`, () => proxyRun(work, "sqlite", round, null)));
    const url = await server.createDatabase(`bench_proxy_${round}`);
    runs.postgresql.push(await step(`round ${round}: PostgreSQL`, () => proxyRun(work, "postgresql", round, url)));
    // Did lathe use the store? (No table at all when it never opened the database.)
    const written = await server.query("SELECT count(*) AS n FROM dedup_entries", [], `bench_proxy_${round}`).catch(() => [{ n: 0 }]);
    pgEntries += Number(written[0].n);
  }
  const sq = median(runs.sqlite.map((r) => r.reqPerSec).filter((x) => x !== null));
  const pq = median(runs.postgresql.map((r) => r.reqPerSec).filter((x) => x !== null));
  const errors = [...runs.sqlite, ...runs.postgresql].reduce((s, r) => s + r.errors, 0);
  say(`\n  http-small/c32 req/s, median of ${ROUNDS}: SQLite ${sq?.toFixed(1) ?? "-"} (${runs.sqlite.map((r) => r.reqPerSec?.toFixed(0) ?? "-").join(", ")}), PostgreSQL ${pq?.toFixed(1) ?? "-"} (${runs.postgresql.map((r) => r.reqPerSec?.toFixed(0) ?? "-").join(", ")})`);
  return { ratio: sq && pq ? pq / sq : null, errors, usedPostgres: pgEntries > 0, sq, pq };
}

// --- main --------------------------------------------------------------------------------------

async function main() {
  if (!existsSync(path.join(repoRoot, "dist", "postgres", "copyImport.js"))) usage("dist/ is missing or old; run `npm run bench:postgres` (it builds first) or `npm run build`");
  const t0 = performance.now();
  say(`bench-postgres: ${[...ONLY].join(", ")}${quick ? " (--quick)" : ""}; load average ${os.loadavg().map((x) => x.toFixed(2)).join(" ")} on ${os.cpus().length} cores`);
  const work = mkdtempSync(path.join(os.tmpdir(), "lathe-bench-pg-"));
  let server = null;
  // Interrupted: still stop the server and remove its files (destroy is synchronous).
  process.on("exit", () => server?.destroy());
  for (const sig of ["SIGINT", "SIGTERM"]) process.on(sig, () => process.exit(130));
  const verdicts = [];
  const put = (ok, text) => verdicts.push(`${ok === null ? "SKIP" : ok ? "PASS" : "FAIL"}  ${text}`);
  try {
    server = await step("started PostgreSQL (initdb, pg_ctl)", () => startPostgres({ settings: { shared_buffers: "1GB", max_wal_size: "4GB" } }));
    if (ONLY.has("import")) {
      const a = await importBench(server, work);
      put(a.pgRate >= BARS.importPerSec, `bulk import lathe index --dedup-db URL: ${fmt(a.pgRate)} entries/s (bar ≥ ${fmt(BARS.importPerSec)}; SQLite ${fmt(a.sqliteRate)}, reading alone ${fmt(a.reading)}, COPY path alone ${fmt(a.copyOnly)})`);
    }
    if (ONLY.has("lookup")) {
      const rows = await lookupBench(server, work);
      const worst = Math.max(...rows.map((r) => r.p99));
      put(null, `dedup lookup with ${fmt(ENTRIES)} entries: p99 ${rows.map((r) => `${r.kind} c${r.conc} ${r.p99.toFixed(0)} µs`).join(", ")} (worst ${worst.toFixed(0)} µs; no bar set)`);
    }
    if (ONLY.has("proxy")) {
      const c = await proxyBench(server, work);
      if (!c.usedPostgres) put(null, `http-small/c32 PostgreSQL/SQLite: lathe wrote no dedup entry to PostgreSQL (its PostgreSQL dedup store is not in this build), not scored; req/s ${c.pq?.toFixed(0)} vs ${c.sq?.toFixed(0)}`);
      else if (c.errors) put(false, `http-small/c32: ${c.errors} errors, not scored`);
      else put(c.ratio !== null && c.ratio >= BARS.proxyRatio, `http-small/c32 req/s PostgreSQL/SQLite = ${c.ratio?.toFixed(2) ?? "-"} (bar ≥ ${BARS.proxyRatio}; ${c.pq?.toFixed(1)} vs ${c.sq?.toFixed(1)})`);
    }
  } finally {
    server?.destroy();
    server = null;
    rmSync(work, { recursive: true, force: true });
  }
  say(`\n=== bars (${secs(performance.now() - t0)} in all)`);
  for (const v of verdicts) say(v);
  return verdicts.some((v) => v.startsWith("FAIL")) ? 1 : 0;
}

main().then(
  (code) => process.exit(code),
  (e) => {
    console.error(`bench-postgres: ${e.stack ?? e.message}`);
    process.exit(1);
  },
);
