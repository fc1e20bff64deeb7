/**
 * warc.durability (issue #7, warc-files.md §6): in `strict` mode a client's response finishes only
 * once its records are written (and fsynced); in the default `rollover` mode the response is not
 * held back. The writer's `write` is gated so the test can see the client waiting on it.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import http from "node:http";
import { bytesOf, startHttpOrigin, type Origin } from "../helpers/origin.js";
import { startTestLathe, type TestLathe } from "../helpers/lathe.js";
import { viaProxy } from "../helpers/client.js";
import { captureOf, readAllWarcs } from "../helpers/warcs.js";
import type { WarcWriter } from "../../src/warc/types.js";

/** GET through the proxy, noting when the first body byte and the end arrived. */
function timedGet(proxyUrl: string, url: string): Promise<{ body: Buffer; firstByteAt: number; endAt: number; complete: boolean }> {
  const p = new URL(proxyUrl);
  return new Promise((resolve, reject) => {
    const req = http.get({ host: p.hostname, port: p.port, path: url, headers: { Host: new URL(url).host }, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      let firstByteAt = 0;
      res.on("data", (c: Buffer) => {
        firstByteAt ||= Date.now();
        chunks.push(c);
      });
      res.on("end", () => resolve({ body: Buffer.concat(chunks), firstByteAt, endAt: Date.now(), complete: res.complete }));
      res.on("error", reject);
    });
    req.on("error", reject);
  });
}

/** Make the series' writer wait for `release()` before each write; returns when writes were attempted. */
function gate(w: WarcWriter) {
  const original = w.write.bind(w);
  let open: () => void = () => undefined;
  let opened = new Promise<void>((r) => (open = r));
  const attempts: number[] = [];
  const landed: number[] = [];
  w.write = async (group) => {
    attempts.push(Date.now());
    await opened;
    const r = await original(group);
    landed.push(Date.now());
    return r;
  };
  return {
    attempts,
    landed,
    release: () => open(),
    reset: () => (opened = new Promise<void>((r) => (open = r))),
  };
}

describe.each(["strict", "rollover"] as const)("warc.durability %s", (durability) => {
  let origin: Origin;
  let lathe: TestLathe;
  beforeAll(async () => {
    origin = await startHttpOrigin();
    lathe = await startTestLathe({ warc: { durability } });
    // The first capture creates the series' writer.
    expect((await viaProxy(lathe.proxyUrl, `${origin.url}/text/10`)).status).toBe(200);
  });
  afterAll(async () => {
    await lathe.stop();
    await origin.close();
  });

  it(durability === "strict" ? "holds the end of the response until its records are written" : "does not hold the response back for the write", async () => {
    const g = gate(lathe.writers.get("lathe")!);
    for (const [path, n] of [["bytes", 200_000], ["chunked", 50_000]] as const) {
      g.reset();
      const url = `${origin.url}/${path}/${n}?d=${durability}`;
      const got = timedGet(lathe.proxyUrl, url);
      const t0 = Date.now();
      // Wait until the capture reached the writer, keep the write pending a while, then let it go.
      while (g.attempts.length === 0 || g.attempts.at(-1)! < t0) await new Promise((r) => setTimeout(r, 10));
      const ended = await Promise.race([got.then(() => true), new Promise((r) => setTimeout(() => r(false), 400))]);
      const releasedAt = Date.now();
      g.release();
      const r = await got;
      expect(r.complete).toBe(true);
      expect(r.body.length).toBe(n);
      expect(r.body.equals(bytesOf(n, path === "bytes" ? n : n + 7))).toBe(true);
      if (durability === "strict") {
        expect(ended, `${path}: the client saw the end before its records were written`).toBe(false);
        expect(r.endAt).toBeGreaterThanOrEqual(releasedAt);
        expect(r.endAt).toBeGreaterThanOrEqual(g.landed.at(-1)!);
        // All but the end was streamed while the write waited.
        expect(r.firstByteAt).toBeLessThan(releasedAt);
      } else {
        expect(ended, `${path}: the client waited for the write in rollover mode`).toBe(true);
      }
    }
    await lathe.stop();
    const recs = await readAllWarcs(lathe.dir);
    expect(captureOf(recs, `${origin.url}/bytes/200000?d=${durability}`).response.body!.length).toBe(200_000);
  });
});
