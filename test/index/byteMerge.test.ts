/**
 * The byte-level k-way merge (src/index/byteMerge.ts) against the line-string merge it replaced
 * for files (`mergeSorted` over `fileLines`, readline's line ends): same bytes out on random
 * sorted inputs with every kind of line end, with buffers small enough that lines cross reads
 * and outgrow them; unsorted inputs named by line; a failing sink leaves no open file.
 */
import { mkdtemp, readdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mergeIndexFiles } from "../../src/index/byteMerge.js";
import { compareLines } from "../../src/index/cdxj.js";
import { fileLines, mergeSorted, UnsortedInputError } from "../../src/index/sortMerge.js";
import { prng } from "../helpers/prng.js";

let tmp = "";
beforeAll(async () => {
  tmp = await mkdtemp(join(tmpdir(), "lathe-bytemerge-"));
});
afterAll(async () => {
  await rm(tmp, { recursive: true, force: true });
});

// Characters that sort differently by UTF-16 unit and by UTF-8 byte (the surrogate pair), and
// controls below LF, so the order of "a\n" and "a\t…" matters.
const ALPHABET = ["a", "b", "c", ",", ")", "/", " ", "{", "\t", "é", "\uffe0", "😀", "z"];

function randomLine(r: () => number): string {
  const len = Math.floor(r() * r() * 40); // mostly short, some long, some empty
  let s = "";
  for (let i = 0; i < len; i++) s += ALPHABET[Math.floor(r() * ALPHABET.length)];
  return s;
}

/** A sorted file's text: lines in compareLines order, each ended by LF, CRLF or CR; maybe no last end. */
function sortedText(r: () => number, lines: number, shared: string[]): string {
  const ls: string[] = [];
  for (let i = 0; i < lines; i++) ls.push(r() < 0.2 && shared.length ? shared[Math.floor(r() * shared.length)]! : randomLine(r));
  ls.sort((a, b) => compareLines(a + "\n", b + "\n"));
  let text = "";
  for (const [i, l] of ls.entries()) {
    const last = i === ls.length - 1;
    const x = r();
    // A lone CR before an empty next line would read as CRLF: only LF or CRLF there.
    const nextEmpty = !last && ls[i + 1] === "";
    text += l + (last && x < 0.3 ? "" : x < 0.6 ? "\n" : x < 0.8 || nextEmpty ? "\r\n" : "\r");
  }
  return text;
}

async function viaStrings(paths: string[]): Promise<string> {
  let out = "";
  for await (const l of mergeSorted(paths.map((p) => fileLines(p).source))) out += l;
  return out;
}

async function viaBytes(paths: string[], bufferBytes: number): Promise<{ text: string; lines: number }> {
  const chunks: Buffer[] = [];
  const lines = await mergeIndexFiles(paths, async (c) => void chunks.push(Buffer.from(c)), { bufferBytes });
  return { text: Buffer.concat(chunks).toString("utf8"), lines };
}

describe("mergeIndexFiles", () => {
  it("writes what the line-string merge writes, on 60 seeded random cases and buffer sizes from 8 bytes", async () => {
    for (let seed = 1; seed <= 60; seed++) {
      const r = prng(seed).next;
      const shared = Array.from({ length: 5 }, () => randomLine(r));
      const k = 1 + Math.floor(r() * 5);
      const paths: string[] = [];
      for (let i = 0; i < k; i++) {
        const p = join(tmp, `case-${seed}-${i}.cdxj`);
        await writeFile(p, r() < 0.1 ? "" : sortedText(r, Math.floor(r() * 300), shared));
        paths.push(p);
      }
      const expected = await viaStrings(paths);
      for (const size of [8, 61, 4096]) {
        const got = await viaBytes(paths, size);
        expect(got.text, `seed ${seed}, buffer ${size}`).toBe(expected);
        expect(got.lines).toBe(expected === "" ? 0 : expected.split("\n").length - 1);
      }
    }
  });

  it("identical lines once, within a file and across files; the earlier input's copy first", async () => {
    const a = join(tmp, "dup-a.cdxj");
    const b = join(tmp, "dup-b.cdxj");
    await writeFile(a, "k 1 {}\nk 1 {}\nm 2 {}\n");
    await writeFile(b, "k 1 {}\nm 2 {}\nm 3 {}");
    expect(await viaBytes([a, b, a], 16)).toEqual({ text: "k 1 {}\nm 2 {}\nm 3 {}\n", lines: 3 });
  });

  it("an input that goes backwards: UnsortedInputError naming the file and line, even when the lines straddle a read", async () => {
    const good = join(tmp, "good.cdxj");
    const bad = join(tmp, "bad.cdxj");
    await writeFile(good, "a\nb\nc\n");
    await writeFile(bad, `${"x".repeat(30)} 1\n${"x".repeat(30)} 2\n${"w".repeat(30)}\n`);
    const e = await mergeIndexFiles([good, bad], async () => {}, { bufferBytes: 8 }).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(UnsortedInputError);
    expect((e as UnsortedInputError).file).toBe(bad);
    expect((e as UnsortedInputError).line).toBe(3);
  });

  it("a sink that fails: the merge rejects with its error and leaves no input open", async () => {
    const a = join(tmp, "sink-a.cdxj");
    await writeFile(a, Array.from({ length: 2000 }, (_, i) => `line ${String(i).padStart(5, "0")}\n`).join(""));
    const before = (await readdir("/proc/self/fd")).length;
    let calls = 0;
    const e = await mergeIndexFiles(
      [a, a],
      async () => {
        if (++calls === 2) throw new Error("disk full");
      },
      { bufferBytes: 1024 },
    ).catch((x: unknown) => x);
    expect((e as Error).message).toBe("disk full");
    expect((await readdir("/proc/self/fd")).length).toBe(before);
  });

  it("a missing input: rejects naming it, and the inputs opened before it are closed", async () => {
    const a = join(tmp, "present.cdxj");
    await writeFile(a, "a\n");
    const before = (await readdir("/proc/self/fd")).length;
    await expect(mergeIndexFiles([a, join(tmp, "absent.cdxj")], async () => {})).rejects.toThrow(/absent\.cdxj/);
    expect((await readdir("/proc/self/fd")).length).toBe(before);
  });
});
