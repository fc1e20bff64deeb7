/**
 * `lathe record --headless` (issue "Standalone recording session"), the real command from dist/
 * with Debian's Chromium: a local multi-page HTTPS site with images, scripts, styles, fetch() and
 * a WebSocket is recorded with every subresource; each page gets a viewport screenshot (PNG) and
 * a thumbnail (JPEG, 640×360) linked to its response and indexed; the summary's numbers are what
 * the WARCs hold; nothing off loopback was recorded. A site with a self-signed certificate gives
 * lathe's error page and a non-zero exit, unless --accept-invalid-certs.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { execFile, spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { originCerts } from "../helpers/certs.js";
import { type Origin, WS_GREETING, startHttpsOrigin, startWsOrigin, type WsOrigin } from "../helpers/origin.js";
import { captureOf, checkDigests, readAllWarcs, type ReadRecord } from "../helpers/warcs.js";
import { readWarcRecords } from "../../src/warc/reader.js";
import { jpegSize, pngSize } from "../../src/record/screenshots.js";

const CHROMIUM = "/usr/bin/chromium";
const hasChromium = existsSync(CHROMIUM);
if (!hasChromium) console.warn(`record.test.ts skipped: ${CHROMIUM} does not exist (apt-get install -y chromium; npm test's pretest installs it)`);

const ROOT = new URL("../../", import.meta.url).pathname;
const BIN = join(ROOT, "bin/lathe.js");
const RUN_MS = 150_000;

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

function record(args: string[], cwd: string): Promise<Run> {
  return new Promise((resolve) => {
    execFile(process.execPath, [BIN, "record", ...args], { cwd, timeout: RUN_MS, maxBuffer: 16 * 1024 * 1024 }, (err, stdout, stderr) => {
      const code = err ? (typeof (err as { code?: unknown }).code === "number" ? ((err as { code: number }).code) : null) : 0;
      if (process.env.LATHE_TEST_LOG) console.log(`lathe record ${args.join(" ")} → ${code}\n${stdout}${stderr}`);
      resolve({ code, stdout, stderr });
    });
  });
}

/**
 * URLs lathe tried to fetch for hosts other than loopback, from its log lines (stderr): in this
 * sandbox such a fetch fails at DNS and so is never recorded, but it must not even be tried.
 */
function offLoopback(stderr: string): string[] {
  return [...stderr.matchAll(/\buri="?(https?:\/\/[^\s"]+)/g)].map((m) => m[1]!).filter((u) => new URL(u).hostname !== "127.0.0.1");
}

/** On-disk length of every record, by record id (lathe's reader knows the gzip member bounds). */
async function recordLengths(dir: string): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  for (const f of readdirSync(dir).filter((x) => /\.warc(\.gz)?$/.test(x))) {
    for await (const r of readWarcRecords(join(dir, f))) out.set(r.recordId!, r.length);
  }
  return out;
}

const subresources = (n: number) => Array.from({ length: n }, (_, i) => (i % 3 === 0 ? `/img/${i}.svg` : i % 3 === 1 ? `/js/${i}.js` : `/css/${i}.css`));

function summaryOf(stdout: string) {
  const num = (re: RegExp) => {
    const m = re.exec(stdout);
    if (!m) throw new Error(`summary line ${re} not in:\n${stdout}`);
    return m.slice(1).map(Number);
  };
  const [pages, recorded, failed] = num(/^ {2}pages: +(\d+) \((\d+) recorded, (\d+) failed\)$/m);
  const [captures, revisits, capFailed, skipped] = num(/^ {2}captures: +(\d+) \(revisits: (\d+), failed: (\d+), skipped: (\d+)\)$/m);
  const [screenshots] = num(/^ {2}screenshots: +(\d+) /m);
  const [captureBytes, shotBytes] = num(/^ {2}bytes: +(\d+) \(captures\) \+ (\d+) \(screenshots\)$/m);
  const after = stdout.slice(stdout.indexOf("\n  files:") + "\n  files:".length);
  const files = after.split("\n\n")[0]!.split("\n").map((l) => l.trim()).filter((l) => l && l !== "(none)");
  return { pages, recorded, failed, captures, revisits, capFailed, skipped, screenshots, captureBytes, shotBytes, files };
}

