/**
 * Back-pressure (DESIGN.md "Back-pressure everywhere"; issue #7 soak: RSS must stay flat at full
 * speed). From the WARC writer: while the captures waiting for it exceed 64 MiB, new exchanges
 * wait before going upstream instead of piling up; they proceed once the writer catches up, and
 * nothing is lost. From a capture's spool file: while its disk is behind, the body waits, however
 * fast the client reads.
 */
import { execFileSync } from "node:child_process";
import { closeSync, constants, mkdtempSync, openSync, rmSync } from "node:fs";
import { open, type FileHandle } from "node:fs/promises";
import http from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bytesOf, startHttpOrigin, type Origin } from "../helpers/origin.js";
import { startTestLathe, type TestLathe } from "../helpers/lathe.js";
import { viaProxy } from "../helpers/client.js";
import { captureOf, checkDigests, readAllWarcs } from "../helpers/warcs.js";

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

/**
 * Hold every thread of libuv's pool, through which Node does its file I/O: each is left waiting
 * in open(2) on a FIFO that has no writer yet. To Node that is a disk that stopped answering: no
 * file operation completes until `release()` opens the FIFOs' other ends.
 */
async function holdFileThreads(): Promise<() => Promise<void>> {
  const dir = mkdtempSync(join(tmpdir(), "lathe-fifo-"));
  const threads = Number(process.env.UV_THREADPOOL_SIZE) || 4;
  const fifos = Array.from({ length: threads }, (_, i) => join(dir, `held-${i}`));
  for (const f of fifos) execFileSync("mkfifo", [f]);
  const opened: Array<Promise<FileHandle>> = fifos.map((f) => open(f, "r"));
  await new Promise((r) => setTimeout(r, 100));
  return async () => {
    // A reader is waiting on each, so a non-blocking open of the write end succeeds at once.
    for (const f of fifos) closeSync(openSync(f, constants.O_WRONLY | constants.O_NONBLOCK));
    for (const h of await Promise.all(opened)) await h.close();
    rmSync(dir, { recursive: true, force: true });
  };
}

/** Waits until `count()` stays the same for 300 ms (at most 15 s): the flow has stopped. */
async function untilStill(count: () => number): Promise<void> {
  let last = -1;
  for (let i = 0; i < 50 && count() !== last; i++) {
    last = count();
    await new Promise((r) => setTimeout(r, 300));
  }
}

/**
 * An origin and a lathe with 256 KiB spools, lathe's own files opened by a first exchange, then
 * libuv's file threads held while `run` goes; `release` lets them go (at the end if `run` did not),
 * and everything is stopped after.
 */
async function withFileThreadsHeld(run: (o: { origin: Origin; lathe: TestLathe; proxy: URL; release: () => Promise<void> }) => Promise<void>): Promise<void> {
  const origin = await startHttpOrigin();
  const lathe = await startTestLathe({ capture: { spoolMemoryBytes: 256 * 1024 } });
  let held: (() => Promise<void>) | null = null;
  const release = async () => {
    const r = held;
    held = null;
    await r?.();
  };
  try {
    // Lathe's own files (WARC, index journal, dedup database) are opened before the threads are held.
    expect((await viaProxy(lathe.proxyUrl, `${origin.url}/text/10`)).status).toBe(200);
    held = await holdFileThreads();
    await run({ origin, lathe, proxy: new URL(lathe.proxyUrl), release });
  } finally {
    await release();
    await lathe.stop();
    await origin.close();
  }
}

describe("back-pressure from a slow spool file", () => {
  it("holds the origin back while a capture cannot reach its temp file, however fast the client reads; then all of it passes and is recorded", () =>
    withFileThreadsHeld(async ({ origin, lathe, proxy: p, release }) => {
      const size = 48_000_000;
      const url = `${origin.url}/bytes/${size}`;
      let received = 0;
      const chunks: Buffer[] = [];
      const body = new Promise<Buffer>((resolve, reject) => {
        const req = http.request({ host: p.hostname, port: p.port, path: url, headers: { Host: new URL(url).host }, agent: false }, (res) => {
          res.on("data", (c: Buffer) => {
            received += c.length;
            chunks.push(c);
          });
          res.on("end", () => resolve(Buffer.concat(chunks)));
          res.on("error", reject);
        });
        req.on("error", reject);
        req.end();
      });
      // Without back-pressure from the spool the whole body reaches the client while its bytes
      // queue in memory for a file that cannot be written.
      await untilStill(() => received);
      expect(received).toBeGreaterThan(0);
      expect(received).toBeLessThan(16_000_000);
      await release();
      expect((await body).equals(bytesOf(size, size))).toBe(true);
      await lathe.stop();
      const { response } = captureOf(await readAllWarcs(lathe.dir), url);
      expect(response.type).toBe("response");
      expect(checkDigests(response)).toEqual([]);
      expect(response.body!.equals(bytesOf(size, size))).toBe(true);
    }));

  it("holds an upload back while its capture cannot reach its temp file; then all of it goes upstream and is recorded", () =>
    withFileThreadsHeld(async ({ origin, lathe, proxy: p, release }) => {
      const size = 48_000_000;
      const upload = bytesOf(size, 3);
      const url = `${origin.url}/text/10?upload`;
      let sent = 0;
      const answered = new Promise<number>((resolve, reject) => {
        const req = http.request({ host: p.hostname, port: p.port, method: "POST", path: url, headers: { Host: new URL(url).host, "Content-Length": String(size) }, agent: false }, (res) => {
          res.resume();
          res.on("end", () => resolve(res.statusCode!));
        });
        req.on("error", reject);
        // Written as the socket takes it: `sent` is what lathe (or the kernel for it) accepted.
        const pump = () => {
          while (sent < size) {
            const c = upload.subarray(sent, Math.min(size, sent + 65536));
            sent += c.length;
            if (!req.write(c)) return void req.once("drain", pump);
          }
          req.end();
        };
        pump();
      });
      await untilStill(() => sent);
      expect(sent).toBeLessThan(16_000_000);
      await release();
      expect(await answered).toBe(200);
      expect(origin.seen.at(-1)!.body.equals(upload)).toBe(true);
      await lathe.stop();
      // Its response is a revisit (the same /text/10 as the warm-up); the request record holds the upload.
      const request = (await readAllWarcs(lathe.dir)).find((r) => r.type === "request" && r.get("WARC-Target-URI") === url)!;
      expect(checkDigests(request)).toEqual([]);
      expect(request.body!.equals(upload)).toBe(true);
    }));
});
