#!/usr/bin/env node
// The dedup store benchmark (issue "Deduplication", Benchmarks): bulk-load N entries (default
// 10,000,000: random sha1 digests, realistic URLs, file names, offsets, record ids) into a fresh
// SQLite dedup store in batches, then time random lookups of existing and absent digests on the
// reopened store. Goals: bulk load >= 100,000 entries/s; byDigest p99 < 0.2 ms.
// Runs against the built store (npm run build); works in a temp dir it deletes; stops by itself.
//
//   node scripts/bench-dedup.mjs [--entries N] [--batch N] [--lookups N] [--cache MiB] [--mmap MiB] [--keep]
//
//   --entries  entries to load (default 10000000)
//   --batch    entries per add() call, i.e. per transaction (default 100000)
//   --lookups  timed lookups per kind (default 100000)
//   --cache    SQLite page cache (MiB) while loading (default 512); lookups use the store default
//   --mmap     look up with the store's mmapMiB option set to this (default: the store default, off)
//   --keep     keep the database (prints its path)
import { randomBytes, randomUUID } from "node:crypto";
import { closeSync, fsyncSync, mkdtempSync, openSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const storeModule = path.join(repoRoot, "dist", "dedup", "sqliteStore.js");

function arg(name, dflt) {
  const i = process.argv.indexOf(`--${name}`);
  if (i < 0) return dflt;
  const v = Number(process.argv[i + 1]);
  if (!Number.isFinite(v) || v < 0 || (v === 0 && name !== "mmap")) {
    process.stderr.write(`bench-dedup: --${name} needs a positive number\n`);
    process.exit(2);
  }
  return v;
}
const ENTRIES = Math.floor(arg("entries", 10_000_000));
const BATCH = Math.floor(arg("batch", 100_000));
const LOOKUPS = Math.floor(arg("lookups", 100_000));
const CACHE_MIB = arg("cache", 512);
const MMAP_MIB = arg("mmap", 0);
const KEEP = process.argv.includes("--keep");
const TIME_LIMIT_MS = 60 * 60 * 1000;
const GOAL_LOAD = 100_000;
const GOAL_P99_MS = 0.2;

const say = (s) => process.stdout.write(`${s}\n`);
const fmt = (n) => Math.round(n).toLocaleString("en-US");

let openSqliteDedupStore;
try {
  ({ openSqliteDedupStore } = await import(storeModule));
} catch (e) {
  process.stderr.write(`bench-dedup: cannot load ${storeModule} (run npm run build first): ${e.message}\n`);
  process.exit(2);
}

const dir = mkdtempSync(path.join(os.tmpdir(), "lathe-bench-dedup-"));
const dbPath = path.join(dir, "lathe-dedup.sqlite3");
const cleanup = () => {
  if (!KEEP) rmSync(dir, { recursive: true, force: true });
};
process.on("exit", cleanup);
for (const sig of ["SIGINT", "SIGTERM"]) process.on(sig, () => process.exit(130));
const deadline = setTimeout(() => {
  say(`FAIL bench-dedup did not finish within ${TIME_LIMIT_MS / 60000} minutes`);
  process.exit(1);
}, TIME_LIMIT_MS);
deadline.unref();

// ---- realistic-looking data, deterministic in shape, random in content ----
const WORDS = ("news article blog post page index about contact product item category tag search static assets img css js api v1 v2 " +
  "user profile archive 2019 2020 2021 2022 2023 2024 media video photo gallery docs help faq en de fr wiki story world sport").split(" ");
const TLDS = ["com", "org", "net", "de", "fr", "co.uk", "io", "edu", "gov", "info"];
const HOSTS = Array.from({ length: 20_000 }, (_, i) => `${i % 3 ? "www." : ""}${WORDS[i % WORDS.length]}${i}.example.${TLDS[i % TLDS.length]}`);
const EXT = [".html", ".html", "", "/", ".php", ".jpg", ".png", ".css", ".js", ".json"];
let rngState = 0x12345678;
const rnd = (n) => {
  rngState = (Math.imul(rngState, 1103515245) + 12345) >>> 0;
  return rngState % n;
};
function makeUrl(i) {
  const host = HOSTS[rnd(HOSTS.length)];
  const depth = 1 + rnd(4);
  let p = "";
  for (let d = 0; d < depth; d++) p += `/${WORDS[rnd(WORDS.length)]}`;
  p += `-${i.toString(36)}${EXT[rnd(EXT.length)]}`;
  if (rnd(4) === 0) p += `?id=${rnd(1_000_000)}&ref=${WORDS[rnd(WORDS.length)]}`;
  return `${rnd(5) ? "https" : "http"}://${host}${p}`;
}
const START = Date.UTC(2024, 4, 1);
const PER_FILE = 20_000;
const fileName = (n) => `lathe-20240501120000000-${String(n).padStart(5, "0")}-bench.warc.gz`;
// Strings as a WARC reader hands them over: flat (decoded from a buffer), not a rope of
// concatenations that V8 must flatten on first use; one file name string per file.
const flat = (s) => Buffer.from(s, "latin1").toString("latin1");
let fileNo = -1;
let fileStr = "";

function makeBatch(from, n, sample, every) {
  const digests = randomBytes(20 * n);
  const batch = new Array(n);
  for (let j = 0; j < n; j++) {
    const i = from + j;
    const bytes = digests.subarray(20 * j, 20 * j + 20);
    const url = flat(makeUrl(i));
    if (Math.floor(i / PER_FILE) !== fileNo) fileStr = flat(fileName((fileNo = Math.floor(i / PER_FILE))));
    const status = rnd(20) === 0 ? 404 : 200;
    batch[j] = {
      bucket: "default",
      digest: { alg: "sha1", bytes },
      url,
      date: flat(new Date(START + i * 250).toISOString().replace(/\.\d+Z$/, "Z")),
      recordId: flat(`<urn:uuid:${randomUUID()}>`),
      filename: fileStr,
      offset: (i % PER_FILE) * 9000,
      length: 2000 + rnd(7000),
      status,
      etag: rnd(3) === 0 ? `"${rnd(1 << 30).toString(16)}"` : null,
      lastModified: rnd(3) === 0 ? new Date(START - rnd(1e10)).toUTCString() : null,
    };
    if (i % every === 0) sample.push({ url, digest: { alg: "sha1", bytes: Buffer.from(bytes) } });
  }
  return batch;
}

function percentiles(ms) {
  const a = Float64Array.from(ms).sort();
  const at = (q) => a[Math.min(a.length - 1, Math.floor(a.length * q))];
  return { p50: at(0.5), p99: at(0.99), max: a[a.length - 1] };
}
const showMs = (p) => `p50 ${p.p50.toFixed(4)} ms  p99 ${p.p99.toFixed(4)} ms  max ${p.max.toFixed(3)} ms`;

/** Bytes this process has caused to be written to storage (Linux /proc/self/io), or null. */
function writtenBytes() {
  try {
    return Number(/write_bytes: (\d+)/.exec(readFileSync("/proc/self/io", "utf8"))[1]);
  } catch {
    return null;
  }
}

function dbBytes() {
  let total = 0;
  for (const f of readdirSync(dir)) total += statSync(path.join(dir, f)).size;
  return total;
}

// ---- bulk load ----
say(`bench-dedup: ${fmt(ENTRIES)} entries in batches of ${fmt(BATCH)} into ${dbPath} (node ${process.version}, ${os.cpus().length} CPUs)`);
const sample = [];
const every = Math.max(1, Math.floor(ENTRIES / 50_000));
let store = openSqliteDedupStore(dbPath, { cacheMiB: CACHE_MIB });
let addMs = 0;
const written0 = writtenBytes();
const wall0 = performance.now();
let nextReport = 1_000_000;
for (let i = 0; i < ENTRIES; i += BATCH) {
  const n = Math.min(BATCH, ENTRIES - i);
  const batch = makeBatch(i, n, sample, every);
  const t = performance.now();
  store.add(batch);
  addMs += performance.now() - t;
  if (i + n >= nextReport || i + n === ENTRIES) {
    say(`  ${fmt(i + n)} entries  ${fmt(((i + n) / addMs) * 1000)}/s in add()  ${fmt(((i + n) / (performance.now() - wall0)) * 1000)}/s wall`);
    nextReport += 1_000_000;
  }
}
const wallMs = performance.now() - wall0;
const count = store.count();
store.close();
const loadRate = (ENTRIES / addMs) * 1000;
say(`load: ${fmt(ENTRIES)} entries, ${fmt(loadRate)} entries/s in add() (${(addMs / 1000).toFixed(1)} s), ${fmt((ENTRIES / wallMs) * 1000)}/s including data generation`);
if (count !== ENTRIES) say(`WARN count() says ${count}, expected ${ENTRIES}`);
const bytes = dbBytes();
const written = written0 === null ? null : writtenBytes() - written0;
say(`database: ${(bytes / 1e6).toFixed(0)} MB on disk (${(bytes / ENTRIES).toFixed(0)} bytes/entry)${written === null ? "" : `; ${(written / 1e6).toFixed(0)} MB written while loading (${(written / ENTRIES).toFixed(0)} bytes/entry)`}`);
// Lookups are timed on a quiet disk: flush what the load left in the page cache first.
{
  const t = performance.now();
  for (const f of readdirSync(dir)) {
    const fd = openSync(path.join(dir, f), "r");
    fsyncSync(fd);
    closeSync(fd);
  }
  say(`  (fsync of the database after the load: ${((performance.now() - t) / 1000).toFixed(1)} s)`);
}

// ---- lookups, on the reopened store with its default cache (a restarted lathe) ----
store = openSqliteDedupStore(dbPath, MMAP_MIB ? { mmapMiB: MMAP_MIB } : {});
if (MMAP_MIB) say(`lookups with mmapMiB ${MMAP_MIB}`);
const pick = () => sample[Math.floor(Math.random() * sample.length)];
const absent = () => ({ alg: "sha1", bytes: randomBytes(20) });
for (let i = 0; i < 2000; i++) store.byDigest("default", pick().digest); // JIT warm-up only

function timeLookups(label, fn) {
  const hitMs = [];
  const missMs = [];
  for (let i = 0; i < LOOKUPS; i++) {
    const hit = i % 2 === 0;
    const s = pick();
    const args = hit ? s : { url: s.url, digest: absent() };
    const t = performance.now();
    const r = fn(args);
    const dt = performance.now() - t;
    if (hit !== (r !== null)) throw new Error(`${label}: ${hit ? "missed an existing" : "found an absent"} digest`);
    (hit ? hitMs : missMs).push(dt);
  }
  const all = percentiles([...hitMs, ...missMs]);
  say(`${label}: ${fmt(LOOKUPS)} lookups  ${showMs(all)}`);
  say(`  existing: ${showMs(percentiles(hitMs))}`);
  say(`  absent:   ${showMs(percentiles(missMs))}`);
  return all;
}
const byDigest = timeLookups("byDigest", (a) => store.byDigest("default", a.digest));
const byUrlAndDigest = timeLookups("byUrlAndDigest", (a) => store.byUrlAndDigest("default", a.url, a.digest));
{
  const ms = [];
  for (let i = 0; i < LOOKUPS / 10; i++) {
    const s = pick();
    const t = performance.now();
    const r = store.byUrl("default", s.url, 50);
    ms.push(performance.now() - t);
    if (r.length === 0) throw new Error("byUrl: missed an existing URL");
  }
  say(`byUrl: ${fmt(LOOKUPS / 10)} lookups  ${showMs(percentiles(ms))}`);
}
store.close();
if (KEEP) say(`kept ${dbPath}`);

say(`${loadRate >= GOAL_LOAD ? "PASS" : "FAIL"} bulk load ${fmt(loadRate)} entries/s (goal >= ${fmt(GOAL_LOAD)}/s, ${fmt(ENTRIES)} entries)`);
say(`${byDigest.p99 < GOAL_P99_MS ? "PASS" : "FAIL"} byDigest p99 ${byDigest.p99.toFixed(4)} ms with ${fmt(ENTRIES)} entries (goal < ${GOAL_P99_MS} ms); byUrlAndDigest p99 ${byUrlAndDigest.p99.toFixed(4)} ms`);
process.exitCode = loadRate >= GOAL_LOAD && byDigest.p99 < GOAL_P99_MS ? 0 : 1;
