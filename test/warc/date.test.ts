import { describe, expect, it } from "vitest";
import { formatWarcDate } from "../../src/warc/date.js";

/** What formatWarcDate made before it kept the last whole second: toISOString every time. */
function reference(micros: bigint, version: "1.0" | "1.1"): string {
  const seconds = new Date(Number(micros / 1000n)).toISOString().slice(0, 19);
  if (version === "1.0") return `${seconds}Z`;
  return `${seconds}.${(((micros % 1_000_000n) + 1_000_000n) % 1_000_000n).toString().padStart(6, "0")}Z`;
}

describe("formatWarcDate", () => {
  it("formats instants of one second, across seconds, and back again as toISOString does", () => {
    const base = 1796652361000000n;
    const steps = [0n, 1n, 999_999n, 1_000_000n, 1_000_001n, 999_999n, -1n, 60_000_000n, 0n, 3_600_000_123n, 86_400_000_000n];
    for (const version of ["1.1", "1.0"] as const) {
      for (const s of steps) expect(formatWarcDate(base + s, version)).toBe(reference(base + s, version));
    }
  });

  it("before 1970 and at the ends of Date's range", () => {
    for (const m of [-1n, -999n, -1000n, -1_000_000n, -1_000_001n, 0n]) expect(formatWarcDate(m, "1.1")).toBe(reference(m, "1.1"));
    const end = 8_640_000_000_000_000_000n;
    expect(formatWarcDate(end, "1.1")).toBe(reference(end, "1.1"));
    // 1 ms past the end, in the second just formatted: still a RangeError.
    expect(() => formatWarcDate(end + 1000n, "1.1")).toThrow(RangeError);
  });
});
