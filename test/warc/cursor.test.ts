/**
 * The cursor over the decompressed data (src/warc/cursor.ts), on real gzip files of small
 * members so that data comes in several segments: reading ahead, views across segments,
 * consuming, and the three ways the record parser resyncs (drop the rest of a member, scan to
 * the next `WARC/1.`, pass a break).
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Cursor } from "../../src/warc/cursor.js";
import { GzipSource } from "../../src/warc/gzipSource.js";
import { fileOf, gzipMember, withBadCrc } from "./members.js";

let dir = "";
const open: Array<() => Promise<void>> = [];
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "lathe-cursor-test-"));
});
afterAll(async () => {
  for (const close of open.splice(0)) await close();
  await rm(dir, { recursive: true, force: true });
});

let files = 0;
/** A cursor over a gzip file with one member per text (`damaged`: members whose CRC is wrong). */
async function cursorOver(texts: string[], damaged: number[] = []) {
  const parts = texts.map((t, i) => (damaged.includes(i) ? withBadCrc(gzipMember(t)) : gzipMember(t)));
  const { fh, size } = await fileOf(dir, `f${files++}.warc.gz`, parts);
  const src = new GzipSource(fh, size, () => {});
  open.push(async () => {
    await src.close();
    await fh.close();
  });
  return new Cursor(src);
}

describe("Cursor", () => {
  it("reads ahead only as far as asked; views and consumes across members", async () => {
    const cur = await cursorOver(["abc", "defgh", "ij"]);
    expect(await cur.need(1)).toBe("ok");
    expect(cur.avail).toBe(3);
    expect(cur.first().toString()).toBe("abc");
    const m0 = cur.member();
    expect(await cur.need(5)).toBe("ok");
    expect(cur.view(5).toString()).toBe("abcde");
    cur.advance(4);
    expect(cur.u).toBe(4);
    expect(cur.last).not.toBe(m0);
    expect(cur.first().toString()).toBe("efgh");
    expect(await cur.need(100)).toBe("eof");
    expect(cur.avail).toBe(6);
    expect(await cur.skip(5)).toBe("ok");
    expect(cur.first().toString()).toBe("j");
    expect(await cur.skip(2)).toBe("eof");
  });

  it("tells whether the next member starts with a given prefix", async () => {
    const split = await cursorOver(["WARC/1.1 one", "continued", "WARC/1.1 two"]);
    await split.need(1);
    expect(await split.nextMemberStartsWith(split.member(), Buffer.from("WARC/"))).toBe(false);
    const whole = await cursorOver(["WARC/1.1 one", "WARC/1.1 two"]);
    await whole.need(1);
    expect(await whole.nextMemberStartsWith(whole.member(), Buffer.from("WARC/"))).toBe(true);
  });

  it("drops the rest of a member", async () => {
    const cur = await cursorOver(["WARC/1.1 bad", "WARC/1.1 next"]);
    await cur.need(1);
    cur.advance(3);
    await cur.dropMember(cur.member());
    expect(cur.u).toBe(12);
    expect(cur.first().toString()).toBe("WARC/1.1 next");
  });

  it("scans to the next `WARC/1.`, also when members split it", async () => {
    const cur = await cursorOver(["WARC/1.1 bad", "xxWAR", "C/1.0 next"]);
    await cur.need(1);
    await cur.scanToWarcLine();
    expect(cur.u).toBe(14);
    await cur.need(8);
    expect(cur.view(8).toString()).toBe("WARC/1.0");
  });

  it("stops at a damaged member; passing the break goes on with the next member", async () => {
    const cur = await cursorOver(["first", "lost", "third"], [1]);
    expect(await cur.need(100)).toBe("break");
    expect(cur.avail).toBe(5);
    expect(cur.breakMember()).toBeNull();
    cur.passBreak();
    expect(cur.u).toBe(5);
    expect(await cur.need(1)).toBe("ok");
    expect(cur.first().toString()).toBe("third");
    expect(cur.member().ustart).toBe(cur.u);
  });
});
