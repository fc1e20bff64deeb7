#!/usr/bin/env node
/**
 * Builds lathe's one native helper, native/malloc-trim (glibc malloc_trim, see its .c file), with
 * node-gyp. Run by `npm install` / `npm ci` (the package's install script) and again by
 * `npm run build`, where it does nothing while the built addon is newer than its sources.
 *
 * It never fails the install: lathe runs without the helper (RSS is then left to glibc's own
 * trimming), and says so in its log at start-up. `npm test` checks that it was built on Linux.
 * Node built-ins only.
 */
import { spawnSync } from "node:child_process";
import { existsSync, statSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const dir = join(root, "native", "malloc-trim");
const built = join(dir, "build", "Release", "malloc_trim.node");
const sources = ["binding.gyp", "malloc_trim.c"].map((f) => join(dir, f));

const mtime = (f) => statSync(f).mtimeMs;
if (existsSync(built) && sources.every((s) => mtime(s) <= mtime(built))) process.exit(0);

// node-gyp ships with npm: npm names it in npm_config_node_gyp for lifecycle scripts; otherwise
// it sits beside the npm that came with this node; last, whatever `node-gyp` is on PATH.
const candidates = [
  process.env.npm_config_node_gyp,
  join(dirname(process.execPath), "..", "lib", "node_modules", "npm", "node_modules", "node-gyp", "bin", "node-gyp.js"),
].filter((f) => f && existsSync(f));
// Headers: those of the running node when it has them (Debian's and the official builds do: no
// download, which fails on a machine without internet), unless npm already names a nodedir.
const prefix = join(dirname(process.execPath), "..");
const nodedir = process.env.npm_config_nodedir ? [] : existsSync(join(prefix, "include", "node", "node_api.h")) ? [`--nodedir=${prefix}`] : [];
const [cmd, args] = candidates.length ? [process.execPath, [candidates[0], "rebuild", ...nodedir]] : ["node-gyp", ["rebuild", ...nodedir]];
const r = spawnSync(cmd, args, { cwd: dir, stdio: ["ignore", "pipe", "pipe"], encoding: "utf8" });
if (r.status === 0 && existsSync(built)) {
  process.stdout.write(`lathe: built ${built.slice(root.length + 1)}\n`);
} else {
  const why = r.error ? r.error.message : `${cmd} ${args.join(" ")} exited ${r.status}\n${(r.stderr ?? "").split("\n").slice(-15).join("\n")}`;
  process.stderr.write(
    `lathe: warning: could not build the native helper native/malloc-trim (${why.trim()})\n` +
      "lathe still works without it; to build it, install a C compiler and Python (Debian: apt-get install -y build-essential python3) and run `npm run build`.\n",
  );
}
