/**
 * The replay site recorded by the real `lathe record --headless --wacz` (dist/, a child process,
 * Debian's Chromium), then indexed by the real `lathe index --cdxj --output` as its summary says:
 * the WARC files, the CDXJ and the WACZ a person would open in a replay tool.
 */
import { execFile } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { OriginCerts } from "../helpers/certs.js";
import { type CdxjLine, lineOf, parseCdxj } from "./damage.js";
import type { Site } from "./site.js";

const ROOT = new URL("../../", import.meta.url).pathname;
const BIN = join(ROOT, "bin/lathe.js");
const RUN_MS = 90_000;

export interface Recording {
  /** The WARC directory. */
  dir: string;
  /** The closed WARC files, `.warc.gz` and `.warc` (absolute paths). */
  warcs: string[];
  /** `lathe index --cdxj --output` of those files, in `dir`. */
  cdxj: string;
  lines: CdxjLine[];
  /** The WACZ `lathe record --wacz` packaged the session in. */
  wacz: string;
  /** 14-digit timestamp of each page's capture, by page URL. */
  pageTs: Record<string, string>;
  stdout: string;
}

function lathe(args: string[], cwd: string): Promise<string> {
  return new Promise((resolve, reject) =>
    execFile(process.execPath, [BIN, ...args], { cwd, timeout: RUN_MS, maxBuffer: 16 * 1024 * 1024 }, (err, stdout, stderr) =>
      err ? reject(new Error(`lathe ${args.join(" ")} failed: ${err.message}\n${stdout}\n${stderr}`)) : resolve(stdout),
    ),
  );
}

/** Record every page of `site` into `<work>/warcs`, then index the files. `config`: more settings (e.g. `warc`). */
export async function recordSite(site: Site, certs: OriginCerts, work: string, config: Record<string, unknown> = {}): Promise<Recording> {
  if (!existsSync(join(ROOT, "dist/cli/record.js"))) throw new Error("dist/cli/record.js is missing: run `npm run build` first (npm test does)");
  mkdirSync(work, { recursive: true });
  const dir = join(work, "warcs");
  const cfg = join(work, "lathe.config.json");
  // lathe trusts the test origin's CA; the browser trusts only lathe's CA.
  writeFileSync(cfg, JSON.stringify({ upstream: { caFile: certs.caFile }, certs: { dir: join(work, "certs") }, ...config }));
  const wacz = join(work, "site.wacz");
  const stdout = await lathe(["record", "--headless", "--dir", dir, "--config", cfg, "--wacz", wacz, ...site.pages.map((p) => p.url)], work);
  const warcs = readdirSync(dir)
    .filter((f) => /\.warc(\.gz)?$/.test(f))
    .sort()
    .map((f) => join(dir, f));
  const cdxj = join(dir, "default.cdxj");
  await lathe(["index", "--cdxj", "--output", cdxj, ...warcs], work);
  const lines = parseCdxj(readFileSync(cdxj, "utf8"));
  const pageTs = Object.fromEntries(site.pages.map((p) => [p.url, lineOf(lines, p.url).timestamp]));
  return { dir, warcs, cdxj, lines, wacz, pageTs, stdout };
}
