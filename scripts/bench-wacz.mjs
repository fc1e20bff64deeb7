#!/usr/bin/env node
// WACZ packaging benchmark (issue #23): `lathe wacz --collection` over a generated collection of
// gzipped WARC files of mixed sizes (default 2 GB on disk), beside `sha256sum` over the same files
// in the same run — hashing every byte is the work no packager can skip. Goals: packaging rate
// ≥ 0.6× the sha256sum rate, peak RSS of the `lathe wacz` process < 150 MB. Needs the build.
// The collection is laid out as lathe leaves one: each closed WARC with its sorted CDXJ beside it
// (made here, untimed, by `lathe index --cdxj`, standing in for the live index) and
// `lathe-cdx/files.tsv` naming its collection. The same files given as paths (`lathe wacz
// FILE...`: no index to trust, every record read again) are timed too, for information.
//
//   node scripts/bench-wacz.mjs [--mb 2000] [--mix browser|text] [--runs 1] [--keep] [--json]
//
// The collection: files of 40 %, 25 %, 15 %, 10 %, 5 %, 2.5 %, 1.5 % and 1 % of the total, each a
// series of captures (a response record and its request record, one gzip member each, as lathe
// writes them). `--mix browser` (default), by bytes on disk: ~60 % images and media (incompressible,
// 5 kB – 2 MB), ~25 % text sent content-encoded (gzip, as browsers receive most HTML/JS/CSS and
// lathe stores it: incompressible again), ~15 % identity text (HTML, JSON: compresses ~5×, so the
// most inflate work per stored byte). `--mix text`: identity text only, the indexer's worst case.
// Captures come from a pool of distinct records, reused across the files (their bytes are what
// costs; repeated record ids change nothing for the packager). The files are generated in a temp
// directory removed at the end unless --keep. Exit 0 on PASS, 1 on FAIL. Node built-ins only.
import { spawnSync } from "node:child_process";
import { createHash, randomBytes, randomUUID } from "node:crypto";
import { closeSync, existsSync, mkdirSync, mkdtempSync, openSync, rmSync, statSync, writeFileSync, writeSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { gzipSync } from "node:zlib";
import { rng, textBody } from "./bench-data.mjs";

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const BIN = path.join(repoRoot, "bin", "lathe.js");
const GOAL_RATIO = 0.6;
const GOAL_RSS_MB = 150;

function arg(name, dflt) {
  const i = process.argv.indexOf(`--${name}`);
  if (i < 0) return dflt;
  const v = process.argv[i + 1];
  return v === undefined || v.startsWith("--") ? true : v;
}
const totalMB = Number(arg("mb", 2000));
const mix = String(arg("mix", "browser"));
const runs = Math.max(1, Number(arg("runs", 1)) | 0);
const keep = arg("keep", false) === true;
const asJson = arg("json", false) === true;
if (mix !== "browser" && mix !== "text") throw new Error(`--mix must be browser or text, got ${mix}`);
const say = (s) => asJson || process.stdout.write(`${s}\n`);
if (!existsSync(path.join(repoRoot, "dist", "cli", "wacz.js"))) throw new Error("dist/ is missing: run `npm run build` first");

// ---------------------------------------------------------------------------------------------
// A pool of captures, each two gzip members (response, request).

function warcRecord(type, uri, date, id, extra, block) {
  const head = [`WARC/1.1`, `WARC-Type: ${type}`, `WARC-Record-ID: <urn:uuid:${id}>`, `WARC-Date: ${date}`, `WARC-Target-URI: ${uri}`, ...extra, `Content-Length: ${block.length}`, "", ""].join("\r\n");
  return Buffer.concat([Buffer.from(head), block, Buffer.from("\r\n\r\n")]);
}

/** One capture: [response member, request member]. `kind`: media | encoded | text. */
function capture(n, kind, size, r, random) {
  const ext = kind === "media" ? "jpg" : kind === "encoded" ? "js" : "html";
  const uri = `https://www${n % 7}.example.com/p/${n}/r${Math.floor(r() * 1e6)}.${ext}`;
  const date = new Date(Date.UTC(2026, 11, 3, 10, 0, 0) + n * 1000).toISOString().replace(/\.\d+Z$/, ".123456Z");
  let body;
  let headers;
  if (kind === "media") {
    const at = Math.floor(r() * (random.length - size));
    body = random.subarray(at, at + size);
    headers = "Content-Type: image/jpeg\r\n";
  } else if (kind === "encoded") {
    body = gzipSync(textBody(size * 4, r), { level: 6 }).subarray(0, size);
    headers = "Content-Type: application/javascript\r\nContent-Encoding: gzip\r\n";
  } else {
    body = textBody(size, r);
    headers = "Content-Type: text/html; charset=utf-8\r\n";
  }
  const http = Buffer.concat([Buffer.from(`HTTP/1.1 200 OK\r\nDate: Thu, 03 Dec 2026 10:00:00 GMT\r\n${headers}Content-Length: ${body.length}\r\n\r\n`), body]);
  const respId = randomUUID();
  const digest = "sha1:" + createHash("sha1").update(body).digest("hex").toUpperCase();
  const resp = warcRecord("response", uri, date, respId, ["Content-Type: application/http; msgtype=response", `WARC-Payload-Digest: ${digest}`], http);
  const reqHttp = Buffer.from(`GET ${new URL(uri).pathname} HTTP/1.1\r\nHost: ${new URL(uri).host}\r\nUser-Agent: bench\r\nSec-Fetch-Dest: ${kind === "text" ? "document" : "script"}\r\n\r\n`);
  const req = warcRecord("request", uri, date, randomUUID(), ["Content-Type: application/http; msgtype=request", `WARC-Concurrent-To: <urn:uuid:${respId}>`], reqHttp);
  // Incompressible bodies barely shrink: level 1 is what it costs lathe's reader the same.
  return [gzipSync(resp, { level: kind === "text" ? 6 : 1 }), gzipSync(req, { level: 6 })];
}

function buildPool() {
  const r = rng(7);
  const random = randomBytes(4 * 1024 * 1024);
  const pool = { media: [], encoded: [], text: [] };
  let n = 0;
  const logSize = (lo, hi) => Math.round(lo * Math.pow(hi / lo, r()));
  const kinds = mix === "text" ? ["text"] : ["media", "encoded", "text"];
  for (const kind of kinds) {
    for (let i = 0; i < 120; i++) {
      const size = kind === "media" ? logSize(5_000, 2_000_000) : logSize(2_000, 400_000);
      pool[kind].push(capture(n++, kind, size, r, random));
    }
  }
  return pool;
}

/** Share of the bytes on disk each kind gets. */
const SHARE = mix === "text" ? { text: 1 } : { media: 0.6, encoded: 0.25, text: 0.15 };
const FILE_SHARES = [0.4, 0.25, 0.15, 0.1, 0.05, 0.025, 0.015, 0.01];

function writeCollection(dir, pool) {
  const r = rng(11);
  const files = [];
  const done = { media: 0, encoded: 0, text: 0 };
  let total = 0;
  for (const [i, share] of FILE_SHARES.entries()) {
    const target = share * totalMB * 1e6;
    const file = path.join(dir, `bench-2026120310000${i}-0000${i}-bench.warc.gz`);
    const fd = openSync(file, "w");
    let size = 0;
    while (size < target) {
      // The kind furthest behind its share goes next, so the mix holds in every file.
      const kind = Object.keys(SHARE).sort((a, b) => done[a] / (SHARE[a] * (total + 1)) - done[b] / (SHARE[b] * (total + 1)))[0];
      const [resp, req] = pool[kind][Math.floor(r() * pool[kind].length)];
      writeSync(fd, resp);
      writeSync(fd, req);
      size += resp.length + req.length;
      done[kind] += resp.length + req.length;
      total += resp.length + req.length;
    }
    closeSync(fd);
    files.push(file);
  }
  return { files, total, done };
}

/** Each file's CDXJ beside it and `lathe-cdx/files.tsv`, as a lathe that wrote them leaves them. */
function layOutAsCollection(dir, files) {
  for (const f of files) {
    const r = spawnSync(process.execPath, [BIN, "index", "--cdxj", "-o", `${f}.cdxj`, f], { encoding: "utf8" });
    if (r.status !== 0) throw new Error(`lathe index ${f} failed: ${r.stderr}`);
  }
  mkdirSync(path.join(dir, "lathe-cdx"));
  writeFileSync(path.join(dir, "lathe-cdx", "files.tsv"), files.map((f) => `${path.basename(f)}\tdefault\n`).join(""));
}

// ---------------------------------------------------------------------------------------------

function timed(cmd, args) {
  const hasTime = existsSync("/usr/bin/time");
  const t0 = process.hrtime.bigint();
  const r = hasTime ? spawnSync("/usr/bin/time", ["-f", "%M", cmd, ...args], { encoding: "utf8", maxBuffer: 64 * 1024 * 1024 }) : spawnSync(cmd, args, { encoding: "utf8", maxBuffer: 64 * 1024 * 1024 });
  const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
  if (r.status !== 0) throw new Error(`${cmd} ${args.slice(0, 3).join(" ")}… failed (${r.status}): ${r.stderr}`);
  const rssKB = hasTime ? Number(r.stderr.trim().split("\n").pop()) : NaN;
  return { seconds, rssMB: rssKB / 1024, stdout: r.stdout };
}

const tmp = mkdtempSync(path.join(os.tmpdir(), "lathe-bench-wacz-"));
try {
  let t0 = Date.now();
  const pool = buildPool();
  const { files, total, done } = writeCollection(tmp, pool);
  const mb = total / 1e6;
  const shares = Object.entries(done).filter(([, v]) => v > 0).map(([k, v]) => `${k} ${((100 * v) / total).toFixed(0)}%`).join(", ");
  say(`collection: ${files.length} files, ${mb.toFixed(0)} MB (${files.map((f) => (statSync(f).size / 1e6).toFixed(0)).join(" + ")} MB), mix ${mix}: ${shares}; generated in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  t0 = Date.now();
  layOutAsCollection(tmp, files);
  say(`lathe's per-file CDXJ written beside them in ${((Date.now() - t0) / 1000).toFixed(1)} s (untimed)`);
  spawnSync("sh", ["-c", 'cat "$@" > /dev/null', "sh", ...files]); // the same warm page cache for both
  const out = path.join(tmp, "out", "bench.wacz");
  mkdirSync(path.dirname(out));
  const sums = [];
  const packs = [];
  const rereads = [];
  for (let i = 0; i < runs; i++) {
    sums.push(timed("sha256sum", files));
    packs.push(timed(process.execPath, [BIN, "wacz", "-o", out, "--collection", "default", "--dir", tmp]));
    rereads.push(timed(process.execPath, [BIN, "wacz", "-o", out, ...files]));
  }
  const best = (xs) => xs.reduce((a, b) => (b.seconds < a.seconds ? b : a));
  const sum = best(sums);
  const pack = best(packs);
  const reread = best(rereads);
  const peakRss = Math.max(...packs.map((p) => p.rssMB));
  const waczMB = statSync(out).size / 1e6;
  const sumRate = mb / sum.seconds;
  const packRate = mb / pack.seconds;
  const ratio = packRate / sumRate;
  say(`sha256sum:  ${sum.seconds.toFixed(2)} s  ${sumRate.toFixed(0)} MB/s${runs > 1 ? `  (runs ${sums.map((s) => s.seconds.toFixed(2)).join(", ")})` : ""}`);
  say(`lathe wacz: ${pack.seconds.toFixed(2)} s  ${packRate.toFixed(0)} MB/s  peak RSS ${peakRss.toFixed(0)} MB  → ${waczMB.toFixed(0)} MB WACZ${runs > 1 ? `  (runs ${packs.map((s) => s.seconds.toFixed(2)).join(", ")})` : ""}`);
  say(`            ${pack.stdout.trim().split("\n").slice(1).map((l) => l.trim()).join("; ")}`);
  say(`lathe wacz FILE... (every record read again): ${reread.seconds.toFixed(2)} s  ${(mb / reread.seconds).toFixed(0)} MB/s (${(mb / reread.seconds / sumRate).toFixed(2)}× sha256sum)  peak RSS ${reread.rssMB.toFixed(0)} MB  (information, not scored)`);
  const rateOk = ratio >= GOAL_RATIO;
  const rssOk = !(peakRss >= GOAL_RSS_MB);
  say(`rate: ${ratio.toFixed(2)}× sha256sum (goal ≥ ${GOAL_RATIO})  ${rateOk ? "PASS" : "FAIL"}`);
  say(`RSS:  ${Number.isNaN(peakRss) ? "not measured (no /usr/bin/time)" : `${peakRss.toFixed(0)} MB`} (goal < ${GOAL_RSS_MB} MB)  ${rssOk ? "PASS" : "FAIL"}`);
  if (asJson) process.stdout.write(JSON.stringify({ mb, files: files.length, mix, shares: done, sha256sum: { seconds: sum.seconds, mbps: sumRate }, wacz: { seconds: pack.seconds, mbps: packRate, peakRssMB: peakRss, bytes: statSync(out).size }, rereadAll: { seconds: reread.seconds, mbps: mb / reread.seconds, peakRssMB: reread.rssMB }, ratio, pass: rateOk && rssOk }) + "\n");
  process.exitCode = rateOk && rssOk ? 0 : 1;
} finally {
  if (keep) say(`kept ${tmp}`);
  else rmSync(tmp, { recursive: true, force: true });
}
