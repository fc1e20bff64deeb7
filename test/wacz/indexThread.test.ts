/**
 * The WACZ index pass in its worker thread (src/wacz/indexThread.ts, running the compiled
 * dist/wacz/indexWorker.js): the same result as in this thread, damage arriving as the same
 * WaczError, and an abandoned package stopping the worker at once.
 */
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runIndexPass } from "../../src/wacz/indexPass.js";
import { startIndexPass } from "../../src/wacz/indexThread.js";
import { WaczError } from "../../src/wacz/waczError.js";
import { describeUsing, sharedDir } from "../helpers/shared.js";

const ROOT = new URL("../../", import.meta.url).pathname;
const CONFORMANCE = sharedDir("conformance/warcs", "LATHE_CONFORMANCE_WARCS");
const CONF = CONFORMANCE.path;
const FILES = ["pywb-example2.warc.gz", "jwarc-recorder.warc.gz", "pywb-iana.warc.gz"].map((f) => join(CONF, f));

let work = "";
beforeAll(async () => {
  if (!existsSync(join(ROOT, "dist/wacz/indexWorker.js"))) throw new Error("dist/wacz/indexWorker.js is missing: run `npx tsc -p tsconfig.json` first (npm test does)");
  work = await mkdtemp(join(tmpdir(), "lathe-wacz-thread-"));
});
afterAll(() => rm(work, { recursive: true, force: true }));

const fresh = async (name: string) => {
  const dir = join(work, name);
  await rm(dir, { recursive: true, force: true });
  await mkdir(dir);
  return dir;
};

describeUsing(CONFORMANCE, "the index pass in a worker thread", () => {
  it("gives what the pass gives in this thread, and reports progress", async () => {
    const progress: number[] = [];
    const there = await startIndexPass({ paths: FILES, pages: { kind: "detect" }, work: await fresh("worker") }, (done) => progress.push(done));
    const here = await runIndexPass({ paths: FILES, pages: { kind: "detect" }, work: await fresh("here") });
    expect(Buffer.isBuffer(there.index.idx)).toBe(true);
    expect({ ...there, cdxPath: "" }).toEqual({ ...here, cdxPath: "" });
    expect(progress.length).toBeGreaterThan(0);
  });

  it("passes damage on as a WaczError naming the file", async () => {
    const bad = join(CONF, "jwarc-fetch.warc.cdxj"); // an index, not a WARC
    const e = await startIndexPass({ paths: [FILES[0]!, bad], pages: { kind: "detect" }, work: await fresh("bad") }).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(WaczError);
    expect((e as WaczError).problem).toBe("damaged");
    expect((e as WaczError).message).toContain(bad);
  });

  it("stops when the package is abandoned", async () => {
    const stop = new AbortController();
    const dir = await fresh("abandoned");
    const pass = startIndexPass({ paths: FILES, pages: { kind: "detect" }, work: dir }, undefined, stop.signal);
    stop.abort();
    await expect(pass).rejects.toThrow(/stopped: the package was abandoned/);
  });
});
