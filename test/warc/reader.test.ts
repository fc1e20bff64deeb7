/**
 * The WARC reader (src/warc/reader.ts) on every conformance file (read in place), on damaged
 * copies of them in a temp dir, on files whose members hold several records or split records,
 * and on members large enough to take the streaming path.
 */
import { createReadStream } from "node:fs";
import { mkdtemp, readFile, readdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable } from "node:stream";
import { gunzipSync, gzipSync, inflateRawSync } from "node:zlib";
import { WARCParser } from "warcio";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { randomIds, recordId } from "../../src/core/ids.js";
import { silentLogger } from "../../src/core/log.js";
import { systemClock } from "../../src/core/clock.js";
import { digestOf } from "../../src/warc/digest.js";
import { buildResponse } from "../../src/warc/records.js";
import { parseHttpHead, readWarcRecords, WarcReadError, type ReadWarcOptions, type WarcRecord } from "../../src/warc/reader.js";
import { createWarcWriter } from "../../src/warc/writer.js";
import { describeUsing, sharedDir } from "../helpers/shared.js";

const CONFORMANCE = sharedDir("conformance/warcs", "LATHE_CONFORMANCE_WARCS");
const CONF = CONFORMANCE.path;

let tmp = "";
let files: string[] = [];
beforeAll(async () => {
  tmp = await mkdtemp(join(tmpdir(), "lathe-reader-test-"));
});
afterAll(async () => {
  await rm(tmp, { recursive: true, force: true });
});

async function readAll(path: string, opts: ReadWarcOptions = {}) {
  const reader = readWarcRecords(path, opts);
  const records: WarcRecord[] = [];
  for await (const r of reader) records.push(r);
  return { records, errors: reader.errors, warnings: reader.warnings, reader };
}

async function warcioTypes(path: string): Promise<string[]> {
  const parser = new WARCParser(createReadStream(path));
  const types: string[] = [];
  for await (const r of parser) {
    types.push(r.warcType ?? "");
    await r.skipFully();
  }
  return types;
}

interface CdxjLine {
  offset: string;
  length: string;
  url: string;
}
async function cdxj(name: string): Promise<CdxjLine[]> {
  const text = await readFile(join(CONF, `${name}.cdxj`), "utf8");
  return text
    .split("\n")
    .filter(Boolean)
    .map((l) => JSON.parse(l.slice(l.indexOf("{"))) as CdxjLine);
}

/** Member boundaries by an independent walk: raw inflate from each header (fixed 10 bytes + FEXTRA/FNAME). */
function gzipMembers(buf: Buffer): Array<[number, number]> {
  const out: Array<[number, number]> = [];
  let p = 0;
  while (p < buf.length) {
    const flg = buf[p + 3]!;
    let h = 10;
    if (flg & 4) h += 2 + buf.readUInt16LE(p + 10);
    if (flg & 8) h = buf.indexOf(0, p + h) - p + 1;
    if (flg & 16) h = buf.indexOf(0, p + h) - p + 1;
    if (flg & 2) h += 2;
    const r = inflateRawSync(buf.subarray(p + h), { info: true }) as unknown as { engine: { bytesWritten: number } };
    const len = h + r.engine.bytesWritten + 8;
    out.push([p, len]);
    p += len;
  }
  return out;
}

