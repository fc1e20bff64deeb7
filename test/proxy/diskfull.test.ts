/**
 * A disk that fills up (a real tmpfs; mounting needs root, as CI has: skipped otherwise). Strict
 * durability refuses with 503 while the writer cannot write; rollover durability (issue #26)
 * keeps every capture whose client has its response, writes them in order once space is back,
 * refuses new exchanges only past capture.retryMaxMs / retryMaxBytes, and at shutdown puts the
 * ones still waiting in lost/, each a WARC of its own.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mkdirSync, mkdtempSync, rmSync, readdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { bytesOf, startHttpOrigin, type Origin } from "../helpers/origin.js";
import { startTestLathe, type TestLathe } from "../helpers/lathe.js";
import { viaProxy } from "../helpers/client.js";
import { checkDigests, readAllWarcs, readWarc } from "../helpers/warcs.js";
import { fill, mountTmpfs, readOnly, unmount, writable } from "../helpers/tmpfs.js";
import { checkArchive, sha1, type Received } from "../helpers/archiveCheck.js";
import { createLogger } from "../../src/core/log.js";
import Database from "better-sqlite3";

const mnt = mountTmpfs(2 * 1024 * 1024);

describe.skipIf(!mnt)("disk full in strict durability (a 2 MiB tmpfs; skipped when tmpfs cannot be mounted, i.e. not root)", () => {
  let origin: Origin;
  let lathe: TestLathe;
  const warcDir = mnt ? join(mnt, "warcs") : "";
  const filler = mnt ? join(mnt, "filler") : "";

  beforeAll(async () => {
    origin = await startHttpOrigin();
    fill(mnt!, 1024 * 1024);
    // strict: a client that saw a complete response knows it is archived.
    lathe = await startTestLathe({ warc: { dir: warcDir, durability: "strict" }, capture: { spoolDir: tmpdir() } });
  });
  afterAll(async () => {
    await lathe?.stop();
    await origin?.close();
    if (mnt) unmount(mnt);
  });

  it("fails loudly with 503, loses nothing it reported, and resumes when space returns", async () => {
    const complete: string[] = [];
    let refused = "";
    for (let i = 0; i < 20 && !refused; i++) {
      const url = `${origin.url}/bytes/${200_000 + i}`;
      const r = await viaProxy(lathe.proxyUrl, url).catch(() => null);
      if (!r) continue; // reset: the capture could not be written, so the client saw no complete response
      if (r.status === 503) refused = r.body.toString();
      else if (r.status === 200 && r.body.equals(bytesOf(200_000 + i, 200_000 + i))) complete.push(url);
    }
    expect(refused).toMatch(/cannot archive right now.*disk full|no space/i);
    expect(lathe.writers.get("lathe")!.state().failed?.code).toBe("ERR_WARC_WRITE");
    // Status (control API) shows the writer stalled, with the reason.
    const writerStatus = async () => ((await (await fetch(`${lathe.controlUrl}/api/v1/status`)).json()) as { writers: Array<{ prefix: string; failed: string | null }> }).writers.find((w) => w.prefix === "lathe");
    expect((await writerStatus())?.failed).toMatch(/disk full|no space/i);

    rmSync(filler);
    let resumed = false;
    for (let i = 0; i < 50 && !resumed; i++) {
      await new Promise((r) => setTimeout(r, 200));
      const url = `${origin.url}/text/${1000 + i}`;
      const r = await viaProxy(lathe.proxyUrl, url).catch(() => null);
      if (r?.status === 200) {
        complete.push(url);
        resumed = true;
      }
    }
    expect(resumed).toBe(true);
    expect((await writerStatus())?.failed).toBeNull();

    const reported = lathe.archiver.stats.captures;
    await lathe.stop();
    expect(readdirSync(warcDir).some((f) => f.endsWith(".open"))).toBe(false);
    const recs = await readAllWarcs(warcDir);
    // Nothing is reported written that was not: the captures counted are the captures on disk.
    expect(recs.filter((r) => r.type === "response" || r.type === "revisit").length).toBe(reported);
    for (const r of recs) expect(checkDigests(r)).toEqual([]);
    const archived = new Set(recs.filter((r) => r.type === "response").map((r) => r.get("WARC-Target-URI")));
    for (const url of complete) expect(archived.has(url), url).toBe(true);
  });
});

/** Sequential clients: each makes `perWorker` requests one after another; what they got completely. */
async function sequentialLoad(proxyUrl: string, urlOf: (worker: number, seq: number) => string, workers: number, perWorker: number) {
  const received: Received[] = [];
  const refused: string[] = [];
  await Promise.all(
    Array.from({ length: workers }, async (_, worker) => {
      for (let seq = 0; seq < perWorker; seq++) {
        const url = urlOf(worker, seq);
        const r = await viaProxy(proxyUrl, url).catch(() => null);
        if (r?.status === 200) received.push({ url, sha1: sha1(r.body), worker, seq, at: Date.now() });
        else if (r?.status === 503) refused.push(r.body.toString());
      }
    }),
  );
  return { received, refused };
}

