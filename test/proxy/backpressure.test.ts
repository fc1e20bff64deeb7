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
    // In two waves, so the outcome does not depend on how the requests interleave: 17 × 4 MB
    // (68 MB, over the 64 MiB bound only once all 17 are captured, so none of them is held) must
    // all go through with the writer stalled; after them, every new exchange must wait.
    const size = 4_000_000;
    const first = 17;
    const N = 30;
    const before = origin.seen.length;
    const url = (i: number) => `${origin.url}/bytes/${size}?n=${i}`;
    // A capture is charged to the backlog just before it is handed to the archiver: count those.
    let handed = 0;
    const archive = lathe.archiver.archive.bind(lathe.archiver);
    lathe.archiver.archive = (ex) => {
      handed++;
      return archive(ex);
    };
    const firstWave = await Promise.all(Array.from({ length: first }, (_, i) => viaProxy(lathe.proxyUrl, url(i))));
    for (const r of firstWave) expect(r.status).toBe(200);
    expect(origin.seen.length - before).toBe(first);
    for (let i = 0; i < 200 && handed < first; i++) await new Promise((r) => setTimeout(r, 25));
    expect(handed).toBe(first);
    const results = Array.from({ length: N - first }, (_, i) => viaProxy(lathe.proxyUrl, url(first + i)));
    // With the writer stalled and the backlog over its bound, the origin sees none of them.
    await new Promise((r) => setTimeout(r, 1500));
    expect(origin.seen.length - before).toBe(first);
    open();
    const got = [...firstWave, ...(await Promise.all(results))];
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