describeUsing(CONFORMANCE, "readWarcRecords on every conformance file", () => {
  beforeAll(async () => {
    files = (await readdir(CONF)).filter((f) => /\.warc(\.gz)?$/.test(f)).sort();
  });

  it("finds the conformance files", () => {
    expect(files.length).toBeGreaterThanOrEqual(25);
  });

  it("reads the same records as warcio, with offsets/lengths equal to the .cdxj files and exact member boundaries", async () => {
    for (const name of files) {
      const path = join(CONF, name);
      const { records, errors } = await readAll(path);
      expect(errors, name).toEqual([]);
      expect(records.map((r) => r.warcType), name).toEqual(await warcioTypes(path));

      // Every cdxj line names a record we found, with the same offset and length.
      const byOffset = new Map(records.map((r) => [r.offset, r]));
      for (const line of await cdxj(name)) {
        const r = byOffset.get(Number(line.offset));
        expect(r, `${name} offset ${line.offset}`).toBeDefined();
        expect(r!.length, `${name} offset ${line.offset}`).toBe(Number(line.length));
      }

      const buf = await readFile(path);
      if (name.endsWith(".gz")) {
        // One member per record in every conformance file: offsets/lengths are exactly the members.
        expect(records.map((r) => [r.offset, r.length]), name).toEqual(gzipMembers(buf));
        for (const r of records) {
          expect(r.aligned).toBe(true);
          expect(buf[r.offset]).toBe(0x1f);
          expect(buf[r.offset + 1]).toBe(0x8b);
          const rec = gunzipSync(buf.subarray(r.offset, r.offset + r.length));
          expect(rec.subarray(0, 5).toString()).toBe("WARC/");
          const end = r.headerLength + r.contentLength;
          if (r.trailerOk) expect(rec.length).toBe(end + 4);
          else expect(rec.length - end).toBeLessThan(4);
          expect(rec.subarray(r.headerLength, end).equals(await r.readBlock())).toBe(true);
        }
      } else {
        for (const r of records) {
          const rec = buf.subarray(r.offset, r.offset + r.length);
          expect(rec.subarray(0, 5).toString()).toBe("WARC/");
          expect(r.length).toBe(r.headerLength + r.contentLength);
          expect(rec.subarray(r.headerLength).equals(await r.readBlock())).toBe(true);
        }
      }
    }
  });

  it("re-reads blocks from the file when they were not kept (gzip and plain)", async () => {
    for (const name of files) {
      const path = join(CONF, name);
      const kept = await readAll(path);
      const lean = await readAll(path, { keepBlockBytes: 0, prefixBytes: 16 });
      expect(lean.records.length).toBe(kept.records.length);
      for (let i = 0; i < kept.records.length; i++) {
        const a = kept.records[i]!;
        const b = lean.records[i]!;
        expect([b.offset, b.length]).toEqual([a.offset, a.length]);
        if (a.contentLength > 16) expect(b.blockKept).toBe(false);
        expect((await b.readBlock()).equals(await a.readBlock()), `${name} record ${i}`).toBe(true);
        const chunks: Buffer[] = [];
        for await (const c of b.blockStream()) chunks.push(c);
        expect(Buffer.concat(chunks).equals(await a.readBlock())).toBe(true);
      }
    }
  });

  it("parses WARC headers: versions, `<>` around WARC-Target-URI, repeated fields, the HTTP head", async () => {
    const heritrix = await readAll(join(CONF, "heritrix-3.1.1-gov.uk-revisits.warc.gz"));
    expect(new Set(heritrix.records.map((r) => r.version))).toEqual(new Set(["WARC/1.0"]));

    const wget = await readAll(join(CONF, "warcio-example-wget-bad-target-uri.warc.gz"));
    const resp = wget.records.find((r) => r.warcType === "response")!;
    expect(resp.get("warc-target-uri")).toBe("<http://example.com/>");
    expect(resp.targetUri).toBe("http://example.com/");
    const head = resp.httpHead()!;
    expect(head.status).toBe(200);
    expect(head.get("content-type")).toMatch(/^text\/html/);

    const https = await readAll(join(CONF, "wget-https.warc.gz"));
    const req = https.records.find((r) => r.warcType === "request")!;
    expect(req.httpHead()!.method).toBe("GET");
    expect(req.httpHead()!.status).toBeNull();

    const warcprox = await readAll(join(CONF, "warcprox-capture.warc.gz"));
    const rev = warcprox.records.find((r) => r.warcType === "revisit")!;
    expect(rev.get("WARC-Refers-To")).toMatch(/^<urn:uuid:/);
    expect(rev.httpHead()!.status).toBe(200);
    const info = warcprox.records[0]!;
    expect(info.warcType).toBe("warcinfo");
    expect(info.httpHead()).toBeNull();
    expect(info.recordId).toMatch(/^<urn:uuid:/);
  });

  it("reads the 'sl' extra field file and reports the bad trailers and the short Content-Length as warnings", async () => {
    const sl = await readAll(join(CONF, "jwarc-gzip_extra_sl.warc.gz"));
    expect(sl.records.map((r) => r.warcType)).toEqual(["warcinfo"]);
    expect(sl.errors).toEqual([]);

    const ex = await readAll(join(CONF, "pywb-example.warc"));
    expect(ex.errors).toEqual([]);
    expect(ex.warnings.map((w) => w.offset)).toEqual([4061, 4764]);
    expect(ex.records.map((r) => r.offset)).toEqual([0, 460, 2451, 3161, 4061, 4771]);

    const agn = await readAll(join(CONF, "pywb-example-url-agnostic-revisit.warc.gz"));
    expect(agn.errors).toEqual([]);
    expect(agn.records.every((r) => r.aligned)).toBe(true);
  });
});

