import { describe, expect, it } from "vitest";
import { RecentMap } from "../../src/core/recentMap.js";

describe("RecentMap", () => {
  it("forgets the least recently set entries past its bound", () => {
    const m = new RecentMap<string, number>(3);
    m.set("a", 1).set("b", 2).set("c", 3);
    m.set("a", 10); // a is now the most recent
    m.set("d", 4);
    expect(m.has("b")).toBe(false);
    expect([m.get("a"), m.get("c"), m.get("d")]).toEqual([10, 3, 4]);
    expect(m.size).toBe(3);
    m.set("e", 5);
    expect(m.has("c")).toBe(false);
    expect(m.size).toBe(3);
  });

  it("a deleted key neither counts nor is evicted in another's place", () => {
    const m = new RecentMap<string, number>(2);
    m.set("a", 1).set("b", 2);
    expect(m.delete("a")).toBe(true);
    m.set("c", 3);
    expect([m.has("b"), m.has("c"), m.size]).toEqual([true, true, 2]);
    m.set("a", 4);
    expect([m.has("b"), m.get("c"), m.get("a")]).toEqual([false, 3, 4]);
  });

  it("keeps the same answers as a reference model over many mixed operations", () => {
    const m = new RecentMap<number, number>(50);
    const ref = new Map<number, number>();
    let seed = 7;
    const rnd = (n: number) => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) % n);
    for (let i = 0; i < 20_000; i++) {
      const k = rnd(120);
      if (rnd(10) === 0) {
        expect(m.delete(k)).toBe(ref.delete(k));
      } else {
        ref.delete(k);
        ref.set(k, i);
        if (ref.size > 50) ref.delete(ref.keys().next().value!);
        m.set(k, i);
      }
      expect(m.size).toBe(ref.size);
      expect(m.get(k)).toBe(ref.get(k));
    }
    for (const [k, v] of ref) expect(m.get(k)).toBe(v);
  });

  it("stays O(1) at a large bound: 100,000 evictions at 20,000 entries in well under a second", () => {
    const m = new RecentMap<string, number>(20_000);
    const t0 = performance.now();
    for (let i = 0; i < 120_000; i++) m.set(`id${i}`, i);
    expect(m.size).toBe(20_000);
    expect(m.has("id99999")).toBe(false);
    expect(m.get("id119999")).toBe(119_999);
    // A Map evicting keys().next() takes ~15 µs per eviction here (1.5 s); this takes ~50 ms.
    expect(performance.now() - t0).toBeLessThan(800);
  });

  it("refuses a bound below one", () => {
    expect(() => new RecentMap(0)).toThrow(RangeError);
  });
});
