#!/usr/bin/env node
// Hybrid compression benchmark (issue #24): a realistic corpus made from real files on this
// machine, served by a local origin and crawled through lathe (a child process, `lathe serve`)
// in each `warc.compression` mode. Prints one table: bytes on disk, proxy CPU per MB (text part,
// media part), records per series, the time to read 1 MB from the middle of a 50 MB video
// record in `.warc` vs `.warc.gz`, `lathe index` MB/s over each series; then the small-size
// threshold measured (hybrid's bytes on disk against gzip's for several thresholds), and the
// cost of a stored-block member against zlib's level 0.
//
//   node scripts/bench-hybrid.mjs [--pages 20] [--runs 3] [--keep] [--json]
//
// Corpus proportions: the median desktop page of the HTTP Archive Web Almanac 2024, Page Weight
// chapter: images 1,054 KB, JavaScript 613 KB, fonts 131 KB, CSS 78 KB, HTML 18 KB; times
// `--pages`; plus JSON (20 KB a page), a few MB of H.264 MP4 and VP8 WebM video, PDFs and ZIPs;
// and one 50 MB MP4 for the range read. Images by bytes: JPEG 50%, PNG 25%, WebP 17%, GIF 3%,
// SVG 5%. Text is served without Content-Encoding (the compressible case).
//
// Real files: HTML from /usr/share/doc, JS/CSS/JSON from node_modules and /usr/share, PNG/GIF/SVG
// from /usr/share, JPEG and WebP made from photographs (`ffmpeg`, `cwebp`), WOFF/WOFF2
// wherever found on the machine, PDFs from /usr/share/doc, ZIPs made with `zip` from doc folders,
// video made with `ffmpeg` (libx264, libvpx). A kind whose tool is missing is left out, and said so.
// Debian packages used here: ffmpeg, webp (cwebp), mate-backgrounds and gnome-backgrounds (the
// photographs), fonts-font-awesome (WOFF/WOFF2).
// Exit 0 when the issue's goals hold, 1 otherwise. Needs the build (`npx tsc -p tsconfig.json`).
import { execFileSync, spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { createReadStream, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync, openSync, readSync, closeSync } from "node:fs";
import http from "node:http";
import os from "node:os";
import path from "node:path";
import { createGunzip } from "node:zlib";
import zlib from "node:zlib";
import { fileURLToPath, pathToFileURL } from "node:url";
import { freePort, sleep, startServer } from "./lib/servers.mjs";

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const dist = (p) => pathToFileURL(path.join(repoRoot, "dist", p)).href;
const arg = (name, dflt) => {
  const i = process.argv.indexOf(`--${name}`);
  if (i < 0) return dflt;
  const v = process.argv[i + 1];
  return v === undefined || v.startsWith("--") ? true : v;
};
const PAGES = Number(arg("pages", 20));
const RUNS = Math.max(1, Number(arg("runs", 3)) | 0);
const keep = arg("keep", false) === true;
const asJson = arg("json", false) === true;
const say = (s) => process.stdout.write(`${s}\n`);
const KB = 1024;
const MB = 1024 * 1024;
const has = (tool) => spawnSync("sh", ["-c", `command -v ${tool}`]).status === 0;

// ---------------------------------------------------------------------------------------------
// The corpus: real files, in page-weight proportions.

/** Files under `roots` whose name matches `re`, at most `max`, sorted by path (deterministic). */
function findFiles(roots, re, { min = 1, max = 5000 } = {}) {
  const out = [];
  const walk = (dir, depth) => {
    if (out.length >= max || depth > 12) return;
    let ents;
    try {
      ents = readdirSync(dir, { withFileTypes: true });
    } catch {
      return;
    }
    ents.sort((a, b) => (a.name < b.name ? -1 : 1));
    for (const e of ents) {
      if (out.length >= max) return;
      const p = path.join(dir, e.name);
      if (e.isDirectory()) walk(p, depth + 1);
      else if (e.isFile() && re.test(e.name)) {
        const size = statSync(p).size;
        if (size >= min) out.push({ file: p, size });
      }
    }
  };
  for (const r of roots) walk(r, 0);
  return out;
}

/** Spread picks over the candidates until `budget` bytes (every size class gets its turn). */
function pick(cands, budget) {
  const chosen = [];
  let total = 0;
  if (cands.length === 0) return chosen;
  const step = Math.max(1, Math.floor(cands.length / Math.max(1, Math.ceil(budget / (cands.reduce((n, c) => n + c.size, 0) / cands.length)))));
  for (let round = 0; total < budget && round < 50; round++) {
    for (let i = round % step; i < cands.length && total < budget; i += step) {
      chosen.push(cands[i]);
      total += cands[i].size;
    }
  }
  return chosen;
}

const NM = path.join(repoRoot, "node_modules");
const TYPES = {
  html: "text/html; charset=utf-8", css: "text/css", js: "text/javascript", json: "application/json", svg: "image/svg+xml",
  png: "image/png", jpg: "image/jpeg", webp: "image/webp", gif: "image/gif", woff2: "font/woff2", woff: "font/woff",
  mp4: "video/mp4", webm: "video/webm", pdf: "application/pdf", zip: "application/zip",
};

function buildCorpus(dir) {
  const notes = [];
  const items = []; // { url, file, type, size, part: "text" | "media" | "big" }
  const add = (list, ext, part) => {
    for (const c of list) items.push({ url: `/c/${items.length}/${path.basename(c.file).replace(/[^A-Za-z0-9._-]/g, "_")}`, file: c.file, type: TYPES[ext], size: c.size, part });
  };
  const p = PAGES * KB;
  add(pick(findFiles(["/usr/share/doc"], /\.html?$/, { min: 2 * KB }), 18 * p), "html", "text");
  add(pick(findFiles([NM, "/usr/share/javascript"], /\.js$/, { min: 2 * KB }), 613 * p), "js", "text");
  add(pick(findFiles([NM, "/usr/share"], /\.css$/, { min: 1 * KB }), 78 * p), "css", "text");
  add(pick(findFiles([NM], /\.json$/, { min: 2 * KB }), 20 * p), "json", "text");
  add(pick(findFiles(["/usr/share/icons", "/usr/share/doc", "/usr/share/pixmaps"], /\.svg$/, { min: 1 * KB }), 0.05 * 1054 * p), "svg", "media");
  add(pick(findFiles(["/usr/share"], /\.png$/, { min: 1 * KB }), 0.25 * 1054 * p), "png", "media");
  add(pick(findFiles(["/usr/share"], /\.gif$/, { min: 200 }), 0.03 * 1054 * p), "gif", "media");
  // JPEG and WebP from the larger PNGs (wallpapers, screenshots), at several widths.
  // Photographs (Debian's mate-backgrounds, gnome-backgrounds) re-encoded at web sizes; else large PNGs.
  const photos = findFiles(["/usr/share/backgrounds"], /\.(jpe?g|png)$/, { min: 100 * KB }).filter((f) => f.size < 4 * MB); // the largest only slow the decoding
  const sources = (photos.length ? photos : findFiles(["/usr/share/desktop-base", "/usr/share/doc"], /\.png$/, { min: 50 * KB })).slice(0, 24);
  const img = path.join(dir, "img");
  mkdirSync(img, { recursive: true });
  for (const [ext, tool, share] of [["jpg", "ffmpeg", 0.5], ["webp", "cwebp", 0.17]]) {
    if (!has(tool) || sources.length === 0) {
      notes.push(`no ${ext}: ${tool} missing or no source PNGs`);
      continue;
    }
    const made = [];
    let total = 0;
    for (let i = 0; total < share * 1054 * p && i < 400; i++) {
      const src = sources[i % sources.length].file;
      const width = [1280, 800, 1920, 480, 320][(i + Math.floor(i / sources.length)) % 5];
      const out = path.join(img, `${i}-${width}.${ext}`);
      // Quality varies as it does on the web (JPEG q 2–5 in ffmpeg's scale ≈ 75–90; WebP 70–85).
      if (ext === "jpg") execFileSync("ffmpeg", ["-v", "error", "-y", "-i", src, "-vf", `scale='min(${width},iw)':-2`, "-q:v", String(2 + (i % 4)), out]);
      else execFileSync("cwebp", ["-quiet", "-q", String(70 + (i % 4) * 5), "-resize", String(width), "0", src, "-o", out]);
      const size = statSync(out).size;
      made.push({ file: out, size });
      total += size;
    }
    add(made, ext, "media");
  }
  const fonts = findFiles(["/usr/share", NM, os.homedir()], /\.woff2?$/, { min: 5 * KB, max: 200 });
  add(pick(fonts.filter((f) => f.file.endsWith(".woff2")), 131 * p * 0.8), "woff2", "media");
  add(pick(fonts.filter((f) => f.file.endsWith(".woff")), 131 * p * 0.2), "woff", "media");
  add(findFiles(["/usr/share/doc"], /\.pdf$/, { min: 10 * KB, max: 10 }), "pdf", "media");
  if (has("zip")) {
    // ZIPs of documentation folders, 30 KB a page in all ("other" bytes of the page weight).
    const zips = [];
    const docs = readdirSync("/usr/share/doc").sort().filter((d) => existsSync(path.join("/usr/share/doc", d, "copyright")));
    let total = 0;
    for (let i = 0; total < 30 * p && i * 3 < docs.length; i++) {
      const out = path.join(dir, `docs-${i}.zip`);
      spawnSync("zip", ["-qr", out, ...docs.slice(i * 3, i * 3 + 3)], { cwd: "/usr/share/doc" });
      if (!existsSync(out)) continue;
      zips.push({ file: out, size: statSync(out).size });
      total += zips.at(-1).size;
    }
    add(zips, "zip", "media");
  } else notes.push("no ZIP: zip missing");
  if (has("ffmpeg")) {
    const vid = (out, args) => execFileSync("ffmpeg", ["-v", "error", "-y", ...args, out]);
    const src = ["-f", "lavfi", "-i", "testsrc2=size=1280x720:rate=25", "-vf", "noise=alls=12:allf=t"];
    vid(path.join(dir, "clip.mp4"), [...src, "-t", "6", "-c:v", "libx264", "-preset", "veryfast", "-b:v", "4M", "-pix_fmt", "yuv420p"]);
    vid(path.join(dir, "clip.webm"), [...src, "-t", "6", "-c:v", "libvpx", "-deadline", "realtime", "-cpu-used", "8", "-b:v", "3M"]);
    vid(path.join(dir, "big.mp4"), [...src, "-t", "50", "-c:v", "libx264", "-preset", "ultrafast", "-b:v", "8M", "-maxrate", "8M", "-bufsize", "8M", "-pix_fmt", "yuv420p"]);
    add([{ file: path.join(dir, "clip.mp4"), size: statSync(path.join(dir, "clip.mp4")).size }], "mp4", "media");
    add([{ file: path.join(dir, "clip.webm"), size: statSync(path.join(dir, "clip.webm")).size }], "webm", "media");
    add([{ file: path.join(dir, "big.mp4"), size: statSync(path.join(dir, "big.mp4")).size }], "mp4", "big");
  } else notes.push("no video: ffmpeg missing (no range-read row)");
  return { items, notes };
}

// ---------------------------------------------------------------------------------------------
// Origin and crawl.

function startOrigin(items) {
  const byUrl = new Map(items.map((i) => [i.url, i]));
  const server = http.createServer((req, res) => {
    const it = byUrl.get(req.url);
    if (!it) return void res.writeHead(404).end();
    res.writeHead(200, { "Content-Type": it.type, "Content-Length": it.size });
    createReadStream(it.file).pipe(res);
  });
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(server)));
}