describeUsing(CONFORMANCE, "damaged files: reported with file and offset, the rest still read", () => {
  let iana: Buffer;
  let members: Array<[number, number]>;
  let total: number;
  beforeAll(async () => {
    iana = await readFile(join(CONF, "pywb-iana.warc.gz"));
    members = gzipMembers(iana);
    total = members.length;
  });

  async function damaged(name: string, bytes: Buffer) {
    const path = join(tmp, name);
    await writeFile(path, bytes);
    return { path, ...(await readAll(path)) };
  }

  it("truncated mid-member", async () => {
    const [off] = members[100]!;
    const r = await damaged("trunc.warc.gz", iana.subarray(0, off + 50));
    expect(r.records.length).toBe(100);
    expect(r.errors).toEqual([{ file: r.path, offset: off, reason: expect.stringMatching(/truncated/) }]);
  });

  it("flipped bytes in deflate data (data error or CRC mismatch): that record lost, every other one read", async () => {
    let dataErrors = 0;
    let crcErrors = 0;
    for (const i of [10, 11, 40]) {
      for (const frac of [0.1, 0.5, 0.9]) {
        const [off, len] = members[i]!;
        const b = Buffer.from(iana);
        const at = off + 10 + Math.floor((len - 18) * frac);
        b[at] ^= 0xa5;
        b[at + 1] ^= 0x3c;
        b[at + 2] ^= 0xff;
        const r = await damaged(`flip-${i}-${frac}.warc.gz`, b);
        expect(r.errors.length, `member ${i} at ${frac}`).toBe(1);
        expect(r.errors[0]!.offset).toBe(off);
        expect(r.errors[0]!.file).toBe(r.path);
        if (/data error/.test(r.errors[0]!.reason)) dataErrors++;
        else if (/CRC32/.test(r.errors[0]!.reason)) crcErrors++;
        expect(r.records.length).toBe(total - 1);
        expect(r.records.some((x) => x.offset === off)).toBe(false);
        // Offsets after the damage are still exact.
        expect(r.records.slice(i).map((x) => x.offset)).toEqual(members.slice(i + 1).map(([o]) => o));
      }
    }
    expect(dataErrors).toBeGreaterThan(0);
    expect(crcErrors).toBeGreaterThan(0);
  });

  it("a broken gzip header, junk between members, junk at the end", async () => {
    const [off5] = members[5]!;
    const h = Buffer.from(iana);
    h[off5] = 0;
    const r1 = await damaged("hdr.warc.gz", h);
    expect(r1.errors).toEqual([{ file: r1.path, offset: off5, reason: expect.stringMatching(/not a gzip member/) }]);
    expect(r1.records.length).toBe(total - 1);

    const [off3] = members[3]!;
    const r2 = await damaged("junk.warc.gz", Buffer.concat([iana.subarray(0, off3), Buffer.from("garbage!!"), iana.subarray(off3)]));
    expect(r2.errors).toEqual([{ file: r2.path, offset: off3, reason: expect.stringMatching(/not a gzip member/) }]);
    expect(r2.records.length).toBe(total);
    expect(r2.records[3]!.offset).toBe(off3 + 9);

    const r3 = await damaged("tail.warc.gz", Buffer.concat([iana, Buffer.from("trailing junk\n")]));
    expect(r3.errors).toEqual([{ file: r3.path, offset: iana.length, reason: expect.stringMatching(/not a gzip member/) }]);
    expect(r3.records.length).toBe(total);
  });

  it("a member whose content is not a WARC record", async () => {
    const [off7, len7] = members[7]!;
    const bogus = gzipSync(Buffer.from("this is not a WARC record\r\n\r\n"));
    const b = Buffer.concat([iana.subarray(0, off7), bogus, iana.subarray(off7 + len7)]);
    const r = await damaged("bogus.warc.gz", b);
    expect(r.errors).toEqual([{ file: r.path, offset: off7, reason: expect.stringMatching(/not a WARC record/) }]);
    expect(r.records.length).toBe(total - 1);
  });

  it("plain .warc: truncated, bad Content-Length, junk between records", async () => {
    const plain = await readFile(join(CONF, "wget-uncompressed.warc"));
    const good = (await readAll(join(CONF, "wget-uncompressed.warc"))).records;

    const t = await damaged("trunc.warc", plain.subarray(0, good[5]!.offset + 100));
    expect(t.records.length).toBe(5);
    expect(t.errors).toEqual([{ file: t.path, offset: good[5]!.offset, reason: expect.stringMatching(/truncated/) }]);

    const t2 = await damaged("trunc2.warc", plain.subarray(0, good[5]!.offset + good[5]!.headerLength + 10));
    expect(t2.records.length).toBe(5);
    expect(t2.errors).toEqual([{ file: t2.path, offset: good[5]!.offset, reason: expect.stringMatching(/truncated: the file ends inside the record/) }]);

    const s = plain.toString("latin1");
    const at = s.indexOf("Content-Length:", good[1]!.offset);
    const bad = Buffer.from(s.slice(0, at) + "Content-Length: zz" + s.slice(at + 18), "latin1");
    const c = await damaged("badcl.warc", bad);
    expect(c.errors).toEqual([{ file: c.path, offset: good[1]!.offset, reason: expect.stringMatching(/Content-Length/) }]);
    expect(c.records.map((r) => r.offset)).toEqual(good.filter((_, i) => i !== 1).map((r) => r.offset));

    const j = await damaged("junk.warc", Buffer.from(s.slice(0, good[1]!.offset) + "x".repeat(100_000) + s.slice(good[1]!.offset), "latin1"));
    expect(j.errors).toEqual([{ file: j.path, offset: good[1]!.offset, reason: expect.stringMatching(/not a WARC record/) }]);
    expect(j.records.length).toBe(good.length);
    expect(j.records[1]!.offset).toBe(good[1]!.offset + 100_000);
  });

  it("a Content-Length far too large: reported, and the records after it still read (gzip, plain)", async () => {
    const plain = await readFile(join(CONF, "wget-uncompressed.warc"));
    const good = (await readAll(join(CONF, "wget-uncompressed.warc"))).records;
    const bogus = (i: number) => {
      const g = good[i]!;
      const head = plain.subarray(g.offset, g.offset + g.headerLength).toString("latin1").replace(/Content-Length: \d+/i, "Content-Length: 99999999");
      return Buffer.concat([Buffer.from(head, "latin1"), plain.subarray(g.offset + g.headerLength, g.offset + g.length + 4)]);
    };
    const p = await damaged("bigcl.warc", Buffer.concat([plain.subarray(0, good[2]!.offset), bogus(2), plain.subarray(good[3]!.offset)]));
    expect(p.errors).toEqual([{ file: p.path, offset: good[2]!.offset, reason: expect.stringMatching(/Content-Length 99999999/) }]);
    expect(p.records.map((r) => r.warcType)).toEqual(good.filter((_, i) => i !== 2).map((r) => r.warcType));

    const members = good.map((g, i) => (i === 2 ? gzipSync(bogus(2)) : gzipSync(plain.subarray(g.offset, g.offset + g.length + 4))));
    const z = await damaged("bigcl.warc.gz", Buffer.concat(members));
    const off2 = members[0]!.length + members[1]!.length;
    expect(z.errors).toEqual([{ file: z.path, offset: off2, reason: "Content-Length 99999999 runs past the end of its gzip member" }]);
    expect(z.records.length).toBe(good.length - 1);
    expect(z.records.every((r) => r.aligned)).toBe(true);
  });

  it("garbage inside a single-member file: reading resumes at the next record", async () => {
    const plain = await readFile(join(CONF, "wget-uncompressed.warc"));
    const good = (await readAll(join(CONF, "wget-uncompressed.warc"))).records;
    const g = good[4]!;
    const bytes = Buffer.concat([plain.subarray(0, g.offset), Buffer.from("#".repeat(5000)), plain.subarray(g.offset + g.length + 4)]);
    const r = await damaged("whole-garbage.warc.gz", gzipSync(bytes));
    expect(r.errors).toEqual([{ file: r.path, offset: 0, reason: expect.stringMatching(/5000 bytes that are not a WARC record/) }]);
    expect(r.records.map((x) => x.warcType)).toEqual(good.filter((_, i) => i !== 4).map((x) => x.warcType));
  });

  it("an empty file has no records and no errors; a missing file throws WarcReadError", async () => {
    const e = await damaged("empty.warc.gz", Buffer.alloc(0));
    expect(e.records).toEqual([]);
    expect(e.errors).toEqual([]);
    await expect(readAll(join(tmp, "nope.warc.gz"))).rejects.toBeInstanceOf(WarcReadError);
  });
});

