/**
 * CDX query semantics (issue "CDXJ index") on a generated sorted index of a few thousand lines:
 * each parameter's answer is checked against a brute-force reading of the same lines, through
 * the binary search on the file (split over a file and lines in memory, as live indexes are),
 * and the search reads a handful of blocks, never the file.
 */
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { formatCdxj, sortLines, type IndexEntry } from "../../src/index/cdxj.js";
import { CdxQueryError, formatLine, parseCdxQuery, relatedLines, runQuery, type CdxLine } from "../../src/index/query.js";
import { MemoryLines, SortedFile, type LineSource } from "../../src/index/sortedFile.js";
import { surt } from "../../src/index/surt.js";

let dir = "";
let all: string[] = [];
let file: SortedFile;
let fileB: SortedFile;
let mem: MemoryLines;

const HOSTS = ["http://example.com", "https://www.example.com", "http://sub.example.com", "http://deep.sub.example.com", "http://example.org", "http://other.net:8080", "http://com"];
const PATHS = ["/", "/a", "/a/", "/a/b", "/a/b?x=1", "/ab", "/b?z=2&y=1", "/pages/p1", "/pages/p2", "/img.png"];

function entries(): IndexEntry[] {
  const out: IndexEntry[] = [];
  let n = 0;
  for (const h of HOSTS) {
    for (const p of PATHS) {
      const url = h + p;
      for (let i = 0; i < 25; i++) {
        n++;
        const ts = String(20200101000000 + ((i * 7919 + n * 13) % 5) * 10000000000 + i * 1000000 + (n % 60)).slice(0, 14);
        const revisit = i % 5 === 4;
        out.push({
          key: surt(url),
          timestamp: ts,
          url,
          mime: revisit ? "warc/revisit" : p.endsWith(".png") ? "image/png" : "text/html",
          status: i % 7 === 3 ? "404" : "200",
          digest: `sha1:D${String(n).padStart(31, "X")}`,
          length: String(400 + n),
          offset: String(n * 1000),
          filename: `f-${i % 3}.warc.gz`,
        });
      }
    }
  }
  const page = "http://example.com/a";
  for (const [u, mime] of [
    [`urn:view:${page}`, "image/png"],
    [`urn:fullPage:${page}`, "image/png"],
    [`urn:text:${page}`, "text/plain"],
    [`urn:video:00001:${page}`, "video/mp4"],
    [`urn:video:00002:${page}`, "video/mp4"],
    [`screenshot:${page}`, "image/png"],
    [`thumbnail:${page}`, "image/jpeg"],
    [`urn:view:${page}/`, "image/png"], // another page's (exact strings only)
    [`urn:view:http://example.org/`, "image/png"],
  ] as const) {
    out.push({ key: surt(u), timestamp: "20230101000000", url: u, mime, digest: "sha1:R", length: "10", offset: "1", filename: "r.warc.gz" });
  }
  return out;
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "lathe-cdx-query-"));
  all = sortLines(entries().map(formatCdxj)).map((l) => l.slice(0, -1));
  // Most lines in one file; every 5th in a second file; every 7th in memory (an open file).
  const a = all.filter((_, i) => i % 5 !== 0 && i % 7 !== 0);
  const b = all.filter((_, i) => i % 5 === 0 && i % 7 !== 0);
  const m = all.filter((_, i) => i % 7 === 0);
  await writeFile(join(dir, "a.cdxj"), a.join("\n") + "\n");
  await writeFile(join(dir, "b.cdxj"), b.join("\n") + "\n");
  file = await SortedFile.open(join(dir, "a.cdxj"));
  fileB = await SortedFile.open(join(dir, "b.cdxj"));
  mem = new MemoryLines(m);
});

afterAll(async () => {
  await file?.close();
  await fileB?.close();
  await rm(dir, { recursive: true, force: true });
});

