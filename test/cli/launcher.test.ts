/**
 * The node flags lathe is launched with (bin/lathe.js's `#!/usr/bin/env -S node …` line): the
 * installed `lathe` command gets them from the shebang, `npm start` and the benchmark must pass the
 * same ones, and executing bin/lathe.js must hand them to node (heap flags work only at start-up).
 */
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { launcherNodeFlags } from "../../scripts/lib/launcher.mjs";
import { BIN } from "../helpers/serve.js";

const REPO = new URL("../..", import.meta.url).pathname;
const tmp = mkdtempSync(join(tmpdir(), "lathe-launcher-"));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

describe("the launcher's node flags", () => {
  it("bin/lathe.js's shebang sets V8's old-generation floor, young-generation size, eager feedback vectors and early old-generation marking, and npm start passes the same flags", () => {
    const flags = launcherNodeFlags(REPO);
    expect(flags).toEqual(["--initial-old-space-size=64", "--max-semi-space-size=8", "--no-lazy-feedback-allocation", "--incremental-marking-soft-trigger=70"]);
    const start: string = JSON.parse(readFileSync(join(REPO, "package.json"), "utf8")).scripts.start;
    expect(start).toBe(`node ${flags.join(" ")} bin/lathe.js serve`);
  });

  it.skipIf(!existsSync(join(REPO, "dist", "cli", "main.js")))("executing bin/lathe.js starts node with them", async () => {
    const proc = spawn(BIN, ["serve", "--port", "0", "--control-port=-1", "--dir", join(tmp, "w"), "--certs", join(tmp, "c")], { stdio: ["ignore", "pipe", "pipe"] });
    try {
      let out = "";
      await new Promise<void>((resolve, reject) => {
        const t = setTimeout(() => reject(new Error(`no start: ${out}`)), 30_000);
        proc.stdout!.on("data", (d: Buffer) => {
          out += d;
          if (/listening on /.test(out)) {
            clearTimeout(t);
            resolve();
          }
        });
        proc.stderr!.on("data", (d: Buffer) => (out += d));
        proc.once("exit", (code) => reject(new Error(`exited ${code}: ${out}`)));
      });
      // env -S execs node in place: the child's own command line carries the flags.
      const argv = readFileSync(`/proc/${proc.pid}/cmdline`, "utf8").split("\0");
      expect(argv.slice(1, 1 + launcherNodeFlags(REPO).length)).toEqual(launcherNodeFlags(REPO));
      expect(argv).toContain(BIN);
    } finally {
      proc.kill("SIGTERM");
      await new Promise((r) => (proc.exitCode !== null ? r(null) : proc.once("exit", r)));
    }
  });
});
