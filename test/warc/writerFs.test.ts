/**
 * The writer's file handle writes through fs's callback API on the fd (issue #25), which
 * FileHandle does not track: its close, truncate and sync must wait for the writes in flight.
 * (The race itself, a close reaching the kernel before a queued write, cannot be forced from
 * here; these check what must hold around it, and that a write fs refuses leaves none in flight.)
 */
import { mkdtempSync, readFileSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { nodeWriterFs } from "../../src/warc/writerFs.js";

const dir = mkdtempSync(join(tmpdir(), "lathe-writerfs-"));

describe("nodeWriterFs handles", () => {
  it("close waits for the writes in flight, which land whole", async () => {
    const path = join(dir, "a.warc");
    const h = await nodeWriterFs.open(path, "w", 0o644);
    const parts = Array.from({ length: 16 }, (_, i) => Buffer.alloc(1024 * 1024, i));
    const writes = [h.writev!(parts.slice(0, 8), 0), h.write(Buffer.concat(parts.slice(8)), 0, 8 * 1024 * 1024, 8 * 1024 * 1024)];
    const closed = h.close();
    const sizes = await Promise.all(writes);
    await closed;
    expect(sizes.map((s) => s.bytesWritten)).toEqual([8 * 1024 * 1024, 8 * 1024 * 1024]);
    const back = readFileSync(path);
    expect(back.length).toBe(16 * 1024 * 1024);
    for (let i = 0; i < 16; i++) expect(back[i * 1024 * 1024 + 5]).toBe(i);
  });

  it("truncate waits for a write in flight; a closed handle refuses writes", async () => {
    const path = join(dir, "b.warc");
    const h = await nodeWriterFs.open(path, "w", 0o644);
    const big = 4 * 1024 * 1024;
    const w = h.write(Buffer.alloc(big, 7), 0, big, 0);
    await h.truncate(1000);
    await w;
    expect(statSync(path).size).toBe(1000);
    await h.close();
    await expect(h.write(Buffer.from("x"), 0, 1, 0)).rejects.toThrow();
  });

  it("a write that fs refuses at once leaves nothing in flight: close still resolves", async () => {
    const h = await nodeWriterFs.open(join(dir, "c.warc"), "w", 0o644);
    await expect(h.write(Buffer.from("abc"), 0, 10, 0)).rejects.toThrow();
    await h.close();
  });
});