const sources = (): LineSource[] => [file, fileB, mem];
const q = (params: Record<string, string | string[]>) => {
  const u = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) for (const x of Array.isArray(v) ? v : [v]) u.append(k, x);
  return parseCdxQuery(u);
};
const run = async (params: Record<string, string | string[]>): Promise<string[]> => {
  const out: string[] = [];
  for await (const l of runQuery(q(params), sources())) out.push(l.line);
  return out;
};
const keyOf = (l: string) => l.slice(0, l.indexOf(" "));
const tsOf = (l: string) => l.split(" ")[1]!;
const js = (l: string) => JSON.parse(l.slice(l.indexOf("{"))) as Record<string, string>;
const hostPart = (k: string) => k.split(")/")[0]!;

describe("matchType", () => {
  it("exact: the lines of the URL's key, in order", async () => {
    const got = await run({ url: "http://www.example.com/a/b?x=1" });
    expect(got).toEqual(all.filter((l) => keyOf(l) === "com,example)/a/b?x=1"));
    expect(got.length).toBe(50); // http://example.com and https://www.example.com share the key
    expect(await run({ url: "http://example.com/nothing" })).toEqual([]);
  });
  it("prefix: keys starting with the URL's key; `url*` means the same", async () => {
    const want = all.filter((l) => keyOf(l).startsWith("com,example)/a"));
    expect(await run({ url: "example.com/a", matchType: "prefix" })).toEqual(want);
    expect(await run({ url: "example.com/a*" })).toEqual(want);
    expect(await run({ url: "example.com/a/", matchType: "prefix" })).toEqual(all.filter((l) => keyOf(l).startsWith("com,example)/a/")));
  });
  it("host: every path of the host, not its subdomains", async () => {
    const got = await run({ url: "example.com/anything", matchType: "host" });
    expect(got).toEqual(all.filter((l) => hostPart(keyOf(l)) === "com,example"));
    expect(got.length).toBe(2 * PATHS.length * 25);
  });
  it("domain: the host and its subdomains; `*.example.com` means the same", async () => {
    const want = all.filter((l) => hostPart(keyOf(l)) === "com,example" || hostPart(keyOf(l)).startsWith("com,example,"));
    expect(await run({ url: "example.com", matchType: "domain" })).toEqual(want);
    expect(await run({ url: "*.example.com" })).toEqual(want);
    expect(want.some((l) => keyOf(l).startsWith("com,example,sub,deep)/"))).toBe(true);
    // A TLD: `com,` covers every .com host, not the host "com".
    const tld = await run({ url: "com", matchType: "domain" });
    expect(tld).toEqual(all.filter((l) => keyOf(l).startsWith("com,")));
  });
});

