import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync, readdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { bytesOf, startHttpOrigin, type Origin } from "../helpers/origin.js";
import { startTestLathe, type TestLathe } from "../helpers/lathe.js";
import { viaProxy } from "../helpers/client.js";
import { checkDigests, readAllWarcs } from "../helpers/warcs.js";

/** A real small file system (tmpfs) that fills up; needs root, as CI has. */
function mountTmpfs(bytes: number): string | null {
  const dir = mkdtempSync(join(tmpdir(), "lathe-tmpfs-"));
  try {
    execFileSync("mount", ["-t", "tmpfs", "-o", `size=${bytes}`, "tmpfs", dir], { stdio: "ignore" });
    return dir;
  } catch {
    return null;
  }
}

const mnt = mountTmpfs(2 * 1024 * 1024);

describe.skipIf(!mnt)("disk full (a 2 MiB tmpfs; skipped when tmpfs cannot be mounted, i.e. not root)", () => {
  let origin: Origin;
  let lathe: TestLathe;
  const warcDir = mnt ? join(mnt, "warcs") : "";
  const filler = mnt ? join(mnt, "filler") : "";

  beforeAll(async () => {
    origin = await startHttpOrigin();
    writeFileSync(filler, Buffer.alloc(1024 * 1024));
    // strict: a client that saw a complete response knows it is archived.
    lathe = await startTestLathe({ warc: { dir: warcDir, durability: "strict" }, capture: { spoolDir: tmpdir() } });
  });
  afterAll(async () => {
    await lathe?.stop();
    await origin?.close();
    if (mnt) execFileSync("umount", [mnt]);
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
