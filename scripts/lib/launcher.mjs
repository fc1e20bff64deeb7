// The node flags lathe's launcher starts it with: the ones on bin/lathe.js's `#!/usr/bin/env -S
// node …` line (npm start passes the same; test/cli/launcher.test.ts keeps them equal). Scripts
// that start lathe with `node` (the benchmark, the soak) add them, so they measure what a user runs.
import { readFileSync } from "node:fs";
import path from "node:path";

export function launcherNodeFlags(repoRoot) {
  const first = readFileSync(path.join(repoRoot, "bin", "lathe.js"), "utf8").split("\n", 1)[0];
  const m = /^#!\/usr\/bin\/env -S node((?:\s+--\S+)*)\s*$/.exec(first);
  if (!m) throw new Error(`bin/lathe.js: unexpected first line ${JSON.stringify(first)}`);
  return m[1].trim().split(/\s+/).filter(Boolean);
}
