/**
 * When the writer fsyncs (warc-files.md §6): `rollover` (default) syncs the file at close, before
 * the rename, and the directory after it, never per group; `strict` also syncs after every group,
 * before write() resolves. The file-system seam records the order of the calls.
 */
import { afterAll, describe, expect, it } from "vitest";
import { Durability } from "../../src/warc/durability.js";
import { createWarcWriter, nodeWriterFs, type WarcFileHandle, type WriterFs } from "../../src/warc/writer.js";
import { captureGroup, removeTempDirs, tempDir, writerOpts } from "./helpers.js";

afterAll(removeTempDirs);

function tracingFs() {
  const calls: string[] = [];
  const fs: WriterFs = {
    ...nodeWriterFs,
    async open(p, flags, mode) {
      const fh = await nodeWriterFs.open(p, flags, mode);
      const h: WarcFileHandle = {
        write: async (b, o, l, pos) => {
          if (calls.at(-1) !== "write") calls.push("write");
          return fh.write(b, o, l, pos);
        },
        sync: async () => {
          calls.push("sync");
          return fh.sync();
        },
        truncate: (n) => fh.truncate(n),
        close: () => fh.close(),
      };
      return h;
    },
    rename: async (a, b) => {
      calls.push("rename");
      return nodeWriterFs.rename(a, b);
    },
    syncDir: async (d) => {
      calls.push("syncDir");
      return nodeWriterFs.syncDir(d);
    },
  };
  return { calls, fs };
}

describe("warc.durability", () => {
  it("rollover: no fsync per group; fsync(file) before the rename at close, fsync(dir) after it", async () => {
    const { calls, fs } = tracingFs();
    const w = createWarcWriter(writerOpts(await tempDir(), { fs, durability: "rollover" }));
    await w.write(captureGroup("https://example.com/a", Buffer.from("a")));
    await w.write(captureGroup("https://example.com/b", Buffer.from("b")));
    expect(calls.filter((c) => c === "sync" || c === "syncDir")).toEqual([]);
    await w.close();
    const tail = calls.slice(calls.indexOf("sync"));
    expect(tail).toEqual(["sync", "rename", "syncDir"]);
  });

  it("strict: fsync(file) after every group, before write() resolves; then the same at close", async () => {
    const { calls, fs } = tracingFs();
    const w = createWarcWriter(writerOpts(await tempDir(), { fs, durability: "strict" }));
    await w.write(captureGroup("https://example.com/a", Buffer.from("a")));
    expect(calls.at(-1)).toBe("sync");
    const n = calls.filter((c) => c === "sync").length;
    await w.write(captureGroup("https://example.com/b", Buffer.from("b")));
    expect(calls.filter((c) => c === "sync").length).toBe(n + 1);
    expect(calls.at(-1)).toBe("sync");
    await w.close();
    expect(calls.slice(-3)).toEqual(["sync", "rename", "syncDir"]);
  });
});

describe("Durability on its own", () => {
  for (const mode of ["rollover", "strict"] as const) {
    it(`${mode}: what each step of a file's life fsyncs`, async () => {
      const dir = await tempDir();
      const { calls, fs } = tracingFs();
      const d = new Durability(mode, fs, dir);
      const fh = await fs.open(`${dir}/x.open`, "wx", 0o644);
      calls.length = 0;
      const steps: Record<string, string[]> = {};
      for (const [step, run] of [
        ["created", () => d.created()],
        ["appended", () => d.appended(fh)],
        ["closing", () => d.closing(fh)],
        ["renamed", () => d.renamed()],
      ] as const) {
        await run();
        steps[step] = calls.splice(0);
      }
      await fh.close();
      const strict = mode === "strict";
      expect(steps).toEqual({ created: strict ? ["syncDir"] : [], appended: strict ? ["sync"] : [], closing: ["sync"], renamed: ["syncDir"] });
    });
  }
});
