/**
 * The read window of the gzip reader (src/warc/fileWindow.ts) over a real file several read
 * windows long: moving forward as the reader does (the read-ahead path), jumping back, asking
 * for more than a window, and the end of the file.
 */
import { randomBytes } from "node:crypto";
import { mkdtemp, open, rm, writeFile, type FileHandle } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FileWindow, MIN_AVAIL } from "../../src/warc/fileWindow.js";
import { READ } from "../../src/warc/readSource.js";

let dir = "";
let bytes: Buffer;
let fh: FileHandle;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "lathe-file-window-test-"));
  bytes = randomBytes(2 * READ + READ / 2 + 123);
  await writeFile(join(dir, "f.bin"), bytes);
  fh = await open(join(dir, "f.bin"), "r");
});
afterAll(async () => {
  await fh.close();
  await rm(dir, { recursive: true, force: true });
});

/** `ensure(pos, n)` returns the file from `pos`: at least `n` bytes, fewer only at the end. */
async function check(w: FileWindow, pos: number, n: number): Promise<Buffer> {
  const b = await w.ensure(pos, n);
  expect(b.length, `at ${pos}`).toBeGreaterThanOrEqual(Math.min(n, bytes.length - pos));
  expect(b.equals(bytes.subarray(pos, pos + b.length)), `bytes at ${pos}`).toBe(true);
  expect(w.start + (w.buf.length - b.length)).toBe(pos);
  return b;
}

describe("FileWindow", () => {
  it("moves forward through the file in member-sized steps", async () => {
    const w = new FileWindow(fh, bytes.length);
    let steps = 0;
    for (let pos = 0; pos < bytes.length; pos += 100_000 + ((pos * 7) % 900_000)) {
      await check(w, pos, MIN_AVAIL);
      await check(w, pos + 10, 8); // a trailer inside the window
      steps++;
    }
    expect(steps).toBeGreaterThan(20);
    await w.close();
  });

  it("jumps back, reads more than a window at once, and clips at the end of the file", async () => {
    const w = new FileWindow(fh, bytes.length);
    await check(w, READ + 5, MIN_AVAIL);
    await check(w, 3, MIN_AVAIL);
    await check(w, 7, 2 * READ);
    const end = await check(w, bytes.length - 10, MIN_AVAIL);
    expect(end.length).toBe(10);
    expect((await w.ensure(bytes.length, 8)).length).toBe(0);
    await w.close();
  });
});
