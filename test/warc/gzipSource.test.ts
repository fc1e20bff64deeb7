/**
 * The gzip members of a file as the reader finds them (src/warc/gzipSource.ts), on files built
 * member by member: exact boundaries (from each gzip header through its 8-byte trailer) with or
 * without 'sl', empty members passed, and damage — bad CRC, junk between members, a truncated
 * member — reported at the member's offset as a break, the members after it still exact.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { GzipSource } from "../../src/warc/gzipSource.js";
import type { Break, Seg } from "../../src/warc/readSource.js";
import { boundaries, fileOf, gzipMember, withBadCrc } from "./members.js";

let dir = "";
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "lathe-gzip-source-test-"));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** Everything a GzipSource delivers for a file of `parts`, and the damage it reports. */
async function readAll(name: string, parts: Buffer[]) {
  const { fh, size } = await fileOf(dir, name, parts);
  const reports: Array<[number, string]> = [];
  const src = new GzipSource(fh, size, (offset, reason) => reports.push([offset, reason]));
  const out: Array<Seg | Break> = [];
  try {
    for (let x = await src.next(); x !== null; x = await src.next()) out.push(x);
    expect(src.position()).toBe(size);
  } finally {
    await src.close();
    await fh.close();
  }
  return { out, reports };
}

/** A segment as [cstart, cend, ustart, uend, text] for comparing. */
function seg(x: Seg | Break) {
  return x.kind === "data" ? [x.m.cstart, x.m.cend, x.m.ustart, x.m.uend, x.data.toString()] : x;
}

const texts = ["WARC/1.1\r\nfirst\r\n\r\n", "WARC/1.1\r\nsecond record\r\n\r\n", "WARC/1.1\r\nthird\r\n\r\n".repeat(50)];

describe("GzipSource", () => {
  it("delivers each member's data with its exact boundaries, in order", async () => {
    const parts = texts.map((t) => gzipMember(t));
    const b = boundaries(parts);
    const { out, reports } = await readAll("plain.warc.gz", parts);
    expect(reports).toEqual([]);
    let u = 0;
    expect(out.map(seg)).toEqual(
      texts.map((t, i) => {
        const row = [b[i]![0], b[i]![0] + b[i]![1], u, u + t.length, t];
        u += t.length;
        return row;
      }),
    );
  });

  it("honours 'sl', passes optional header fields, and ignores an 'sl' that points past the file", async () => {
    const parts = [gzipMember(texts[0]!, { sl: "exact" }), gzipMember(texts[1]!, { name: "x.warc", hcrc: true }), gzipMember(texts[2]!, { sl: { clen: 1 << 30, ulen: 3 } })];
    const b = boundaries(parts);
    const { out, reports } = await readAll("sl.warc.gz", parts);
    expect(reports).toEqual([]);
    expect(out.map((x) => (x.kind === "data" ? [x.m.cstart, x.m.cend - x.m.cstart, x.data.toString()] : x))).toEqual(texts.map((t, i) => [...b[i]!, t]));
  });

  it("passes an empty member without delivering anything", async () => {
    const parts = [gzipMember(texts[0]!), gzipMember(""), gzipMember(texts[1]!)];
    const b = boundaries(parts);
    const { out } = await readAll("empty.warc.gz", parts);
    expect(out.map((x) => (x as Seg).m.cstart)).toEqual([b[0]![0], b[2]![0]]);
  });

  it("a CRC mismatch: reported at the member, a break, the next member exact", async () => {
    const parts = texts.map((t) => gzipMember(t));
    const b = boundaries(parts);
    const bad = withBadCrc(parts[1]!);
    const { out, reports } = await readAll("crc.warc.gz", [parts[0]!, bad, parts[2]!]);
    expect(reports).toEqual([[b[1]![0], expect.stringMatching(/CRC32\/ISIZE mismatch/)]]);
    expect(out.map(seg)).toEqual([
      [b[0]![0], b[0]![0] + b[0]![1], 0, texts[0]!.length, texts[0]],
      { kind: "break", offset: b[1]![0], m: null },
      [b[2]![0], b[2]![0] + b[2]![1], texts[0]!.length, texts[0]!.length + texts[2]!.length, texts[2]],
    ]);
  });

  it("junk between members: reported once where it starts; a false magic in it is a further break, not reported; reading resumes at the next member", async () => {
    const parts = texts.map((t) => gzipMember(t));
    // With a false gzip magic in it: the candidate member there fails too, silently.
    const junk = Buffer.concat([Buffer.from("not gzip at all "), Buffer.from([0x1f, 0x8b, 0x08, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff]), Buffer.from(" more junk")]);
    const { out, reports } = await readAll("junk.warc.gz", [parts[0]!, junk, parts[1]!, parts[2]!]);
    const at = parts[0]!.length;
    expect(reports).toEqual([[at, expect.stringMatching(/not a gzip member/)]]);
    const falseMagic = at + junk.indexOf(Buffer.from([0x1f, 0x8b, 0x08]));
    expect(out.filter((x) => x.kind === "break")).toEqual([
      { kind: "break", offset: at, m: null },
      { kind: "break", offset: falseMagic, m: null },
    ]);
    expect(out.filter((x): x is Seg => x.kind === "data").map((x) => [x.m.cstart, x.data.toString()])).toEqual([
      [0, texts[0]],
      [at + junk.length, texts[1]],
      [at + junk.length + parts[1]!.length, texts[2]],
    ]);
  });

  it("a file that ends inside a member: reported as truncated at the member, then the end", async () => {
    const parts = texts.map((t) => gzipMember(t));
    const b = boundaries(parts);
    for (const cut of [5, 20, parts[2]!.length - 4]) {
      const { out, reports } = await readAll(`cut-${cut}.warc.gz`, [parts[0]!, parts[1]!, parts[2]!.subarray(0, cut)]);
      expect(reports, `cut at ${cut}`).toEqual([[b[2]![0], expect.stringMatching(/^truncated/)]]);
      expect(out.length).toBe(3);
      expect(out[2]).toEqual({ kind: "break", offset: b[2]![0], m: null });
    }
  });
});
