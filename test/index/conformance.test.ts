/**
 * The index of every conformance WARC (and of the spec's golden lathe example) equals, byte for
 * byte, the `.cdxj` stored beside it (cdxj-indexer --sort --post-append, with the digest
 * correction of cdxj-and-surt.md §2); `--cdx11` equals `wget-http.warc.gz.cdx`. Both through the
 * library and through `lathe index` (stdout and --output).
 */
import { readdirSync, readFileSync } from "node:fs";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { indexCommand } from "../../src/cli/index.js";
import { buildIndex } from "../../src/index/build.js";
import { isIndexed } from "../../src/index/cdxj.js";
import { readWarcRecords } from "../../src/warc/reader.js";
import { describeUsing, sharedDir } from "../helpers/shared.js";

const CONFORMANCE = sharedDir("conformance/warcs");
const GOLDEN = sharedDir("spec/examples");
const CONF = CONFORMANCE.path;
const EXAMPLES = GOLDEN.path;
const warcsIn = (dir: string) =>
  readdirSync(dir)
    .filter((f) => /\.warc(\.gz)?$/.test(f))
    .sort()
    .map((f) => join(dir, f));
/** Every WARC of both directories (listed while the tests are collected: none when one is absent). */
const ALL = CONFORMANCE.present && GOLDEN.present ? [...warcsIn(CONF), ...warcsIn(EXAMPLES)] : [];

async function collect(lines: AsyncIterable<string>): Promise<string> {
  let s = "";
  for await (const l of lines) s += l;
  return s;
}

async function cli(args: string[]) {
  let out = "";
  let err = "";
  const code = await indexCommand(args, (s) => (out += s), { err: (s) => (err += s), isTTY: false });
  return { code, out, err };
}

let tmp = "";
beforeAll(async () => {
  tmp = await mkdtemp(join(tmpdir(), "lathe-cdxj-conf-"));
});
afterAll(async () => {
  await rm(tmp, { recursive: true, force: true });
});

describeUsing([CONFORMANCE, GOLDEN], "CDXJ conformance: every WARC's index equals its stored .cdxj", () => {
  it("finds the 27 conformance files and the 3 golden examples", () => {
    expect(warcsIn(CONF).length).toBe(27);
    expect(warcsIn(EXAMPLES).length).toBe(3);
  });

  it.each(ALL.map((f) => [basename(f), f]))("%s", async (_name, f) => {
    const got = await collect(buildIndex([f], { format: "cdxj" }));
    expect(got).toBe(readFileSync(f + ".cdxj", "utf8"));
  });

  it("--cdx11 equals wget-http.warc.gz.cdx", async () => {
    const f = join(CONF, "wget-http.warc.gz");
    const got = await collect(buildIndex([f], { format: "cdx11" }));
    expect(got).toBe(readFileSync(f + ".cdx", "utf8"));
  });

  it("records without WARC-Payload-Digest get the SHA-1 of their payload, not of nothing (§2)", async () => {
    let computed = 0;
    for (const f of warcsIn(CONF)) for await (const r of readWarcRecords(f)) if (isIndexed(r) && !r.get("warc-payload-digest")) computed++;
    expect(computed).toBe(25); // wget/wpull resource and metadata records, Heritrix dns: responses
    const wget = readFileSync(join(CONF, "wget-http.warc.gz.cdxj"), "utf8");
    expect(wget).toContain('"url": "metadata://gnu.org/software/wget/warc/MANIFEST.txt", "mime": "text/plain", "digest": "sha1:D3MWFYQ6P52ABM2D6VURD3VRDLPUVGBR"');
  });
});

describeUsing([CONFORMANCE, GOLDEN], "lathe index --cdxj / --cdx11", () => {
  it("writes the sorted index of one file to stdout", async () => {
    const f = join(CONF, "warcprox-capture.warc.gz");
    const r = await cli(["--cdxj", f]);
    expect(r.code).toBe(0);
    expect(r.err).toBe("");
    expect(r.out).toBe(readFileSync(f + ".cdxj", "utf8"));
  });

  it("writes every conformance file's index with --output (one run per file)", async () => {
    for (const f of ALL) {
      const o = join(tmp, basename(f) + ".cdxj");
      const r = await cli(["--cdxj", "--output", o, f]);
      expect(r.code, r.err).toBe(0);
      expect(r.out).toBe("");
      expect(await readFile(o, "utf8"), basename(f)).toBe(readFileSync(f + ".cdxj", "utf8"));
    }
  });

  it("--cdx11 -o FILE", async () => {
    const f = join(CONF, "wget-http.warc.gz");
    const o = join(tmp, "wget-http.cdx");
    const r = await cli(["--cdx11", "-o", o, f]);
    expect(r.code).toBe(0);
    expect(await readFile(o, "utf8")).toBe(readFileSync(f + ".cdx", "utf8"));
  });

  it("many files make one sorted index: the sorted union of their indexes", async () => {
    const files = [join(CONF, "wget-http.warc.gz"), join(CONF, "pywb-iana.warc.gz"), join(CONF, "wget-uncompressed.warc")];
    const r = await cli(["--cdxj", ...files]);
    expect(r.code).toBe(0);
    const expected = files.flatMap((f) => readFileSync(f + ".cdxj", "utf8").split("\n").filter(Boolean));
    expected.sort((a, b) => Buffer.compare(Buffer.from(a + "\n"), Buffer.from(b + "\n")));
    expect(r.out).toBe(expected.map((l) => l + "\n").join(""));
    const cdx = await cli(["--cdx11", join(CONF, "wget-http.warc.gz"), join(CONF, "wget-https.warc.gz")]);
    expect(cdx.out.split("\n").filter((l) => l.startsWith(" CDX")).length).toBe(1); // the header once
    expect(cdx.out.startsWith(" CDX N b a m s k r M S V g\n")).toBe(true);
  });

  it("an external sort with a tiny memory budget gives the same index", async () => {
    const f = join(CONF, "pywb-iana.warc.gz");
    const got = await collect(buildIndex([f], { format: "cdxj", memoryChars: 4096, tmpDir: tmp }));
    expect(got).toBe(readFileSync(f + ".cdxj", "utf8"));
    expect(readdirSync(tmp).filter((n) => n.startsWith("lathe-sort-"))).toEqual([]); // runs removed
  });
});
