/**
 * A spool that cannot write its temp file (issue #26): with keepOnFailure (captures) it keeps
 * what it kept — the prefix that reached the file, or the bytes it held in memory before, when
 * fewer reached the file — and says why; without it, finish() fails as before.
 */
import { afterAll, describe, expect, it } from "vitest";
import { readdirSync } from "node:fs";
import { Spool } from "../../src/capture/spool.js";
import { fill, mountTmpfs, unmount } from "../helpers/tmpfs.js";

const pattern = (n: number) => Buffer.from(Array.from({ length: n }, (_, i) => (i * 31 + (i >> 8)) & 0xff));

async function readAll(s: Spool): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of s.createReadStream()) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

/** Write `data` in 16 KiB chunks, waiting for drain as a capture does. */
async function feed(s: Spool, data: Buffer): Promise<void> {
  for (let i = 0; i < data.length; i += 16 * 1024) if (!s.write(data.subarray(i, i + 16 * 1024))) await s.drained();
}

describe("a spool whose temp file cannot be written", () => {
  it("keepOnFailure: a temp file that cannot be created keeps the bytes held in memory before", async () => {
    const data = pattern(300_000);
    const s = new Spool({ memoryBytes: 64 * 1024, dir: "/nonexistent/lathe-spool-test", keepOnFailure: true });
    await feed(s, data);
    await s.finish();
    expect(s.cut).toMatch(/cannot spool to \/nonexistent.*ENOENT.*in memory/);
    expect(s.size).toBeGreaterThan(64 * 1024);
    expect(s.size).toBeLessThan(data.length);
    expect(s.onDisk).toBe(false);
    expect((await readAll(s)).equals(data.subarray(0, s.size))).toBe(true);
    await s.dispose();
  });

  it("without keepOnFailure, finish() fails as before", async () => {
    const s = new Spool({ memoryBytes: 1024, dir: "/nonexistent/lathe-spool-test" });
    await feed(s, pattern(10_000));
    await expect(s.finish()).rejects.toMatchObject({ code: "ERR_SPOOL" });
    expect(s.cut).toBeNull();
    await s.dispose();
  });
});

const mnt = mountTmpfs(1024 * 1024);
afterAll(() => {
  if (mnt) unmount(mnt);
});

describe.skipIf(!mnt)("a spool on a full disk (a tmpfs; root only)", () => {
  it("keepOnFailure: keeps the prefix that reached the file, reads back exactly that", async () => {
    fill(mnt!, 300 * 1024);
    const data = pattern(1_000_000);
    const s = new Spool({ memoryBytes: 64 * 1024, dir: mnt, keepOnFailure: true });
    await feed(s, data);
    await s.finish();
    expect(s.cut).toMatch(/ENOSPC.*on disk/);
    expect(s.onDisk).toBe(true);
    expect(s.size).toBeGreaterThan(64 * 1024);
    expect(s.size).toBeLessThanOrEqual(300 * 1024);
    expect((await readAll(s)).equals(data.subarray(0, s.size))).toBe(true);
    await s.dispose();
    expect(readdirSync(mnt!).filter((f) => f.startsWith("lathe-spool"))).toEqual([]);
  });
});

describe("a spool fed faster than its temp file takes it", () => {
  it("gives a paused producer its drain, and keeps every byte in order", async () => {
    // As forward.ts feeds it: 64 KiB socket chunks, pausing whenever the spool asks for a drain.
    // The producer runs ahead of the file in one turn, so the file asks for drains. (A version
    // that gathered chunks into fewer writes held bytes back from a drain and hung here.)
    const s = new Spool({ memoryBytes: 256 * 1024 });
    const data = pattern(8 * 1024 * 1024 + 12_345);
    let waits = 0;
    for (let i = 0; i < data.length; i += 64 * 1024) {
      s.write(data.subarray(i, i + 64 * 1024));
      if (s.needsDrain) {
        waits++;
        await s.drained();
      }
    }
    await s.finish();
    expect(waits).toBeGreaterThan(0); // the case above happened
    expect(s.onDisk).toBe(true);
    expect((await readAll(s)).equals(data)).toBe(true);
    await s.dispose();
  }, 20_000);
});