interface StatusWaiting {
  waiting: { captures: number; bytes: number; oldestMs: number | null; failure: string | null; refusing: string | null };
  lost: { count: number; recent: Array<{ uri: string; file: string | null }> };
}
const statusOf = async (lathe: TestLathe) => (await (await fetch(`${lathe.controlUrl}/api/v1/status`)).json()) as StatusWaiting;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The dedup database and the crawl log live on another disk: this one is filled up. */
function sideDir() {
  const side = mkdtempSync(join(tmpdir(), "lathe-side-"));
  return { side, config: { dedup: { dbPath: join(side, "dedup.sqlite3") }, log: { crawlLogDir: side }, capture: { spoolDir: side } } };
}

const canMount = (() => {
  const d = mountTmpfs(64 * 1024);
  if (d) unmount(d);
  return d !== null;
})();

describe.skipIf(!canMount)("disk full in rollover durability (a small tmpfs; skipped when it cannot be mounted, i.e. not root)", () => {
  let origin: Origin;
  const mounts: string[] = [];
  beforeAll(async () => {
    origin = await startHttpOrigin();
  });
  afterAll(async () => {
    await origin?.close();
    for (const m of mounts.reverse()) unmount(m);
  });

  it("under load: every response a client got is archived once space is back, byte-exact and in order; 503 only past capture.retryMaxMs", async () => {
    const mnt = mountTmpfs(4 * 1024 * 1024)!;
    mounts.push(mnt);
    const warcDir = join(mnt, "warcs");
    const { side, config } = sideDir();
    const lathe = await startTestLathe({ ...config, warc: { maxFileBytes: 1_000_000 }, capture: { ...config.capture, retryMaxMs: 4000 } }, { warcDir });
    try {
      fill(mnt, 1_200_000);
      // Watch the captures waiting while the load runs.
      let mostWaiting = 0;
      const watch = setInterval(() => (mostWaiting = Math.max(mostWaiting, lathe.writers.get("lathe")?.state().waiting.captures ?? 0)), 20);
      // 3 clients × 20 unique incompressible payloads of 40–70 KB (2.2–3.1 MB, more than the
      // disk has left), and a client fetching one payload again and again (revisits).
      const { received, refused } = await sequentialLoad(lathe.proxyUrl, (w, i) => (w < 3 ? `${origin.url}/bytes/${40_000 + w * 10_000 + i * 17}?w=${w}&i=${i}` : `${origin.url}/bytes/30000?dup=${i}`), 4, 20);
      clearInterval(watch);
      expect(mostWaiting, "captures waited for the full disk").toBeGreaterThan(0);
      expect(received.length, `answered while the disk was full (${refused.length} refused)`).toBeGreaterThan(30);
      for (const r of refused) expect(r).toMatch(/capture\.retryMaxMs.*disk full/);

      const st = await statusOf(lathe);
      expect(st.waiting.captures).toBeGreaterThan(0);
      expect(st.waiting.failure).toMatch(/disk full/);
      expect(await (await fetch(`${lathe.controlUrl}/metrics`)).text()).toMatch(/^lathe_captures_waiting [1-9]/m);
      const live = (await (await fetch(`${lathe.controlUrl}/api/v1/live`)).json()) as { writers: Array<{ series: string; waiting: number; waitingBytes: number; failed: string | null }> };
      expect(live.writers.find((w) => w.series === "lathe")).toMatchObject({ waiting: st.waiting.captures, failed: expect.stringMatching(/disk full/) });
      // Past capture.retryMaxMs new exchanges are refused, saying why; nothing waiting is dropped.
      let refusal = "";
      for (let i = 0; i < 60 && !refusal; i++) {
        const url = `${origin.url}/text/${100 + i}?late=${i}`;
        const r = await viaProxy(lathe.proxyUrl, url);
        if (r.status === 503) refusal = r.body.toString();
        else if (r.status === 200) received.push({ url, sha1: sha1(r.body) });
        if (!refusal) await sleep(200);
      }
      expect(refusal).toMatch(/lathe cannot archive right now.*capture\.retryMaxMs \(4000\).*disk full/);
      expect((await statusOf(lathe)).waiting.refusing).toMatch(/retryMaxMs/);

      rmSync(join(mnt, "filler"));
      for (let i = 0; i < 150 && (await statusOf(lathe)).waiting.captures > 0; i++) await sleep(100);
      expect((await statusOf(lathe)).waiting).toMatchObject({ captures: 0, bytes: 0, failure: null, refusing: null });
      expect((await viaProxy(lathe.proxyUrl, `${origin.url}/text/10?after`)).status).toBe(200);
      received.push({ url: `${origin.url}/text/10?after`, sha1: sha1(Buffer.from("<p>hello lathe</p>\n".slice(0, 10))) });

      await lathe.stop();
      const reported = lathe.archiver.stats.captures;
      const crawlLog = join(side, readdirSync(side).find((f) => f.endsWith(".log"))!);
      await checkArchive(warcDir, received, { dedupDb: join(side, "dedup.sqlite3"), inOrder: true, crawlLog });
      const recs = await readAllWarcs(warcDir);
      expect(recs.filter((r) => r.type === "response" || r.type === "revisit").length).toBe(reported);
      expect(recs.some((r) => r.type === "revisit")).toBe(true);
    } finally {
      await lathe.stop();
    }
  }, 90_000);

  it("a graceful stop with captures waiting tries once more, then puts each in lost/ as a complete WARC of its own, logged with its URL", async () => {
    const mnt = mountTmpfs(1024 * 1024)!;
    mounts.push(mnt);
    const warcDir = join(mnt, "warcs");
    // lost/ is on a disk of its own with room: the WARC directory's is full.
    const lostDir = join(warcDir, "lost");
    mkdirSync(lostDir, { recursive: true });
    mounts.push(mountTmpfs(4 * 1024 * 1024, lostDir)!);
    const { side, config } = sideDir();
    const logs: Array<Record<string, unknown>> = [];
    const log = createLogger({ json: true, level: "warn", write: (l) => logs.push(JSON.parse(l) as Record<string, unknown>) });
    const lathe = await startTestLathe(config, { warcDir, log });
    fill(mnt, 16 * 1024);
    const urls = [0, 1, 2].map((i) => `${origin.url}/bytes/${100_000 + i}?lost=${i}`);
    const bodies = new Map<string, Buffer>();
    for (const url of urls) {
      const r = await viaProxy(lathe.proxyUrl, url);
      expect(r.status).toBe(200);
      bodies.set(url, r.body);
    }
    for (let i = 0; i < 100 && (await statusOf(lathe)).waiting.captures < 3; i++) await sleep(50);
    expect((await statusOf(lathe)).waiting.captures).toBe(3);
    const t0 = Date.now();
    await lathe.stop();
    expect(Date.now() - t0, "the stop does not wait out its grace period for captures that wait").toBeLessThan(9000);

    const files = readdirSync(lostDir).filter((f) => f.endsWith(".warc.gz"));
    expect(files.length).toBe(3);
    const lostUris: string[] = [];
    for (const f of files) {
      const recs = await readWarc(join(lostDir, f));
      expect(recs.map((r) => r.type)).toEqual(["warcinfo", "response", "request"]);
      for (const r of recs) expect(checkDigests(r)).toEqual([]);
      const uri = recs[1]!.get("WARC-Target-URI")!;
      expect(recs[1]!.body!.equals(bodies.get(uri)!), `${uri} byte-exact in ${f}`).toBe(true);
      lostUris.push(uri);
    }
    expect(lostUris.sort()).toEqual([...urls].sort());
    const lostLines = logs.filter((e) => e.event === "capture-lost");
    expect(lostLines.map((e) => e.uri).sort()).toEqual([...urls].sort());
    for (const e of lostLines) expect(String(e.file)).toContain(`${lostDir}/`);
    const report = lathe.archiver.troubles.report().lost;
    expect(report.count).toBe(3);
    expect(report.recent.map((x) => x.uri).sort()).toEqual([...urls].sort());
    // Nothing of them in the WARC directory itself, nor in the dedup index.
    expect(await readAllWarcs(warcDir)).toEqual([]);
    const db = new Database(join(side, "dedup.sqlite3"), { readonly: true });
    expect(db.prepare("SELECT count(*) AS n FROM entries").get()).toEqual({ n: 0 });
    db.close();
  }, 60_000);

  it("the WARC directory read-only (a read-only bind mount), then writable again: captures wait, 503 past capture.retryMaxBytes, then all are written", async () => {
    const warcDir = mkdtempSync(join(tmpdir(), "lathe-ro-"));
    const { side, config } = sideDir();
    let ro = false;
    const lathe = await startTestLathe({ ...config, warc: { idleRolloverMs: 300 }, capture: { ...config.capture, retryMaxBytes: 250_000 } }, { warcDir });
    try {
      const received: Received[] = [];
      const get = async (url: string) => {
        const r = await viaProxy(lathe.proxyUrl, url);
        if (r.status === 200) received.push({ url, sha1: sha1(r.body), worker: 0, seq: received.length });
        return r;
      };
      expect((await get(`${origin.url}/text/500?first`)).status).toBe(200);
      // Written, and its file closed when idle: a file open before the directory turns read-only stays writable.
      for (let i = 0; i < 100 && (lathe.writers.get("lathe")?.state().filesWritten.length ?? 0) < 1; i++) await sleep(50);
      expect(lathe.writers.get("lathe")!.state().filesWritten.length).toBe(1);
      readOnly(warcDir);
      ro = true;
      let refusal = "";
      for (let i = 0; i < 20 && !refusal; i++) {
        const r = await get(`${origin.url}/bytes/${60_000 + i}?ro=${i}`);
        if (r.status === 503) refusal = r.body.toString();
        else expect(r.status).toBe(200);
      }
      expect(refusal).toMatch(/capture\.retryMaxBytes \(250000\).*read-only file system/);
      expect(received.length).toBeGreaterThanOrEqual(5);
      const st = await statusOf(lathe);
      expect(st.waiting.captures).toBe(received.length - 1);
      expect(st.waiting.bytes).toBeGreaterThanOrEqual(250_000);

      writable(warcDir);
      ro = false;
      for (let i = 0; i < 150 && (await statusOf(lathe)).waiting.captures > 0; i++) await sleep(100);
      expect((await statusOf(lathe)).waiting.captures).toBe(0);
      expect((await get(`${origin.url}/text/600?after`)).status).toBe(200);
      await lathe.stop();
      const crawlLog = join(side, readdirSync(side).find((f) => f.endsWith(".log"))!);
      await checkArchive(warcDir, received, { dedupDb: join(side, "dedup.sqlite3"), inOrder: true, crawlLog });
    } finally {
      if (ro) writable(warcDir);
      await lathe.stop();
    }
  }, 60_000);

  it("the spool directory full while the WARC directory is not: captures are recorded truncated to what was kept, said in the record, the log and /status", async () => {
    const spool = mountTmpfs(512 * 1024)!;
    mounts.push(spool);
    const logs: Array<Record<string, unknown>> = [];
    const log = createLogger({ json: true, level: "warn", write: (l) => logs.push(JSON.parse(l) as Record<string, unknown>) });
    const lathe = await startTestLathe({ capture: { spoolDir: spool, spoolMemoryBytes: 65_536 } }, { log });
    try {
      fill(spool, 100_000);
      const n = 400_000;
      const urls = [0, 1].map((i) => `${origin.url}/bytes/${n}?spool=${i}`);
      for (const url of urls) {
        const r = await viaProxy(lathe.proxyUrl, url);
        expect(r.status).toBe(200);
        expect(r.body.equals(bytesOf(n, n)), "the client gets every byte").toBe(true);
      }
      // The clients have every byte before the spools have theirs (rollover durability does not
      // hold a response for its spool): space given back now would let a spool still writing
      // complete after all. So the two captures are recorded, and their temp files gone, first.
      for (let i = 0; i < 100 && lathe.archiver.stats.captures < 2; i++) await sleep(50);
      rmSync(join(spool, "filler"));
      for (let i = 0; i < 100 && readdirSync(spool).length > 0; i++) await sleep(50);
      const after = `${origin.url}/bytes/${n}?spool=after`;
      expect((await viaProxy(lathe.proxyUrl, after)).status).toBe(200);
      for (let i = 0; i < 100 && lathe.archiver.stats.captures < 3; i++) await sleep(50);
      const st = (await (await fetch(`${lathe.controlUrl}/api/v1/status`)).json()) as { spoolTruncated: { count: number; recent: Array<{ uri: string; reason: string }> } };
      expect(st.spoolTruncated.count).toBe(2);
      // In the order the captures reached the writer: the second exchange starts once the client
      // has the first's bytes, and may be written before the first's spool has taken in its
      // disk's refusal (file work is queued on libuv's threads, slow under a loaded machine).
      expect(st.spoolTruncated.recent.map((x) => x.uri).sort()).toEqual(urls);
      expect(st.spoolTruncated.recent[0]!.reason).toMatch(/no space left/i);
      expect(logs.filter((e) => e.event === "capture-truncated").map((e) => String(e.uri)).sort()).toEqual(urls);
      await lathe.stop();
      const recs = await readAllWarcs(lathe.dir);
      for (const r of recs) expect(checkDigests(r)).toEqual([]);
      for (const url of urls) {
        const res = recs.find((r) => r.type === "response" && r.get("WARC-Target-URI") === url)!;
        expect(res.get("WARC-Truncated")).toBe("unspecified");
        expect(res.body!.length).toBeGreaterThanOrEqual(65_536);
        expect(res.body!.length).toBeLessThan(n);
        expect(res.body!.equals(bytesOf(n, n).subarray(0, res.body!.length)), "what was kept is the start of the body").toBe(true);
      }
      const whole = recs.find((r) => r.type === "response" && r.get("WARC-Target-URI") === after)!;
      expect(whole.get("WARC-Truncated")).toBeUndefined();
      expect(whole.body!.equals(bytesOf(n, n))).toBe(true);
    } finally {
      await lathe.stop();
    }
  }, 60_000);
});
