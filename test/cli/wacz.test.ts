/**
 * `lathe wacz` (src/cli/wacz.ts) through bin/lathe.js and in process: named WARC files, a
 * collection and a closed session of a WARC directory a real lathe wrote; refusals with a
 * message and exit 1 (a session still open, unknown names, a non-WARC file, a truncated WARC, an
 * `.open` file, an output in a missing directory) leaving nothing behind and an existing output
 * untouched; usage errors exit 2; the progress line on a terminal. And `lathe record --headless
 * --wacz` with Chromium: the WACZ lists exactly the visited pages, with their titles.
 */
import { execFile } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, statSync, truncateSync, writeFileSync } from "node:fs";
import { rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { waczCommand } from "../../src/cli/wacz.js";
import { originCerts } from "../helpers/certs.js";
import { viaProxy } from "../helpers/client.js";
import { startTestLathe, type TestLathe } from "../helpers/lathe.js";
import { startHttpOrigin, startWsOrigin, type Origin, type WsOrigin } from "../helpers/origin.js";
import { checkWacz } from "../helpers/wacz.js";
import { warcFiles } from "../helpers/warcs.js";

const ROOT = new URL("../../", import.meta.url).pathname;
const BIN = join(ROOT, "bin/lathe.js");
const CHROMIUM = "/usr/bin/chromium";

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

function runLathe(args: string[], cwd: string, timeout = 60_000): Promise<Run> {
  return new Promise((resolve) => {
    execFile(process.execPath, [BIN, ...args], { cwd, timeout, maxBuffer: 16 * 1024 * 1024 }, (err, stdout, stderr) => {
      const code = err ? (typeof (err as { code?: unknown }).code === "number" ? (err as { code: number }).code : null) : 0;
      resolve({ code, stdout, stderr });
    });
  });
}

async function inProcess(args: string[], tty = false) {
  let out = "";
  let err = "";
  const code = await waczCommand(args, (s) => (out += s), { err: (s) => (err += s), isTTY: tty, columns: 120 });
  return { code, out, err };
}

let lathe: TestLathe;
let origin: Origin;
let work = "";
let dir = "";
let closedSession = "";
let openSession = "";
const sitePages: string[] = [];
const sessionPages: string[] = [];

const navigate = (proxy: string, url: string, extra: Record<string, string> = {}) =>
  viaProxy(proxy, url, { headers: { Host: new URL(url).host, "Sec-Fetch-Dest": "document", "Sec-Fetch-Mode": "navigate", ...extra } });

beforeAll(async () => {
  if (!existsSync(join(ROOT, "dist/cli/wacz.js"))) throw new Error("dist/cli/wacz.js is missing: run `npx tsc -p tsconfig.json` first (npm test does)");
  work = mkdtempSync(join(tmpdir(), "lathe-wacz-cli-"));
  origin = await startHttpOrigin();
  lathe = await startTestLathe();
  dir = lathe.dir;
  lathe.facade.createCollection({ name: "site" });
  for (const n of [1, 2]) {
    sitePages.push(`${origin.url}/text/${300 + n}?site=${n}`);
    expect((await navigate(lathe.proxyUrl, sitePages.at(-1)!, { "Warcprox-Meta": JSON.stringify({ lathe: { collection: "site" } }) })).status).toBe(200);
  }
  const a = await lathe.facade.openSession({});
  closedSession = a.id;
  sessionPages.push(`${origin.url}/text/400?session=a`);
  expect((await navigate(a.proxyUrl, sessionPages[0]!)).status).toBe(200);
  await lathe.facade.closeSession(a.id);
  const b = await lathe.facade.openSession({});
  openSession = b.id;
  expect((await navigate(b.proxyUrl, `${origin.url}/text/401?session=b`)).status).toBe(200);
  // lathe stops with session b never closed: its files were never written down.
  await lathe.stop();
});

afterAll(async () => {
  await lathe?.stop().catch(() => {});
  await origin?.close();
  await rm(work, { recursive: true, force: true });
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe("lathe wacz", () => {
  it("packages named WARC files, a collection and a closed session of lathe's WARC directory", async () => {
    const files = warcFiles(dir);
    const named = await runLathe(["wacz", "-o", "files.wacz", ...files], work);
    expect(named.code, named.stderr).toBe(0);
    expect(named.stdout).toMatch(new RegExp(`^wrote ${join(work, "files.wacz")} \\(`));
    expect(named.stdout).toMatch(new RegExp(`^ {2}WARC files: +${files.length}$`, "m"));
    const all = await checkWacz(join(work, "files.wacz"));
    expect(all.problems).toEqual([]);
    expect(all.wacz.datapackage.title).toBe(files[0]!.split("/").pop());

    const coll = await runLathe(["wacz", "--output", "site.wacz", "--collection", "site", "--dir", dir, "--title", "The site ✓"], work);
    expect(coll.code, coll.stderr).toBe(0);
    expect(coll.stdout).toMatch(/^ {2}pages: +2 \(top-level navigations/m);
    const site = await checkWacz(join(work, "site.wacz"));
    expect(site.problems).toEqual([]);
    expect(site.wacz.pages.map((p) => p.url)).toEqual(sitePages);
    expect(site.wacz.datapackage.title).toBe("The site ✓");

    const sess = await runLathe(["wacz", "-o", "session.wacz", "--session", closedSession, "--dir", dir], work);
    expect(sess.code, sess.stderr).toBe(0);
    const s = await checkWacz(join(work, "session.wacz"));
    expect(s.problems).toEqual([]);
    expect(s.wacz.pages.map((p) => p.url)).toEqual(sessionPages);
  });

  it("refuses with a message and exit 1, writes nothing, and leaves an existing output as it was", async () => {
    const out = join(work, "refused");
    await rm(out, { recursive: true, force: true });
    mkdirSync(out);
    writeFileSync(join(out, "old.wacz"), "the previous package");
    const good = warcFiles(dir)[0]!;
    writeFileSync(join(out, "notes.warc.gz"), "these are notes, not a WARC\n");
    writeFileSync(join(out, "page.html"), "<html></html>\n");
    copyFileSync(good, join(out, "cut.warc.gz"));
    truncateSync(join(out, "cut.warc.gz"), Math.floor(statSync(good).size * 0.6));
    copyFileSync(good, join(out, "busy.warc.gz.open"));
    const cases: Array<[string[], RegExp]> = [
      [["--session", openSession, "--dir", dir], new RegExp(`session ${openSession} is still open .*close it first`)],
      [["--session", "s-nope", "--dir", dir], /no session "s-nope" in /],
      [["--collection", "nope", "--dir", dir], /no collection "nope" in .*\(collections: default, site\)/],
      [["--collection", "site", "--dir", join(work, "no-such-dir")], /no WARC directory .*no-such-dir/],
      [[join(out, "notes.warc.gz")], /notes\.warc\.gz is not a WARC file: it does not start with a gzip member/],
      [[join(out, "page.html")], /page\.html is not a WARC file: its name must end in \.warc\.gz or \.warc/],
      [[good, join(out, "cut.warc.gz")], /not packaged: a WARC file is damaged or is not a WARC \(.*cut\.warc\.gz at offset \d+: truncated/],
      [[join(out, "busy.warc.gz.open")], /busy\.warc\.gz\.open is still being written \(\.open\)/],
      [[join(out, "missing.warc.gz")], /cannot read .*missing\.warc\.gz: ENOENT/],
    ];
    for (const [args, message] of cases) {
      const r = await runLathe(["wacz", "-o", join(out, "old.wacz"), ...args], work);
      expect(r.code, `${args.join(" ")}: ${r.stderr}`).toBe(1);
      expect(r.stderr).toMatch(/^lathe wacz: /);
      expect(r.stderr, args.join(" ")).toMatch(message);
      expect(r.stdout).toBe("");
      expect(readFileSync(join(out, "old.wacz"), "utf8")).toBe("the previous package");
      expect(readdirSync(out).sort()).toEqual(["busy.warc.gz.open", "cut.warc.gz", "notes.warc.gz", "old.wacz", "page.html"]);
    }
    const missingDir = await runLathe(["wacz", "-o", join(work, "nowhere", "x.wacz"), good], work);
    expect(missingDir.code).toBe(1);
    expect(missingDir.stderr).toMatch(/cannot write .*nowhere\/x\.wacz: the directory .*nowhere does not exist/);
    expect(existsSync(join(work, "nowhere"))).toBe(false);
  }, 120_000);

  it("usage errors exit 2 with the help", async () => {
    for (const args of [[], ["-o", "x.zip", "a.warc.gz"], ["-o", "x.wacz"], ["-o", "x.wacz", "--collection", "a", "f.warc.gz"], ["-o", "x.wacz", "--dir", "d", "f.warc.gz"], ["-o", "x.wacz", "--bogus"]]) {
      const r = await inProcess(args);
      expect(r.code, args.join(" ")).toBe(2);
      expect(r.err).toContain("lathe wacz --output FILE.wacz");
    }
    expect((await inProcess(["--help"])).code).toBe(0);
  });

  it("draws a progress line on a terminal, and clears it", async () => {
    const r = await inProcess(["-o", join(work, "tty.wacz"), ...warcFiles(dir)], true);
    expect(r.code).toBe(0);
    expect(r.err).toMatch(/\rpackaging \[#*-*\] +\d+%/);
    expect(r.err).toMatch(/\rpackaging \[#+\] 100%/);
    expect(r.err.endsWith("\r\x1b[K")).toBe(true);
    expect((await inProcess(["-o", join(work, "quiet.wacz"), ...warcFiles(dir)])).err).toBe("");
  });
});

describe.skipIf(!existsSync(CHROMIUM))("lathe record --wacz", () => {
  const certs = originCerts();
  let site: WsOrigin;
  beforeAll(async () => {
    site = await startWsOrigin(certs);
  });
  afterAll(async () => {
    await site?.close();
  });

  it("packages the session it recorded: exactly the pages it visited, with their titles", async () => {
    const cfg = join(work, "record.config.json");
    writeFileSync(cfg, JSON.stringify({ upstream: { caFile: certs.caFile }, certs: { dir: join(work, "certs") } }));
    const refused = await runLathe(["record", "--headless", `${site.url}/page/2`, "--wacz", join(work, "nowhere", "r.wacz"), "--config", cfg], work);
    expect(refused.code, "checked before recording").toBe(2);
    expect(refused.stderr).toMatch(/--wacz: cannot write .*the directory .*nowhere does not exist/);
    const pages = [`${site.url}/page/2`, `${site.url}/page/5`];
    const out = join(work, "recorded.wacz");
    const run = await runLathe(["record", "--headless", ...pages, "--dir", join(work, "recorded"), "--config", cfg, "--wacz", out], work, 150_000);
    expect(run.code, `${run.stdout}\n${run.stderr}`).toBe(0);
    expect(run.stdout).toMatch(/^ {2}pages: +2 \(the pages the recording visited\)$/m);
    const { wacz, problems } = await checkWacz(out);
    expect(problems).toEqual([]);
    expect(wacz.pages.map((p) => p.url)).toEqual(pages);
    for (const p of wacz.pages) expect(p.title).toMatch(/^loaded:\d+$/);
    // The same session packaged later from its WARC files alone lists the same pages and titles (from the screenshots' metadata).
    const later = join(work, "later.wacz");
    expect((await runLathe(["wacz", "-o", later, ...warcFiles(join(work, "recorded"))], work)).code).toBe(0);
    const again = await checkWacz(later);
    expect(again.wacz.pages.map((p) => ({ url: p.url, ts: p.ts, title: p.title }))).toEqual(wacz.pages.map((p) => ({ url: p.url, ts: p.ts, title: p.title })));
  }, 200_000);
});
