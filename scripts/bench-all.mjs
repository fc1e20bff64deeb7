#!/usr/bin/env node
// `npm run bench`: every benchmark in one session. The options after `--` go to the proxy benchmark
// (scripts/bench.mjs, hence to proxybench) only; the others run with their defaults. Each step runs
// even if an earlier one failed a bar; the exit status is the first non-zero one.
//
//   npm run bench -- --quick --scenarios http-small,https-small
import { spawnSync } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const STEPS = [
  ["bench.mjs", process.argv.slice(2)],
  ["bench-dedup.mjs", []],
  ["bench-reader.mjs", []],
  ["bench-dedup-disk.mjs", []],
  ["bench-cdx.mjs", []],
  ["bench-h2.mjs", []],
  ["bench-postgres.mjs", []],
  ["bench-wacz.mjs", []],
  ["bench-hybrid.mjs", []],
];

let status = 0;
for (const [script, args] of STEPS) {
  process.stdout.write(`\n##### ${script}${args.length ? ` ${args.join(" ")}` : ""}\n`);
  const r = spawnSync(process.execPath, [path.join(here, script), ...args], { stdio: "inherit" });
  const code = r.status ?? 1;
  if (code !== 0) process.stdout.write(`##### ${script} exited with ${r.status ?? r.signal}\n`);
  if (code !== 0 && status === 0) status = code;
}
process.exit(status);