describe("from, to, limit, sort", () => {
  it("from/to clamp by timestamp, padded down and up", async () => {
    const base = all.filter((l) => hostPart(keyOf(l)) === "com,example");
    expect(await run({ url: "example.com/", matchType: "host", from: "2022", to: "2023" })).toEqual(base.filter((l) => tsOf(l) >= "20220101000000" && tsOf(l) <= "20231231235959"));
    expect(await run({ url: "example.com/", matchType: "host", from: "20220615" })).toEqual(base.filter((l) => tsOf(l) >= "20220615000000"));
  });
  it("limit takes the first lines; sort=reverse the last ones, descending", async () => {
    const base = all.filter((l) => keyOf(l).startsWith("com,example)/"));
    expect(await run({ url: "example.com/", matchType: "prefix", limit: "7" })).toEqual(base.slice(0, 7));
    expect(await run({ url: "example.com/", matchType: "prefix", sort: "reverse" })).toEqual([...base].reverse());
    expect(await run({ url: "example.com/", matchType: "prefix", sort: "reverse", limit: "5", from: "2021" })).toEqual([...base].reverse().filter((l) => tsOf(l) >= "20210101000000").slice(0, 5));
  });
  it("reads forward and backward across many blocks, file and memory merged", async () => {
    const com = all.filter((l) => keyOf(l).startsWith("com,"));
    expect(com.length).toBeGreaterThanOrEqual(1000);
    expect(await run({ url: "com", matchType: "domain" })).toEqual(com);
    expect(await run({ url: "com", matchType: "domain", sort: "reverse" })).toEqual([...com].reverse());
  });
  it("reads backward through a block that starts with a line's LF", async () => {
    // The first block read backward starts 4096 bytes before the end. With 91-byte lines after a
    // first line of 7, that byte is an LF (91 × 45 = 4095): the block's first line ends at its
    // first byte, and the scan used to go round to the block's end again (lines twice, or no end).
    const lines = ["a 00000", ...Array.from({ length: 99 }, (_, i) => `b ${String(i).padStart(5, "0")} ${"x".repeat(82)}`)];
    const path = join(dir, "lf-boundary.cdxj");
    await writeFile(path, lines.join("\n") + "\n");
    const f = await SortedFile.open(path);
    try {
      const size = f.size;
      expect(size).toBe(7 + 1 + 99 * 91);
      expect((await readFile(path))[size - 4096]).toBe(0x0a);
      const back: string[] = [];
      for await (const l of f.backward("a", "c")) {
        back.push(l);
        if (back.length > lines.length) break;
      }
      expect(back).toEqual([...lines].reverse());
    } finally {
      await f.close();
    }
  });
  it("sort=closest: nearest timestamps first, ties to the earlier", async () => {
    const base = all.filter((l) => keyOf(l) === "com,example)/pages/p1");
    const secs = (t: string) => Date.UTC(+t.slice(0, 4), +t.slice(4, 6) - 1, +t.slice(6, 8), +t.slice(8, 10), +t.slice(10, 12), +t.slice(12, 14)) / 1000;
    for (const closest of ["20220301120000", "2019", "2030", tsOf(base[10]!)]) {
      const c = secs(closest.padEnd(14, closest.length === 4 ? "0101000000".slice(0, 14 - closest.length) : "0"));
      const want = base
        .map((l, i) => ({ l, i, d: Math.abs(secs(tsOf(l)) - c) }))
        .sort((x, y) => x.d - y.d || x.i - y.i)
        .map((x) => x.l);
      expect(await run({ url: "http://example.com/pages/p1", sort: "closest", closest, limit: "10" })).toEqual(want.slice(0, 10));
    }
    expect((await run({ url: "http://example.com/pages/p1", sort: "closest", closest: "2022" })).length).toBe(base.length);
  });
});

describe("filter, output, fl", () => {
  it("filter: regex from the start, = exact, ~ contains, ! inverts, several are ANDed", async () => {
    const base = all.filter((l) => hostPart(keyOf(l)) === "com,example");
    const h = { url: "example.com/", matchType: "host" };
    expect(await run({ ...h, filter: "status:40" })).toEqual(base.filter((l) => js(l).status?.startsWith("40")));
    expect(await run({ ...h, filter: "status:0" })).toEqual([]); // regex anchored at the start
    expect(await run({ ...h, filter: "=mime:warc/revisit" })).toEqual(base.filter((l) => js(l).mime === "warc/revisit"));
    expect(await run({ ...h, filter: "!=mime:warc/revisit" })).toEqual(base.filter((l) => js(l).mime !== "warc/revisit"));
    expect(await run({ ...h, filter: "~url:/pages/" })).toEqual(base.filter((l) => js(l).url!.includes("/pages/")));
    expect(await run({ ...h, filter: ["=statuscode:200", "mimetype:text/.*", "!filename:f-1"] })).toEqual(
      base.filter((l) => js(l).status === "200" && js(l).mime!.startsWith("text/") && !js(l).filename!.startsWith("f-1")),
    );
    expect(await run({ ...h, filter: "~sha1:DX" })).toEqual([]);
    expect(await run({ ...h, filter: "~www.example" })).toEqual(base.filter((l) => l.includes("www.example"))); // no field: the whole line
    expect((await run({ ...h, filter: "~www.example" })).length).toBe(250);
  });
  it("output=cdxj (lines as stored), json (one object per line), text (CDX fields); fl picks fields", async () => {
    const [line] = await run({ url: "http://example.com/img.png", limit: "1" });
    const parsed: CdxLine = { line: line!, key: keyOf(line!), timestamp: tsOf(line!), json: js(line!) };
    const j = js(line!);
    expect(formatLine(parsed, { output: "cdxj", fl: null })).toBe(line + "\n");
    expect(JSON.parse(formatLine(parsed, { output: "json", fl: null }))).toEqual({ urlkey: keyOf(line!), timestamp: tsOf(line!), ...j });
    expect(formatLine(parsed, { output: "text", fl: null })).toBe(`${keyOf(line!)} ${tsOf(line!)} ${j.url} ${j.mime} ${j.status} ${j.digest!.slice(5)} - - ${j.length} ${j.offset} ${j.filename}\n`);
    const fl = q({ url: "x", fl: "timestamp,original,statuscode,nosuch" }).fl;
    expect(formatLine(parsed, { output: "text", fl })).toBe(`${tsOf(line!)} ${j.url} ${j.status} -\n`);
    expect(JSON.parse(formatLine(parsed, { output: "json", fl }))).toEqual({ timestamp: tsOf(line!), url: j.url, status: j.status });
    expect(formatLine(parsed, { output: "cdxj", fl })).toBe(`${keyOf(line!)} ${tsOf(line!)} ${JSON.stringify({ url: j.url, status: j.status })}\n`);
  });
});

