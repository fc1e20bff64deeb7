/**
 * Back-pressure from the WARC writer (DESIGN.md "Back-pressure everywhere"; issue #7 soak: RSS
 * must stay flat at full speed): while the captures waiting for the writer exceed 64 MiB, new
 * exchanges wait before going upstream instead of piling up; they proceed once the writer
 * catches up, and nothing is lost.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bytesOf, startHttpOrigin, type Origin } from "../helpers/origin.js";
import { startTestLathe, type TestLathe } from "../helpers/lathe.js";
import { viaProxy } from "../helpers/client.js";
import { readAllWarcs } from "../helpers/warcs.js";

describe("back-pressure from a slow writer", () => {
  let origin: Origin;
  let lathe: TestLathe;
  beforeAll(async () => {
    origin = await startHttpOrigin();
    lathe = await startTestLathe({ capture: { spoolMemoryBytes: 256 * 1024 } });
    expect((await viaProxy(lathe.proxyUrl, `${origin.url}/text/10`)).status).toBe(200);
  });
  afterAll(async () => {
    await lathe.stop();
    await origin.close();
  });

  it("holds new exchanges while over 64 MiB of captures wait for the writer, then lets them through", async () => {
    const w = lathe.writers.get("lathe")!;
    const write = w.write.bind(w);
    let open: () => void = () => undefined;
    const gate = new Promise<void>((r) => (open = r));
    w.write = async (g) => {
      await gate;
      return write(g);
    };
    const N = 30; // 30 × 4 MB = 120 MB of captures, about twice the bound
    const size = 4_000_000;
    const before = origin.seen.length;
    const results = Array.from({ length: N }, (_, i) => viaProxy(lathe.proxyUrl, `${origin.url}/bytes/${size}?n=${i}`));
    // With the writer stalled, the origin sees only the exchanges that fit under the bound.
    let seen = 0;
    for (let i = 0; i < 100; i++) {
      await new Promise((r) => setTimeout(r, 50));
      const now = origin.seen.length - before;
      if (now === seen && i > 20) break;
      seen = now;
    }
    expect(seen).toBeGreaterThanOrEqual(16); // 16 × 4 MB ≤ 64 MiB went through
    expect(seen).toBeLessThan(N);
    open();
    const got = await Promise.all(results);
    for (const r of got) {
      expect(r.status).toBe(200);
      expect(r.body.equals(bytesOf(size, size))).toBe(true);
    }
    expect(origin.seen.length - before).toBe(N);
    await lathe.stop();
    const recs = await readAllWarcs(lathe.dir);
    for (let i = 0; i < N; i++) expect(recs.some((r) => (r.type === "response" || r.type === "revisit") && r.get("WARC-Target-URI") === `${origin.url}/bytes/${size}?n=${i}`)).toBe(true);
  });
});