describe.skipIf(!hasChromium)(`lathe record --headless${hasChromium ? "" : ` (skipped: ${CHROMIUM} not installed)`}`, () => {
  const certs = originCerts();
  let site: WsOrigin; // HTTPS: /page/N, /wspage/<name>, WebSockets on /ws/*
  let bad: Origin; // HTTPS with a self-signed certificate
  let work: string;
  let cfg: string;

  beforeAll(async () => {
    if (!existsSync(join(ROOT, "dist/cli/record.js"))) throw new Error("dist/cli/record.js is missing: run `npm run build` first (npm test does)");
    site = await startWsOrigin(certs);
    bad = await startHttpsOrigin(certs.selfSigned);
    work = mkdtempSync(join(tmpdir(), "lathe-record-"));
    cfg = join(work, "lathe.config.json");
    // lathe trusts the test origin's CA (upstream.caFile); the browser trusts only lathe's CA.
    writeFileSync(cfg, JSON.stringify({ upstream: { caFile: certs.caFile }, certs: { dir: join(work, "certs") } }));
  });
  afterAll(async () => {
    await site?.close();
    await bad?.close();
  });

  it(
    "records a multi-page HTTPS site with subresources, fetch() and a WebSocket, with linked screenshots, and says so truthfully",
    async () => {
      const dir = join(work, "site");
      const pages = [3, 9, 12].map((n) => `${site.url}/page/${n}`);
      const wsPage = `${site.url}/wspage/rec`;
      const list = join(work, "urls.txt");
      writeFileSync(list, ["# the test site", ...pages.slice(0, 2), "", `${pages[2]}   # a trailing comment`, wsPage, ""].join("\n"));
      const run = await record(["--headless", "--urls", list, "--dir", dir, "--config", cfg, "--wait", "200"], work);
      expect(run.code, `${run.stdout}\n${run.stderr}`).toBe(0);
      expect(offLoopback(run.stderr), "Chromium's own traffic was refused before DNS").toEqual([]);
      for (const p of [...pages, wsPage]) expect(run.stdout).toMatch(new RegExp(`^ok +200 ${p.replace(/[.?*+()[\]\\/]/g, "\\$&")} `, "m"));

      expect(readdirSync(dir).some((f) => f.endsWith(".open")), "files closed").toBe(false);
      const records: ReadRecord[] = await readAllWarcs(dir);
      for (const r of records) expect(checkDigests(r)).toEqual([]);

      // Every page and every subresource, the fetch() and the WebSocket handshake.
      const byUri = (u: string) => records.filter((r) => r.get("WARC-Target-URI") === u && (r.type === "response" || r.type === "revisit"));
      for (const p of pages) {
        const { response } = captureOf(records, p);
        expect(response.httpHead!).toMatch(/^HTTP\/1\.1 200 /);
        for (const sub of subresources(Number(p.split("/").pop()))) expect(byUri(`${site.url}${sub}`).length, sub).toBeGreaterThanOrEqual(1);
      }
      expect(byUri(`${site.url}/text/100`).length, "the fetch() of every page").toBeGreaterThanOrEqual(1);
      captureOf(records, wsPage);
      const ws = captureOf(records, `${site.url}/ws/rec`);
      expect(ws.response.httpHead).toMatch(/^HTTP\/1\.1 101 /);
      expect(site.messages.map((m) => m.data.toString())).toContain("page says hi rec");
      expect(WS_GREETING).toBeTruthy();

      // A viewport screenshot and a thumbnail per page, linked to the page's response.
      const resources = records.filter((r) => r.type === "resource");
      expect(resources.length).toBe(2 * 4);
      for (const p of [...pages, wsPage]) {
        const page = captureOf(records, p).response;
        const pageId = page.get("WARC-Record-ID")!;
        for (const [variant, type] of [
          ["view", "image/png"],
          ["thumbnail", "image/jpeg"],
        ] as const) {
          const rs = resources.filter((r) => r.get("WARC-Target-URI") === `urn:${variant}:${p}`);
          expect(rs.length, `${variant} of ${p}`).toBe(1);
          const r = rs[0]!;
          expect(r.get("Content-Type")).toBe(type);
          expect(r.get("WARC-Concurrent-To")).toBe(pageId);
          expect(r.get("WARC-Date"), "one capture event, one date").toBe(page.get("WARC-Date"));
          expect(r.get("WARC-Payload-Digest")).toBe(r.get("WARC-Block-Digest"));
          const meta = JSON.parse(r.get("WARC-JSON-Metadata")!);
          expect(Object.keys(meta).slice(0, 4)).toEqual(["kind", "variant", "mode", "capturedAt"]);
          expect(meta).toMatchObject({
            kind: "screenshot",
            variant,
            mode: "parallel",
            browser: { name: "Chromium", version: expect.stringMatching(/^\d+\.\d+\.\d+\.\d+$/) },
            viewport: { width: 1280, height: 720, deviceScaleFactor: 1 },
            page: { url: p, recordId: pageId },
          });
          expect(meta.capturedAt).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/);
          if (variant === "view") expect(pngSize(r.block)).toEqual({ width: 1280, height: 720 });
          else expect(jpegSize(r.block)).toEqual({ width: 640, height: 360 });
        }
      }

      // Nothing off loopback: every HTTP record is for the test site, every resource for one of its pages.
      for (const r of records.filter((x) => x.type !== "warcinfo")) {
        const uri = r.get("WARC-Target-URI")!;
        const url = r.type === "resource" ? uri.replace(/^urn:(view|thumbnail):/, "") : uri;
        expect(new URL(url).hostname, uri).toBe("127.0.0.1");
      }

      // The summary is what the WARCs hold.
      const s = summaryOf(run.stdout);
      const lengths = await recordLengths(dir);
      const captures = records.filter((r) => r.type === "response" || r.type === "revisit");
      const captureRecords = records.filter((r) => r.type !== "warcinfo" && r.type !== "resource");
      const sum = (rs: ReadRecord[]) => rs.reduce((n, r) => n + lengths.get(r.get("WARC-Record-ID")!)!, 0);
      expect(s).toMatchObject({ pages: 4, recorded: 4, failed: 0, capFailed: 0, skipped: 0, screenshots: resources.length });
      expect(s.captures).toBe(captures.length);
      expect(s.revisits).toBe(records.filter((r) => r.type === "revisit").length);
      expect(s.captureBytes).toBe(sum(captureRecords));
      expect(s.shotBytes).toBe(sum(resources));
      const files = readdirSync(dir).filter((f) => /\.warc\.gz$/.test(f)).map((f) => join(dir, f)).sort();
      expect(s.files).toEqual(files);

      // How to index and replay, and the index has the screenshots.
      expect(run.stdout).toMatch(/^to index: +lathe index --cdxj /m);
      expect(run.stdout).toMatch(/wb-manager add default /);
      expect(run.stdout).toMatch(/ReplayWeb\.page/);
      const cdxj = await new Promise<string>((resolve, reject) =>
        execFile(process.execPath, [BIN, "index", "--cdxj", ...files], { maxBuffer: 16 * 1024 * 1024 }, (err, out) => (err ? reject(err) : resolve(out))),
      );
      // The live index beside each closed WARC is there when the session ends, and is what
      // `lathe index` gives for that file (replay can start at once).
      for (const f of files) {
        const rebuilt = await new Promise<string>((resolve, reject) =>
          execFile(process.execPath, [BIN, "index", "--cdxj", f], { maxBuffer: 16 * 1024 * 1024 }, (err, out) => (err ? reject(err) : resolve(out))),
        );
        expect(readFileSync(`${f}.cdxj`, "utf8"), `live index of ${f}`).toBe(rebuilt);
      }
      for (const p of [...pages, wsPage]) {
        for (const variant of ["view", "thumbnail"]) {
          const line = cdxj.split("\n").find((l) => l.includes(`"url": "urn:${variant}:${p}"`));
          expect(line, `CDXJ line of urn:${variant}:${p}`).toBeTruthy();
        }
      }
    },
    RUN_MS + 30_000,
  );

  it(
    "Ctrl-C stops after the page in progress, closes the files and exits 130 with the summary",
    async () => {
      const dir = join(work, "interrupted");
      const list = join(work, "many.txt");
      writeFileSync(list, Array.from({ length: 30 }, (_, i) => `${site.url}/page/${i + 1}`).join("\n"));
      const proc = spawn(process.execPath, [BIN, "record", "--headless", "--urls", list, "--dir", dir, "--config", cfg], { cwd: work, stdio: ["ignore", "pipe", "pipe"] });
      let stdout = "";
      let stderr = "";
      proc.stdout.on("data", (d) => (stdout += d));
      proc.stderr.on("data", (d) => (stderr += d));
      const exited = new Promise<number | null>((r) => proc.on("exit", (c) => r(c)));
      try {
        for (let i = 0; i < 600 && !/^ok /m.test(stdout); i++) await new Promise((r) => setTimeout(r, 50));
        expect(stdout).toMatch(/^ok /m);
        proc.kill("SIGINT");
        expect(await exited, `${stdout}\n${stderr}`).toBe(130);
      } finally {
        proc.kill("SIGKILL");
      }
      expect(stderr).toMatch(/SIGINT: finishing the captures in flight/);
      expect(stdout).toMatch(/^summary of session \S+ \(collection "default"\), interrupted$/m);
      const s = summaryOf(stdout);
      expect(s.pages).toBeLessThan(30);
      expect(readdirSync(dir).some((f) => f.endsWith(".open"))).toBe(false);
      const records = await readAllWarcs(dir);
      expect(s.captures).toBe(records.filter((r) => r.type === "response" || r.type === "revisit").length);
      expect(s.screenshots).toBe(records.filter((r) => r.type === "resource").length);
    },
    RUN_MS + 30_000,
  );

  it(
    "shows lathe's error page for a site whose certificate is invalid, records nothing of it, and exits non-zero",
    async () => {
      const dir = join(work, "bad");
      const url = `${bad.url}/page/3`;
      const run = await record(["--headless", url, "--dir", dir, "--config", cfg], work);
      expect(run.code, `${run.stdout}\n${run.stderr}`).toBe(1);
      expect(offLoopback(run.stderr)).toEqual([]);
      expect(run.stdout).toMatch(new RegExp(`^FAIL +502 ${url.replace(/[.?*+()[\]\\/]/g, "\\$&")} +lathe error page: "Certificate error: [A-Z_]+"`, "m"));
      expect(summaryOf(run.stdout)).toMatchObject({ pages: 1, recorded: 0, failed: 1, captures: 0, screenshots: 0 });
      const records = existsSync(dir) ? await readAllWarcs(dir) : [];
      expect(records.filter((r) => r.type !== "warcinfo").map((r) => r.get("WARC-Target-URI"))).toEqual([]);
    },
    RUN_MS + 30_000,
  );

  it(
    "records that site with --accept-invalid-certs",
    async () => {
      const dir = join(work, "accepted");
      const url = `${bad.url}/page/3`;
      const run = await record(["--headless", url, "--dir", dir, "--config", cfg, "--accept-invalid-certs", "--scroll"], work);
      expect(run.code, `${run.stdout}\n${run.stderr}`).toBe(0);
      expect(offLoopback(run.stderr)).toEqual([]);
      const records = await readAllWarcs(dir);
      const page = captureOf(records, url).response;
      for (const sub of subresources(3)) captureOf(records, `${bad.url}${sub}`);
      for (const variant of ["view", "thumbnail"]) {
        const r = records.find((x) => x.type === "resource" && x.get("WARC-Target-URI") === `urn:${variant}:${url}`);
        expect(r?.get("WARC-Concurrent-To"), variant).toBe(page.get("WARC-Record-ID"));
      }
    },
    RUN_MS + 30_000,
  );
});
