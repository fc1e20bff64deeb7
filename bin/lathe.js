#!/usr/bin/env -S node --initial-old-space-size=64 --max-semi-space-size=8 --no-lazy-feedback-allocation --incremental-marking-soft-trigger=70
// Entry point of the `lathe` command: runs the compiled CLI (npm run build makes dist/).
//
// --initial-old-space-size=64: V8 counts every ArrayBuffer allocated since its last full GC
// against the old generation's limit, and a proxy allocates one per socket read. With lathe's
// ~10 MB heap that limit is ~25 MB, so a large body started a full mark-compact every ~16 MB it
// moved (21-29 per 300 MB). A 64 MB floor lets the scavenges free those buffers instead: 0 full
// GCs, 30% less CPU per MB and 40% more MB/s on 50 MB bodies (README, Benchmark).
// --max-semi-space-size=8: the young generation's two halves stop at 8 MB instead of 16, which
// lowered the benchmark's peak RSS by 10-25 MB with no measurable cost in CPU.
// --no-lazy-feedback-allocation: V8 gives a function its feedback vector (the record of the
// shapes it met, which inline caches and the optimising compiler need) only after it has run a
// while, to save memory on run-once code in web pages. Until then its property loads take the
// generic path. Every exchange runs through hundreds of lathe's and Node's functions, so a freshly
// started lathe paid for that for thousands of exchanges. Eager vectors: 12% less CPU over three
// passes of http-small, 2% over four of https-small, the same RSS (README, Benchmark).
// --incremental-marking-soft-trigger=70: V8 starts marking the old generation (a task, in the
// background of the proxy's work) once it is 70% full, instead of close to its limit. While it
// marks, V8 promotes whatever survives a scavenge, so a late start let the small-body rows fill
// the old generation with ~30 MB of promoted garbage before each full GC; on top of it a large
// body's socket buffers made the peak. Peak RSS over the benchmark 195-216 -> 162-188 MB, the same
// CPU per exchange (README, Benchmark). Earlier triggers (5-40%) mark all the time and cost up to
// 70% more CPU per exchange.
// Node reads heap flags only at start-up; `npm start` passes the same flags, and so must anyone
// who runs `node bin/lathe.js` directly.
import { runCli } from "../dist/cli/main.js";

// `lathe ca --pem | head`: a closed pipe is not an error of ours.
process.stdout.on("error", (e) => {
  if (e.code === "EPIPE") process.exit(0);
  throw e;
});

const code = await runCli(process.argv.slice(2));
if (code !== 0 || process.argv[2] !== "serve") process.exitCode = code;
if (process.argv[2] === "serve") process.exit(code);