describeUsing(CONFORMANCE, "files that are not one member per record", () => {
  it("one gzip member for the whole file: every record read, offsets point at the member", async () => {
    const plain = await readFile(join(CONF, "wget-uncompressed.warc"));
    const good = (await readAll(join(CONF, "wget-uncompressed.warc"))).records;
    const path = join(tmp, "whole.warc.gz");
    await writeFile(path, gzipSync(plain));
    const r = await readAll(path);
    expect(r.errors).toEqual([]);
    expect(r.records.map((x) => x.warcType)).toEqual(good.map((x) => x.warcType));
    expect(r.records.every((x) => !x.aligned && x.offset === 0)).toBe(true);
    expect(r.warnings.length).toBe(1);
    for (let i = 0; i < good.length; i++) expect((await r.records[i]!.readBlock()).equals(await good[i]!.readBlock())).toBe(true);
    // Blocks not kept are found again inside the member.
    const lean = await readAll(path, { keepBlockBytes: 0, prefixBytes: 8 });
    for (let i = 0; i < good.length; i++) expect((await lean.records[i]!.readBlock()).equals(await good[i]!.readBlock())).toBe(true);
  });

  it("records split over two members: offset of the first, length through the last", async () => {
    const plain = await readFile(join(CONF, "wget-uncompressed.warc"));
    const good = (await readAll(join(CONF, "wget-uncompressed.warc"))).records;
    const parts: Buffer[] = [];
    const expected: Array<[number, number, boolean]> = [];
    let pos = 0;
    for (const g of good) {
      const rec = plain.subarray(g.offset, g.offset + g.length + 4);
      const ms = g.length > 700 ? [gzipSync(rec.subarray(0, 600)), gzipSync(rec.subarray(600))] : [gzipSync(rec)];
      const len = ms.reduce((n, m) => n + m.length, 0);
      expected.push([pos, len, ms.length === 1]);
      parts.push(...ms);
      pos += len;
    }
    const path = join(tmp, "split.warc.gz");
    await writeFile(path, Buffer.concat(parts));
    const r = await readAll(path);
    expect(r.errors).toEqual([]);
    expect(r.records.map((x) => [x.offset, x.length, x.aligned])).toEqual(expected);
    for (let i = 0; i < good.length; i++) expect((await r.records[i]!.readBlock()).equals(await good[i]!.readBlock())).toBe(true);
  });

  it("several records in one member, then one per member", async () => {
    const plain = await readFile(join(CONF, "wget-uncompressed.warc"));
    const good = (await readAll(join(CONF, "wget-uncompressed.warc"))).records;
    const cut = good[3]!.offset;
    const first = gzipSync(plain.subarray(0, cut));
    const rest = good.slice(3).map((g) => gzipSync(plain.subarray(g.offset, g.offset + g.length + 4)));
    const path = join(tmp, "mixed.warc.gz");
    await writeFile(path, Buffer.concat([first, ...rest]));
    const r = await readAll(path);
    expect(r.errors).toEqual([]);
    expect(r.records.length).toBe(good.length);
    expect(r.records.slice(0, 3).map((x) => [x.offset, x.length, x.aligned])).toEqual([0, 1, 2].map(() => [0, first.length, false]));
    let pos = first.length;
    for (let i = 3; i < good.length; i++) {
      expect([r.records[i]!.offset, r.records[i]!.length, r.records[i]!.aligned]).toEqual([pos, rest[i - 3]!.length, true]);
      pos += rest[i - 3]!.length;
    }
  });
});