describe("related resources", () => {
  it("finds urn:<type>:<url> (any type, with an id or not), screenshot: and thumbnail: of exactly that URL", async () => {
    const got: string[] = [];
    for await (const l of relatedLines(["http://example.com/a"], sources())) got.push(js(l.line).url!);
    expect(got.sort()).toEqual(
      [
        "urn:view:http://example.com/a",
        "urn:fullPage:http://example.com/a",
        "urn:text:http://example.com/a",
        "urn:video:00001:http://example.com/a",
        "urn:video:00002:http://example.com/a",
        "screenshot:http://example.com/a",
        "thumbnail:http://example.com/a",
      ].sort(),
    );
  });
});

describe("bad parameters name themselves", () => {
  it.each([
    [{}, "url"],
    [{ url: "x", matchType: "fuzzy" }, "matchType"],
    [{ url: "x", from: "2020-01" }, "from"],
    [{ url: "x", to: "abc" }, "to"],
    [{ url: "x", limit: "0" }, "limit"],
    [{ url: "x", limit: "ten" }, "limit"],
    [{ url: "x", sort: "sideways" }, "sort"],
    [{ url: "x", sort: "closest" }, "closest"],
    [{ url: "x", sort: "closest", closest: "2020", matchType: "prefix" }, "sort"],
    [{ url: "x", output: "xml" }, "output"],
    [{ url: "x", fl: "url,,mime" }, "fl"],
    [{ url: "x", filter: "url:(" }, "filter"],
    [{ url: "x", related: "yes" }, "related"],
    [{ url: "x", collection: "Bad Name" }, "collection"],
    [{ url: "x", bogus: "1" }, "bogus"],
    [{ url: ["x", "y"] }, "url"],
  ] as Array<[Record<string, string | string[]>, string]>)("%j → %s", (params, name) => {
    let err: unknown;
    try {
      q(params);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(CdxQueryError);
    expect((err as CdxQueryError).param).toBe(name);
  });
});

describe("binary search", () => {
  it("reads a few blocks per query, not the file", async () => {
    expect(file.size).toBeGreaterThan(200_000);
    const before = file.reads;
    await run({ url: "http://other.net:8080/pages/p2" });
    expect(file.reads - before).toBeLessThan(60);
  });
  it("seek finds the first line >= any probe, for every line of the file", async () => {
    const lines = all.filter((_, i) => i % 5 !== 0 && i % 7 !== 0);
    let pos = 0;
    const starts: number[] = [];
    for (const l of lines) {
      starts.push(pos);
      pos += Buffer.byteLength(l) + 1;
    }
    for (let i = 0; i < lines.length; i += 97) {
      expect(await file.seek(lines[i]!)).toBe(starts[i]);
      expect(await file.seek(lines[i]! + "\u0000")).toBe(starts[i + 1] ?? pos);
    }
    expect(await file.seek("")).toBe(0);
    expect(await file.seek("\u00ff")).toBe(file.size);
  });
});
