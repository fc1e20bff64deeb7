#!/usr/bin/env node
// WARC reader benchmark (issue "Deduplication", decisions.md §8 "Reader bar"): on a gzipped WARC
// of at least 100 MB of captures, reading every record and producing its index line (digest from
// the header, status from the HTTP head, offset, length) must reach ≥ 0.7× the throughput of
// `zcat FILE > /dev/null` on the same file. Needs the build (`npx tsc -p tsconfig.json`).
//
//   node scripts/bench-reader.mjs [--file F.warc.gz] [--mb 100] [--mix varied|bench] [--runs 3] [--keep] [--json]
//
// Without --file it writes one with lathe's own writer (dist/warc/writer.js): request + response
// pairs, gzip level 6, one member per record. `--mix varied` (default): bodies of 1 KB – 1 MB
// (log-uniform), a third each HTML-like text, JSON, random bytes. `--mix bench`: what the
// proxybench rows fetch, small records dominating (the per-record worst case): 10 kB random
// (`/bytes`), 8 kB (`/same`, `/unique`), 2–200 kB text assets and 404s. The file is written
// in a temp directory removed at the end unless --keep is given. Exit 0 on
// PASS, 1 on FAIL. Node built-ins only (plus the build).
import { spawnSync } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { existsSync, mkdtempSync, readdirSync, rmSync, statSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { Readable } from "node:stream";
import { fileURLToPath, pathToFileURL } from "node:url";
import { rng, textBody, WORDS } from "./bench-data.mjs";

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const dist = (p) => pathToFileURL(path.join(repoRoot, "dist", p)).href;
const BAR = 0.7;

function arg(name, dflt) {
  const i = process.argv.indexOf(`--${name}`);
  if (i < 0) return dflt;
  const v = process.argv[i + 1];
  return v === undefined || v.startsWith("--") ? true : v;
}
const file0 = arg("file", null);
const targetMB = Number(arg("mb", 100));
const runs = Math.max(1, Number(arg("runs", 3)) | 0);
const keep = arg("keep", false) === true;
const asJson = arg("json", false) === true;
const mix = String(arg("mix", "varied"));
if (mix !== "varied" && mix !== "bench") throw new Error(`--mix must be varied or bench, got ${mix}`);
const say = (s) => process.stdout.write(`${s}\n`);

// ---------------------------------------------------------------------------------------------
// A realistic capture file.

function jsonBody(n, r) {
  const items = [];
  let len = 2;
  while (len < n) {
    const s = JSON.stringify({ id: Math.floor(r() * 1e9), name: WORDS[Math.floor(r() * WORDS.length)], score: r(), tags: [WORDS[Math.floor(r() * WORDS.length)]] });
    items.push(s);
    len += s.length + 1;
  }
  return Buffer.from(`[${items.join(",")}]`).subarray(0, n);
}

async function makeFile(dir, mb) {
  const { createWarcWriter } = await import(dist("warc/writer.js"));
  const { buildRequest, buildResponse } = await import(dist("warc/records.js"));
  const { digestOf } = await import(dist("warc/digest.js"));
  const { recordId, randomIds } = await import(dist("core/ids.js"));
  const { silentLogger } = await import(dist("core/log.js"));
  const { systemClock } = await import(dist("core/clock.js"));
  const w = createWarcWriter({
    dir,
    prefix: "bench",
    gzip: true,
    gzipLevel: 6,
    version: "1.1",
    digest: "sha1",
    maxFileBytes: 64 * 1024 * 1024 * 1024,
    idleRolloverMs: 0,
    durability: "rollover",
    warcinfo: { operator: "bench", description: "reader benchmark", isPartOf: "bench", robots: "ignore", httpHeaderUserAgent: "bench/1.0", httpHeaderFrom: "bench@example.org", extra: {} },
    software: "lathe/bench",
    hostname: "bench.example.org",
    ip: "192.0.2.1",
    clock: systemClock,
    ids: randomIds,
    log: silentLogger,
  });
  const r = rng(42);
  const random = randomBytes(1024 * 1024);
  const target = mb * 1e6;
  let n = 0;
  const pending = [];
  while (w.state().bytesWritten < target) {
    let size;
    let kind;
    let status = "200 OK";
    if (mix === "varied") {
      // Log-uniform body size, 1 KB .. 1 MB; a third each text, JSON, random (images, video, zip).
      size = Math.round(1000 * Math.pow(1000, r()));
      kind = r();
    } else {
      const k = r();
      if (k < 0.55) [size, kind] = [10_000, 0.9];
      else if (k < 0.7) [size, kind] = [8_000, 0.9];
      else if (k < 0.95) [size, kind] = [Math.round(2000 * Math.pow(100, r())), 0.1];
      else [size, kind, status] = [150, 0.1, "404 Not Found"];
    }
    const at = Math.floor(r() * 1000);
    const body = kind < 0.34 ? textBody(size, r) : kind < 0.67 ? jsonBody(size + 64, r).subarray(0, size) : random.subarray(at, at + size);
    const ctype = kind < 0.34 ? "text/html; charset=utf-8" : kind < 0.67 ? "application/json" : "image/jpeg";
    const url = `https://www${n % 7}.example.com/path/${n}/resource-${Math.floor(r() * 1e6)}.${kind < 0.34 ? "html" : kind < 0.67 ? "json" : "jpg"}?q=${n}`;
    const head = Buffer.from(
      `HTTP/1.1 ${status}\r\nDate: Mon, 01 Jun 2026 12:00:00 GMT\r\nServer: nginx/1.25.3\r\nContent-Type: ${ctype}\r\nContent-Length: ${size}\r\n` +
        `ETag: "${createHash("md5").update(String(n)).digest("hex")}"\r\nLast-Modified: Sun, 31 May 2026 08:00:00 GMT\r\nCache-Control: max-age=3600\r\nConnection: keep-alive\r\n\r\n`,
    );
    const reqHead = Buffer.from(`GET ${new URL(url).pathname}?q=${n} HTTP/1.1\r\nHost: ${new URL(url).host}\r\nUser-Agent: Mozilla/5.0 (X11; Linux x86_64) bench/1.0\r\nAccept: */*\r\nAccept-Encoding: identity\r\n\r\n`);
    const src = { size, createReadStream: () => Readable.from([body]) };
    const meta = { dateMicros: systemClock.nowMicros(), targetUri: url, ip: "192.0.2.10", protocols: ["http/1.1", "tls/1.3"], cipherSuite: "TLS_AES_128_GCM_SHA256" };
    const respId = recordId(randomIds.uuid());
    const resp = buildResponse(respId, meta, { head, body: src, blockDigest: digestOf("sha1", head, body), payloadDigest: digestOf("sha1", body), truncated: null }, "1.1");
    const req = buildRequest(recordId(randomIds.uuid()), respId, meta, { head: reqHead, body: null, blockDigest: digestOf("sha1", reqHead), payloadDigest: null }, "1.1");
    pending.push(w.write([resp, req]));
    if (pending.length >= 8) await Promise.all(pending.splice(0));
    n++;
  }
  await Promise.all(pending);
  await w.close();
  const name = readdirSync(dir).find((f) => f.endsWith(".warc.gz"));
  return { file: path.join(dir, name), captures: n };
}

// ---------------------------------------------------------------------------------------------
// Timing.

function zcatSeconds(file) {
  const t0 = process.hrtime.bigint();
  const r = spawnSync("sh", ["-c", `zcat "$1" > /dev/null`, "sh", file], { stdio: ["ignore", "ignore", "inherit"] });
  const t = Number(process.hrtime.bigint() - t0) / 1e9;
  if (r.status !== 0) throw new Error(`zcat failed (status ${r.status})`);
  return t;
}

async function readerSeconds(file) {
  const { readWarcRecords } = await import(dist("warc/reader.js"));
  const t0 = process.hrtime.bigint();
  const reader = readWarcRecords(file);
  let records = 0;
  let lines = 0;
  let bytes = 0;
  for await (const rec of reader) {
    records++;
    const t = rec.warcType;
    if (t !== "response" && t !== "revisit" && t !== "resource" && t !== "request") continue;
    const http = rec.httpHead();
    const line = JSON.stringify({
      url: rec.targetUri,
      timestamp: (rec.date ?? "").replace(/\D/g, "").slice(0, 14),
      mime: http?.get("content-type") ?? rec.get("content-type"),
      status: http?.status ?? null,
      digest: rec.get("WARC-Payload-Digest"),
      length: rec.length,
      offset: rec.offset,
    });
    bytes += line.length;
    lines++;
  }
  const t = Number(process.hrtime.bigint() - t0) / 1e9;
  return { t, records, lines, bytes, errors: reader.errors.length };
}

// ---------------------------------------------------------------------------------------------

let tmp = null;
let file = file0;
let captures = null;
if (!file) {
  tmp = mkdtempSync(path.join(os.tmpdir(), "lathe-bench-reader-"));
  const t0 = Date.now();
  const made = await makeFile(tmp, targetMB);
  file = made.file;
  captures = made.captures;
  if (!asJson) say(`wrote ${file} (${(statSync(file).size / 1e6).toFixed(1)} MB, ${captures} captures, mix ${mix}) in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
}
if (!existsSync(file)) throw new Error(`no such file: ${file}`);
const size = statSync(file).size;
const inflated = Number(spawnSync("sh", ["-c", `zcat "$1" | wc -c`, "sh", file], { encoding: "utf8" }).stdout.trim());
if (size < 100e6 && !asJson) say(`note: the file is ${(size / 1e6).toFixed(1)} MB; the bar is defined on ≥ 100 MB`);

// Warm the page cache, then alternate so neither side gets a warmer cache.
zcatSeconds(file);
const zc = [];
const rd = [];
let info = null;
for (let i = 0; i < runs; i++) {
  zc.push(zcatSeconds(file));
  const r = await readerSeconds(file);
  rd.push(r.t);
  info = r;
}
const zBest = Math.min(...zc);
const rBest = Math.min(...rd);
const ratio = zBest / rBest;
const pass = ratio >= BAR;
const result = {
  file,
  mix: file0 ? null : mix,
  bytes: size,
  inflatedBytes: inflated,
  records: info.records,
  indexLines: info.lines,
  errors: info.errors,
  zcatSeconds: zc,
  readerSeconds: rd,
  zcatMBps: size / zBest / 1e6,
  readerMBps: size / rBest / 1e6,
  ratio,
  bar: BAR,
  pass,
};
if (asJson) say(JSON.stringify(result));
else {
  say(`file: ${(size / 1e6).toFixed(1)} MB gzip, ${(inflated / 1e6).toFixed(1)} MB inflated, ${info.records} records, ${info.lines} index lines, ${info.errors} errors`);
  say(`zcat > /dev/null: best ${zBest.toFixed(3)} s (${result.zcatMBps.toFixed(0)} MB/s compressed)  runs ${zc.map((t) => t.toFixed(3)).join(" ")}`);
  say(`reader + index:   best ${rBest.toFixed(3)} s (${result.readerMBps.toFixed(0)} MB/s compressed)  runs ${rd.map((t) => t.toFixed(3)).join(" ")}`);
  say(`ratio (zcat time / reader time): ${ratio.toFixed(2)}  bar ≥ ${BAR}  ${pass ? "PASS" : "FAIL"}`);
}
if (tmp && !keep) rmSync(tmp, { recursive: true, force: true });
else if (tmp && !asJson) say(`kept ${file}`);
process.exitCode = pass ? 0 : 1;