describe("large members (streaming path) and the 'sl' field, written by lathe's writer", () => {
  async function writeBig(dir: string, skipLength: boolean): Promise<{ path: string; bodies: Buffer[] }> {
    const w = createWarcWriter({
      dir,
      prefix: "big",
      gzip: true,
      skipLength,
      version: "1.1",
      digest: "sha1",
      maxFileBytes: 1e12,
      idleRolloverMs: 0,
      durability: "rollover",
      warcinfo: { operator: "o", description: "d", isPartOf: "p", robots: "r", httpHeaderUserAgent: "u", httpHeaderFrom: "f", extra: {} },
      software: "lathe/test",
      hostname: "h",
      ip: "192.0.2.1",
      clock: systemClock,
      ids: randomIds,
      log: silentLogger,
    });
    // Small; 6 MB random (compressed beyond the read window); 80 MB of one byte (inflates beyond 64 MiB); small.
    const { randomBytes } = await import("node:crypto");
    const bodies = [Buffer.from("small"), randomBytes(6_000_000), Buffer.alloc(80_000_000, 0x61), Buffer.from("after")];
    for (const [i, body] of bodies.entries()) {
      const head = Buffer.from(`HTTP/1.1 200 OK\r\nContent-Length: ${body.length}\r\n\r\n`);
      const src = { size: body.length, createReadStream: () => Readable.from([body]) };
      await w.write([
        buildResponse(
          recordId(randomIds.uuid()),
          { dateMicros: systemClock.nowMicros(), targetUri: `http://example.com/${i}`, protocols: ["http/1.1"] },
          { head, body: src, blockDigest: digestOf("sha1", head, body), payloadDigest: digestOf("sha1", body), truncated: null },
          "1.1",
        ),
      ]);
    }
    await w.close();
    const name = (await readdir(dir)).find((n) => n.endsWith(".warc.gz"))!;
    return { path: join(dir, name), bodies };
  }

  for (const skipLength of [false, true]) {
    it(`reads exact members and blocks (skipLength ${skipLength})`, async () => {
      const dir = await mkdtemp(join(tmp, "big-"));
      const { path, bodies } = await writeBig(dir, skipLength);
      const buf = await readFile(path);
      const r = await readAll(path);
      expect(r.errors).toEqual([]);
      expect(r.records.map((x) => x.warcType)).toEqual(["warcinfo", "response", "response", "response", "response"]);
      expect(r.records.map((x) => [x.offset, x.length])).toEqual(gzipMembers(buf));
      expect(r.records[3]!.blockKept).toBe(false);
      for (const [i, body] of bodies.entries()) {
        const rec = r.records[i + 1]!;
        expect(rec.httpHead()!.status).toBe(200);
        expect(rec.httpHead()!.get("content-length")).toBe(String(body.length));
        const block = await rec.readBlock();
        expect(block.subarray(rec.httpHead()!.length).equals(body)).toBe(true);
      }
    });
  }
});

