/** Which queued groups join an append: same file, in memory, within the file and batch limits. */
import { describe, expect, it } from "vitest";
import { MAX_BATCH_BYTES, MAX_BATCH_GROUPS, joinsBatch } from "../../src/warc/appendBatch.js";
import type { EncodedGroup } from "../../src/warc/groupEncoder.js";

/** A compressed group of one member of `size` bytes, in memory unless `streamed`. */
function group(size: number, o: { warcinfoId?: string; streamed?: boolean } = {}): EncodedGroup {
  const record = { size, recordSize: size, parts: o.streamed ? null : [new Uint8Array(size)], writeTo: async () => {}, dispose: async () => {} };
  return { warcinfoId: o.warcinfoId ?? "<info-1>", drafts: [], records: [record], size };
}

/** How many of `next` the rule takes, in order, up to the first it refuses. */
function taken(rule: (g: EncodedGroup) => boolean, next: EncodedGroup[]): number {
  let n = 0;
  while (n < next.length && rule(next[n]!)) n++;
  return n;
}

const file = { size: 1000, warcinfoId: "<info-1>" };

describe("joinsBatch", () => {
  it("takes in-memory groups for the same file while the file has room", () => {
    // 1000 + 100 + 3 × 300 = 2000: the fourth would overflow
    expect(taken(joinsBatch(file, group(100), 2000), [group(300), group(300), group(300), group(300)])).toBe(3);
  });

  it("takes nothing behind a streamed group, and stops at a streamed one", () => {
    expect(taken(joinsBatch(file, group(100, { streamed: true }), 1e9), [group(10)])).toBe(0);
    expect(taken(joinsBatch(file, group(100), 1e9), [group(10), group(10, { streamed: true }), group(10)])).toBe(1);
  });

  it("stops at a group compressed for another file", () => {
    expect(taken(joinsBatch(file, group(100), 1e9), [group(10), group(10, { warcinfoId: "<info-2>" }), group(10)])).toBe(1);
  });

  it("keeps a batch within its bytes and its number of groups", () => {
    const half = MAX_BATCH_BYTES / 2;
    expect(taken(joinsBatch(file, group(half), 1e12), [group(half), group(1)])).toBe(1);
    const many = Array.from({ length: MAX_BATCH_GROUPS + 10 }, () => group(1));
    expect(taken(joinsBatch(file, group(1), 1e12), many)).toBe(MAX_BATCH_GROUPS - 1);
  });
});
