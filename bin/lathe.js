#!/usr/bin/env node
// Entry point of the `lathe` command: runs the compiled CLI (npm run build makes dist/).
import { runCli } from "../dist/cli/main.js";

// `lathe ca --pem | head`: a closed pipe is not an error of ours.
process.stdout.on("error", (e) => {
  if (e.code === "EPIPE") process.exit(0);
  throw e;
});

const code = await runCli(process.argv.slice(2));
if (code !== 0 || process.argv[2] !== "serve") process.exitCode = code;
if (process.argv[2] === "serve") process.exit(code);