describe("parseHttpHead", () => {
  it("parses status lines, request lines, folded and repeated fields; null for non-HTTP blocks", () => {
    const h = parseHttpHead(Buffer.from("HTTP/1.1 404 Not Found\r\nSet-Cookie: a=1\r\nSet-Cookie: b=2\r\nX-Long: one\r\n two\r\n\r\nbody"))!;
    expect(h.status).toBe(404);
    expect(h.getAll("set-cookie")).toEqual(["a=1", "b=2"]);
    expect(h.get("x-long")).toBe("one two");
    expect(h.length).toBe(h.startLine.length + 2 + "Set-Cookie: a=1\r\nSet-Cookie: b=2\r\nX-Long: one\r\n two\r\n\r\n".length);
    const q = parseHttpHead(Buffer.from("POST /submit?x=1 HTTP/1.1\r\nHost: a\r\n\r\n"))!;
    expect([q.method, q.requestTarget, q.status]).toEqual(["POST", "/submit?x=1", null]);
    expect(parseHttpHead(Buffer.from("software: wget\r\nformat: WARC\r\n\r\n"))).toBeNull();
    expect(parseHttpHead(Buffer.from("HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n"))).toBeNull();
    expect(parseHttpHead(Buffer.from("HTTP/1.0 200 OK\nServer: old\n\n"))!.get("server")).toBe("old");
  });
});
