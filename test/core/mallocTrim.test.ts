/**
 * The native helper (native/malloc-trim) behind core/mallocTrim: built by `npm ci` / `npm run
 * build` wherever glibc is, and trim() really gives fragmented free heap memory back.
 */
import { execFileSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { mallocTrimHelper, startMallocTrimming } from "../../src/core/mallocTrim.js";

const glibc = process.platform === "linux" && Boolean((process.report.getReport() as { header?: { glibcVersionRuntime?: string } }).header?.glibcVersionRuntime);
const dist = fileURLToPath(new URL("../../dist/core/mallocTrim.js", import.meta.url));

describe.runIf(glibc)("malloc trimming (glibc)", () => {
  it("the native helper is built and loads", () => {
    expect(mallocTrimHelper().missing).toBeNull();
    expect(mallocTrimHelper().trimmer).not.toBeNull();
  });

  it("gives back the free pages between live allocations, which free() alone keeps", () => {
    // A child with a heap fragmented on purpose: 4,000 × 64 KiB buffers (under glibc's mmap
    // threshold, so from the heap), every 16th kept alive, the rest freed. RSS before and after trim().
    const script = `
      import { readFileSync } from "node:fs";
      import { mallocTrimHelper } from ${JSON.stringify(dist)};
      const rss = () => Number(/VmRSS:\\s+(\\d+)/.exec(readFileSync("/proc/self/status", "utf8"))[1]);
      let bufs = [];
      for (let i = 0; i < 4000; i++) bufs.push(Buffer.alloc(65536, 1));
      const kept = bufs.filter((_, i) => i % 16 === 0);
      bufs = null;
      for (let i = 0; i < 4; i++) { gc(); await new Promise((r) => setTimeout(r, 20)); }
      const before = rss();
      const released = mallocTrimHelper().trimmer.trim();
      const after = rss();
      console.log(JSON.stringify({ before, after, released, kept: kept.length }));
    `;
    const out = execFileSync(process.execPath, ["--expose-gc", "--input-type=module", "-e", script], { encoding: "utf8" });
    const r = JSON.parse(out.trim().split("\n").pop()!) as { before: number; after: number; released: boolean; kept: number };
    expect(r.kept).toBe(250);
    expect(r.released).toBe(true);
    // ~234 MiB were freed between the kept buffers; most of it must leave RSS.
    expect(r.before - r.after).toBeGreaterThan(100 * 1024);
  });

  it("trims on a timer that does not keep the process alive, until stopped", async () => {
    let calls = 0;
    const stop = startMallocTrimming(10, { trim: () => (calls++, true) });
    await new Promise((r) => setTimeout(r, 60));
    stop();
    const seen = calls;
    expect(seen).toBeGreaterThan(1);
    await new Promise((r) => setTimeout(r, 40));
    expect(calls).toBe(seen);
  });
});