function get(proxyPort, url) {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: "127.0.0.1", port: proxyPort, path: url, headers: { Host: new URL(url).host }, agent: false }, (res) => {
      let n = 0;
      res.on("data", (c) => (n += c.length));
      res.on("end", () => resolve({ status: res.statusCode, bytes: n }));
      res.on("error", reject);
    });
    req.on("error", reject);
    req.end();
  });
}

async function crawl(proxyPort, base, items, concurrency = 4) {
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < items.length) {
        const it = items[next++];
        const r = await get(proxyPort, base + it.url);
        if (r.status !== 200 || r.bytes !== it.size) throw new Error(`${it.url}: ${r.status}, ${r.bytes} of ${it.size} bytes`);
      }
    }),
  );
}

/** CPU seconds (user + system) of a process so far. */
function cpuSeconds(pid) {
  const f = readFileSync(`/proc/${pid}/stat`, "latin1");
  const fields = f.slice(f.lastIndexOf(")") + 2).split(" ");
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

async function capturesWritten(controlPort) {
  const text = await (await fetch(`http://127.0.0.1:${controlPort}/metrics`)).text();
  return Number(/^lathe_captures_total (\d+)/m.exec(text)?.[1] ?? 0);
}

async function waitForCaptures(controlPort, n) {
  for (let i = 0; i < 3000; i++) {
    if ((await capturesWritten(controlPort)) >= n) return;
    await sleep(20);
  }
  throw new Error(`lathe wrote fewer than ${n} captures in 60 s`);
}

/** One crawl of the corpus through a lathe in `compression` mode: bytes, CPU, the files. */
async function runMode(work, label, warc, corpus, base) {
  const dir = path.join(work, label);
  mkdirSync(dir, { recursive: true });
  const [port, controlPort] = [await freePort(), await freePort()];
  const config = path.join(dir, "config.json");
  writeFileSync(config, JSON.stringify({ warc: { idleRolloverMs: 0, ...warc }, log: { level: "warn" } }));
  const args = [path.join(repoRoot, "bin", "lathe.js"), "serve", "--config", config, "--port", String(port), "--control-port", String(controlPort), "--dir", path.join(dir, "warcs"), "--certs", path.join(work, "certs")];
  const server = await startServer("lathe", process.execPath, args, port, path.join(dir, "lathe.log"));
  const cpu = {};
  let captures = 0;
  try {
    for (const part of ["text", "media", "big"]) {
      const items = corpus.filter((i) => i.part === part);
      const before = cpuSeconds(server.pid);
      await crawl(port, base, items);
      captures += items.length;
      await waitForCaptures(controlPort, captures);
      cpu[part] = { seconds: cpuSeconds(server.pid) - before, mb: items.reduce((n, i) => n + i.size, 0) / MB };
    }
  } finally {
    await server.stop();
  }
  const files = readdirSync(path.join(dir, "warcs")).filter((f) => /\.warc(\.gz)?$/.test(f)).map((f) => path.join(dir, "warcs", f));
  return { label, warc, cpu, files };
}

// ---------------------------------------------------------------------------------------------
// Reading back.

async function seriesStats(files) {
  const { readWarcRecords } = await import(dist("warc/reader.js"));
  const out = { gz: { files: 0, bytes: 0, records: 0, captures: 0 }, plain: { files: 0, bytes: 0, records: 0, captures: 0 } };
  for (const f of files) {
    const s = out[f.endsWith(".gz") ? "gz" : "plain"];
    s.files++;
    s.bytes += statSync(f).size;
    for await (const r of readWarcRecords(f, { prefixBytes: 4096 })) {
      s.records++;
      if (["response", "revisit"].includes(r.get("warc-type"))) s.captures++;
    }
  }
  return out;
}

/** `lathe index` (the indexing pass it runs per file) over `files`: MB/s, best of RUNS. */
async function indexSpeed(files) {
  if (files.length === 0) return null;
  const { indexWarc } = await import(dist("index/cdxj.js"));
  const bytes = files.reduce((n, f) => n + statSync(f).size, 0);
  let best = Infinity;
  for (let r = 0; r < RUNS; r++) {
    const t0 = process.hrtime.bigint();
    for (const f of files) for await (const _ of indexWarc(f)) void _;
    best = Math.min(best, Number(process.hrtime.bigint() - t0) / 1e9);
  }
  return bytes / MB / best;
}

/** The CDXJ line of `url` in the files' indexes. */
function indexLine(files, url) {
  for (const f of files) {
    const p = `${f}.cdxj`;
    if (!existsSync(p)) continue;
    for (const l of readFileSync(p, "utf8").split("\n")) {
      if (!l) continue;
      const j = JSON.parse(l.slice(l.indexOf("{")));
      if (j.url === url && !j.mime?.includes("revisit")) return { file: f, offset: Number(j.offset), length: Number(j.length) };
    }
  }
  return null;
}

/** Where the payload starts in a serialized response record (after WARC header and HTTP head). */
function payloadStart(head) {
  const warcEnd = head.indexOf("\r\n\r\n") + 4;
  return head.indexOf("\r\n\r\n", warcEnd) + 4;
}

/** ms to read `len` bytes at payload offset `at` of the record: seek in `.warc`, inflate from the member start in `.warc.gz`. */
async function rangeRead(loc, at, len) {
  const t0 = process.hrtime.bigint();
  let got;
  if (!loc.file.endsWith(".gz")) {
    const fd = openSync(loc.file, "r");
    const head = Buffer.alloc(64 * KB);
    readSync(fd, head, 0, head.length, loc.offset);
    got = Buffer.alloc(len);
    readSync(fd, got, 0, len, loc.offset + payloadStart(head) + at);
    closeSync(fd);
  } else {
    const chunks = [];
    let seen = 0;
    let start = -1;
    let head = Buffer.alloc(0);
    const stream = createReadStream(loc.file, { start: loc.offset, end: loc.offset + loc.length - 1, highWaterMark: 256 * KB }).pipe(createGunzip());
    for await (const c of stream) {
      if (start < 0) {
        head = Buffer.concat([head, c]);
        const s = payloadStart(head);
        if (s < 4 || head.indexOf("\r\n\r\n") < 0) continue;
        start = s + at;
        seen = 0;
        const from = Math.max(0, start);
        if (head.length > from) chunks.push(head.subarray(from));
        seen = head.length;
      } else {
        const lo = Math.max(0, start - seen);
        if (lo < c.length) chunks.push(c.subarray(lo));
        seen += c.length;
      }
      if (seen >= start + len) break;
    }
    stream.destroy();
    got = Buffer.concat(chunks).subarray(0, len);
  }
  const ms = Number(process.hrtime.bigint() - t0) / 1e6;
  if (got.length !== len) throw new Error(`range read got ${got.length} bytes`);
  return { ms, got };
}

async function rangeReads(plainLoc, gzLoc, size) {
  const at = Math.floor(size / 2);
  const times = { plain: [], gz: [] };
  for (let r = 0; r < Math.max(5, RUNS); r++) {
    const a = await rangeRead(plainLoc, at, MB);
    const b = await rangeRead(gzLoc, at, MB);
    if (!a.got.equals(b.got)) throw new Error("the two range reads differ");
    times.plain.push(a.ms);
    times.gz.push(b.ms);
  }
  const median = (xs) => xs.sort((x, y) => x - y)[Math.floor(xs.length / 2)];
  return { plain: median(times.plain), gz: median(times.gz) };
}

// ---------------------------------------------------------------------------------------------
// The stored member against zlib's level 0, per MB.

async function storedCost(video) {
  const { storedMemberParts } = await import(dist("warc/storedMember.js"));
  // The video's bytes when there is one (incompressible, as media is), else random bytes.
  const data = video ? readFileSync(video).subarray(0, 8 * MB) : randomBytes(8 * MB);
  const time = (f) => {
    let best = Infinity;
    for (let r = 0; r < 5; r++) {
      const t0 = process.hrtime.bigint();
      for (let i = 0; i < data.length; i += MB) f(data.subarray(i, i + MB));
      best = Math.min(best, Number(process.hrtime.bigint() - t0) / 1e6 / (data.length / MB));
    }
    return best;
  };
  return {
    zlibLevel0: time((b) => zlib.gzipSync(b, { level: 0 })),
    stored: time((b) => storedMemberParts([b])),
    crc32: time((b) => zlib.crc32(b)),
  };
}

// ---------------------------------------------------------------------------------------------

async function main() {
  const work = mkdtempSync(path.join(os.tmpdir(), "lathe-bench-hybrid-"));
  try {
    say(`building the corpus (${PAGES} median pages) in ${work} ...`);
    const { items, notes } = buildCorpus(path.join(work, "corpus"));
    for (const n of notes) say(`  note: ${n}`);
    const byType = {};
    for (const i of items) byType[i.type.split(";")[0]] = (byType[i.type.split(";")[0]] ?? 0) + i.size;
    say(`  ${items.length} files, ${(items.reduce((n, i) => n + i.size, 0) / MB).toFixed(1)} MB: ${Object.entries(byType).map(([t, n]) => `${t} ${(n / MB).toFixed(1)}`).join(", ")}`);
    const origin = await startOrigin(items);
    const base = `http://127.0.0.1:${origin.address().port}`;
    const modes = [
      ["gzip", { compression: "gzip" }],
      ["none", { compression: "none" }],
      ["hybrid", { compression: "hybrid" }],
    ];
    const results = [];
    for (const [label, warc] of modes) {
      say(`crawling in ${label} mode ...`);
      const r = await runMode(work, label, warc, items, base);
      r.series = await seriesStats(r.files);
      r.index = {
        gz: await indexSpeed(r.files.filter((f) => f.endsWith(".gz"))),
        plain: await indexSpeed(r.files.filter((f) => !f.endsWith(".gz"))),
      };
      results.push(r);
    }
    // lathe index over the same captures as hybrid's .warc holds, in a .warc.gz: the media, gzip mode.
    say("crawling the media alone in gzip mode (for the index comparison) ...");
    const gzipMedia = await runMode(work, "gzip-media", { compression: "gzip" }, items.filter((i) => i.part !== "text"), base);
    const mediaIndexGz = await indexSpeed(gzipMedia.files);
    // The threshold: hybrid's bytes on disk against gzip's, for several thresholds.
    const thresholds = [];
    const gzipSmall = await runModeBytes(results[0], items);
    let bySize = null;
    for (const t of [0, 4 * KB, 16 * KB, 64 * KB, 256 * KB]) {
      say(`crawling in hybrid mode, threshold ${t} ...`);
      const r = await runMode(work, `hybrid-${t}`, { compression: "hybrid", hybridMinPayloadBytes: t }, items.filter((i) => i.part !== "big"), base);
      const s = await seriesStats(r.files);
      if (t === 0) bySize = costBySize(await captureBytes(r.files), await captureBytes(results[0].files), items, base);
      thresholds.push({ threshold: t, bytes: s.gz.bytes + s.plain.bytes, plainCaptures: s.plain.captures, vsGzip: (s.gz.bytes + s.plain.bytes) / gzipSmall - 1 });
    }
    origin.close();

    const big = items.find((i) => i.part === "big");
    let range = null;
    if (big) {
      const url = base + big.url;
      const plainLoc = indexLine(results[2].files, url);
      const gzLoc = indexLine(results[0].files, url);
      if (plainLoc && gzLoc && !plainLoc.file.endsWith(".gz")) range = await rangeReads(plainLoc, gzLoc, big.size);
    }
    const stored = await storedCost(big?.file);
    report(results, { thresholds, bySize }, range, stored, big, mediaIndexGz);
  } finally {
    if (!keep) rmSync(work, { recursive: true, force: true });
    else say(`kept ${work}`);
  }
}

/** Bytes on disk of each capture (its records, by target URI) and the series it is in. */
async function captureBytes(files) {
  const { readWarcRecords } = await import(dist("warc/reader.js"));
  const out = new Map();
  for (const f of files) {
    const plain = !f.endsWith(".gz");
    for await (const r of readWarcRecords(f, { prefixBytes: 4096 })) {
      const uri = r.get("warc-target-uri");
      if (!uri) continue;
      const c = out.get(uri) ?? { bytes: 0, plain };
      c.bytes += r.length + (plain ? 4 : 0); // a plain record's length leaves out its CRLF CRLF
      out.set(uri, c);
    }
  }
  return out;
}

/**
 * What storing a capture uncompressed costs against the gzip series, by payload size: the
 * captures hybrid (threshold 0) put in `.warc`, each against the same URL in gzip mode.
 */
function costBySize(hybridCaps, gzipCaps, items, base) {
  const buckets = [[0, 4 * KB], [4 * KB, 16 * KB], [16 * KB, 64 * KB], [64 * KB, 256 * KB], [256 * KB, Infinity]];
  const types = [...new Set(items.map((i) => i.type))];
  return [...buckets.map(([lo, hi]) => ({ label: `${lo / KB}–${hi === Infinity ? "" : hi / KB} KiB`, test: (it) => it.size >= lo && it.size < hi })), ...types.map((t) => ({ label: t, test: (it) => it.type === t }))].map(({ label, test }) => {
    let n = 0;
    let extra = 0;
    let payload = 0;
    for (const it of items) {
      if (!test(it)) continue;
      const h = hybridCaps.get(base + it.url);
      const g = gzipCaps.get(base + it.url);
      if (!h?.plain || !g) continue;
      n++;
      extra += h.bytes - g.bytes;
      payload += it.size;
    }
    return { label, captures: n, extraPerCapture: n ? extra / n : 0, extraOfPayload: payload ? extra / payload : 0 };
  }).filter((b) => b.captures > 0);
}

/** gzip mode's bytes for the corpus without the big video: its files minus the video's member. */
async function runModeBytes(gzipRun, items) {
  const big = items.find((i) => i.part === "big");
  const total = gzipRun.series.gz.bytes;
  if (!big) return total;
  const { readWarcRecords } = await import(dist("warc/reader.js"));
  let bigBytes = 0;
  for (const f of gzipRun.files) {
    for await (const r of readWarcRecords(f, { prefixBytes: 4096 })) if ((r.get("warc-target-uri") ?? "").endsWith(big.url)) bigBytes += r.length;
  }
  return total - bigBytes;
}

function report(results, { thresholds, bySize }, range, stored, big, mediaIndexGz) {
  const f1 = (x) => (x === null || x === undefined ? "—" : x.toFixed(1));
  const ms = (x) => (x.cpu.media.seconds * 1000) / x.cpu.media.mb;
  const rows = results.map((r) => ({
    mode: r.label,
    bytes: r.series.gz.bytes + r.series.plain.bytes,
    cpuTextMsPerMB: (r.cpu.text.seconds * 1000) / r.cpu.text.mb,
    cpuMediaMsPerMB: ms(r),
    cpuBigMsPerMB: (r.cpu.big?.seconds ?? 0) * 1000 / (r.cpu.big?.mb || 1),
    records: `${r.series.gz.records} gz / ${r.series.plain.records} plain`,
    indexGz: r.index.gz,
    indexPlain: r.index.plain,
  }));
  const gzipBytes = rows[0].bytes;
  if (asJson) {
    say(JSON.stringify({ rows, thresholds, bySize, range, stored, mediaIndexGz }, null, 2));
  } else {
    say("");
    say("| mode | bytes on disk | vs gzip | proxy CPU ms/MB text | media | 50 MB video | records (.warc.gz / .warc) | `lathe index` MB/s .warc.gz | .warc |");
    say("| --- | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: |");
    for (const r of rows) say(`| ${r.mode} | ${(r.bytes / MB).toFixed(2)} MB | ${(((r.bytes / gzipBytes) - 1) * 100).toFixed(2)}% | ${f1(r.cpuTextMsPerMB)} | ${f1(r.cpuMediaMsPerMB)} | ${f1(r.cpuBigMsPerMB)} | ${r.records} | ${f1(r.indexGz)} | ${f1(r.indexPlain)} |`);
    say(`\n\`lathe index\` of the media captures (those hybrid puts in .warc) in a .warc.gz (gzip mode): ${f1(mediaIndexGz)} MB/s; in hybrid's .warc: ${f1(rows[2].indexPlain)} MB/s`);
    if (range) say(`\n1 MB range read from the middle of the ${(big.size / MB).toFixed(0)} MB video record: .warc ${range.plain.toFixed(2)} ms, .warc.gz ${range.gz.toFixed(2)} ms (${(range.gz / range.plain).toFixed(0)}×)`);
    say("\nsmall-size threshold (hybrid, corpus without the 50 MB video): bytes on disk vs gzip mode");
    say("| threshold | bytes | vs gzip | captures to .warc |");
    say("| ---: | ---: | ---: | ---: |");
    for (const t of thresholds) say(`| ${t.threshold / KB} KiB | ${(t.bytes / MB).toFixed(2)} MB | ${(t.vsGzip * 100).toFixed(2)}% | ${t.plainCaptures} |`);
    say("\nwhat a capture costs in .warc against .warc.gz, by payload size (hybrid with no threshold vs gzip mode)");
    say("| payload size or type | captures | extra bytes per capture | extra / payload |");
    say("| --- | ---: | ---: | ---: |");
    for (const b of bySize) say(`| ${b.label} | ${b.captures} | ${Math.round(b.extraPerCapture)} | ${(b.extraOfPayload * 100).toFixed(2)}% |`);
    say(`\nper MB of incompressible payload: zlib gzip level 0 ${stored.zlibLevel0.toFixed(2)} ms, hand-made stored member ${stored.stored.toFixed(2)} ms (CRC-32 alone ${stored.crc32.toFixed(2)} ms)`);
  }
  // Goals (issue #24).
  const hybrid = rows.find((r) => r.mode === "hybrid");
  const gz = rows[0];
  const checks = [
    ["hybrid within 2% of gzip's bytes", hybrid.bytes <= gz.bytes * 1.02],
    ["hybrid media CPU/MB no higher than gzip's (10% margin for noise)", hybrid.cpuMediaMsPerMB <= gz.cpuMediaMsPerMB * 1.1],
    ["range read ≥ 10× faster from .warc", range === null || range.gz >= 10 * range.plain],
    ["lathe index of .warc ≥ 3× faster per MB than of the same captures in .warc.gz", hybrid.indexPlain !== null && hybrid.indexPlain >= 3 * mediaIndexGz],
  ];
  say("");
  for (const [what, ok] of checks) say(`${ok ? "PASS" : "FAIL"} ${what}`);
  process.exitCode = checks.every(([, ok]) => ok) ? 0 : 1;
}

await main();
