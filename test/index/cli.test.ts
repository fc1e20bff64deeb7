/**
 * `lathe index --cdxj|--cdx11|--merge` (src/cli/index.ts + src/index/build.ts): usage errors,
 * the progress bar only on a terminal, damaged and missing files (exit 1, the rest indexed),
 * atomic --output, and the streaming k-way merge of sorted index files.
 */
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { indexCommand, type IndexIo } from "../../src/cli/index.js";
import { mergeIndexesTo } from "../../src/index/build.js";
import { describeUsing, sharedDir } from "../helpers/shared.js";

const CONFORMANCE = sharedDir("conformance/warcs");
const GOLDEN = sharedDir("spec/examples");
const CONF = CONFORMANCE.path;
const EXAMPLES = GOLDEN.path;
const indexesIn = (dir: string) =>
  readdirSync(dir)
    .filter((f) => f.endsWith(".cdxj"))
    .sort()
    .map((f) => join(dir, f));

async function cli(args: string[], io: Partial<IndexIo> = {}) {
  let out = "";
  let err = "";
  const code = await indexCommand(args, (s) => (out += s), { err: (s) => (err += s), isTTY: false, ...io });
  return { code, out, err };
}

const byteOrder = (a: string, b: string) => Buffer.compare(Buffer.from(a + "\n"), Buffer.from(b + "\n"));
const linesOf = (files: string[]) => files.flatMap((f) => readFileSync(f, "utf8").split("\n").filter(Boolean));

let tmp = "";
let damaged = "";
beforeAll(async () => {
  tmp = await mkdtemp(join(tmpdir(), "lathe-cdxj-cli-"));
  if (!CONFORMANCE.present) return; // only the groups that read it use the damaged copy
  damaged = join(tmp, "damaged.warc.gz");
  await writeFile(damaged, (await readFile(join(CONF, "pywb-iana.warc.gz"))).subarray(0, 400_000)); // truncated in a member
});
afterAll(async () => {
  await rm(tmp, { recursive: true, force: true });
});

describe("usage (exit 2)", () => {
  const w = () => join(CONF, "wget-http.warc.gz");
  it.each([
    [["--cdxj", "--cdx11", "W"], "do not go together"],
    [["--cdxj", "--dedup-db", "x.db", "W"], "do not go together"],
    [["--merge", "--cdxj", "W"], "do not go together"],
    [["--cdxj", "--bucket", "b", "W"], "--bucket goes with --dedup-db"],
    [["--output", "o.cdxj", "W"], "--output goes with --cdxj, --cdx11 or --merge"],
    [["--cdxj", "--output", "", "W"], "--output needs a file name"],
    [["--cdxj"], "name at least one WARC file"],
    [["--merge", "-o", "x"], "name at least one index file to merge"],
    [["W"], "--dedup-db FILE is required"],
  ])("%j", async (args, msg) => {
    const r = await cli(args.map((a) => (a === "W" ? w() : a)));
    expect(r.code).toBe(2);
    expect(r.err).toContain(msg);
    expect(r.out).toBe("");
  });
  it("--help names the CDX modes", async () => {
    const r = await cli(["--help"]);
    expect(r.code).toBe(0);
    expect(r.out).toContain("lathe index --cdxj|--cdx11 [--output FILE] WARC...");
    expect(r.out).toContain("lathe index --merge [--output FILE] INDEX...");
  });
});

describeUsing(CONFORMANCE, "progress, damage, output", () => {
  it("a progress bar on a terminal (stderr), cleared at the end; nothing otherwise; same index", async () => {
    const files = [join(CONF, "pywb-iana.warc.gz"), join(CONF, "wget-http.warc.gz")];
    const tty = await cli(["--cdxj", ...files], { isTTY: true, columns: 100 });
    expect(tty.code).toBe(0);
    expect(tty.err).toMatch(/\r\[[#-]+\] +\d+%/);
    expect(tty.err).toMatch(/files 2\/2/);
    expect(tty.err.endsWith("\r\x1b[K")).toBe(true);
    for (const line of tty.err.split("\r")) expect(line.replace("\x1b[K", "").length).toBeLessThan(100);
    const plain = await cli(["--cdxj", ...files]);
    expect(plain.err).toBe("");
    expect(plain.out).toBe(tty.out);
  });

  it("a damaged file: exit 1, the problem with file and offset, its readable records and the other files indexed", async () => {
    const good = join(CONF, "wget-http.warc.gz");
    const r = await cli(["--cdxj", damaged, good]);
    expect(r.code).toBe(1);
    expect(r.err).toMatch(new RegExp(`^lathe index: ${damaged.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")} at offset \\d+: truncated`, "m"));
    const lines = r.out.split("\n").filter(Boolean);
    expect(lines.filter((l) => l.includes('"filename": "wget-http.warc.gz"')).length).toBe(14);
    const fromDamaged = lines.filter((l) => l.includes('"filename": "damaged.warc.gz"')).map((l) => l.replace('"damaged.warc.gz"', '"pywb-iana.warc.gz"'));
    // Exactly the lines of the intact file's index whose gzip member ends before the cut.
    const intact = readFileSync(join(CONF, "pywb-iana.warc.gz.cdxj"), "utf8").split("\n").filter(Boolean);
    const before = intact.filter((l) => {
      const j = JSON.parse(l.slice(l.indexOf("{"))) as { offset: string; length: string };
      return Number(j.offset) + Number(j.length) <= 400_000;
    });
    expect(before.length).toBeGreaterThan(10);
    expect(fromDamaged).toEqual(before);
  });

  it("a missing file: exit 1 with its name; the others still indexed", async () => {
    const r = await cli(["--cdxj", join(tmp, "nope.warc.gz"), join(CONF, "jwarc-cc.warc.gz")]);
    expect(r.code).toBe(1);
    expect(r.err).toContain("nope.warc.gz");
    expect(r.out).toBe(readFileSync(join(CONF, "jwarc-cc.warc.gz.cdxj"), "utf8"));
  });

  it("--output into a missing directory: exit 1, nothing left behind", async () => {
    const r = await cli(["--cdxj", "-o", join(tmp, "no", "such", "dir", "x.cdxj"), join(CONF, "jwarc-cc.warc.gz")]);
    expect(r.code).toBe(1);
    expect(r.err).toMatch(/ENOENT/);
    expect(existsSync(join(tmp, "no"))).toBe(false);
  });

  it("--output replaces an existing file only when complete; no temporary file remains", async () => {
    const o = join(tmp, "replace.cdxj");
    await writeFile(o, "old\n");
    const r = await cli(["--cdxj", "-o", o, join(CONF, "jwarc-cc.warc.gz")]);
    expect(r.code).toBe(0);
    expect(await readFile(o, "utf8")).toBe(readFileSync(join(CONF, "jwarc-cc.warc.gz.cdxj"), "utf8"));
    expect(readdirSync(tmp).filter((n) => n.includes(".tmp-"))).toEqual([]);
  });
});

describeUsing([CONFORMANCE, GOLDEN], "lathe index --merge", () => {
  it("merges all conformance and example indexes into their sorted union (identical lines once)", async () => {
    const inputs = [...indexesIn(CONF), ...indexesIn(EXAMPLES)];
    const o = join(tmp, "all.cdxj");
    const r = await cli(["--merge", "--output", o, ...inputs, inputs[0]!]); // one file twice
    expect(r.code, r.err).toBe(0);
    const expected = [...new Set(linesOf(inputs))].sort(byteOrder);
    expect(await readFile(o, "utf8")).toBe(expected.map((l) => l + "\n").join(""));
  });

  it("equals indexing the WARCs together", async () => {
    const warcs = ["wget-http.warc.gz", "warcprox-capture.warc.gz", "pywb-iana.warc.gz"].map((f) => join(CONF, f));
    const together = await cli(["--cdxj", ...warcs]);
    const merged = await cli(["--merge", ...warcs.map((w) => w + ".cdxj")]);
    expect(merged.code).toBe(0);
    expect(merged.out).toBe(together.out);
  });

  it("the output may be one of the inputs (written to a temporary file first)", async () => {
    const a = join(tmp, "a.cdxj");
    await writeFile(a, readFileSync(join(CONF, "wget-http.warc.gz.cdxj")));
    const r = await cli(["--merge", "-o", a, a, join(CONF, "wget-https.warc.gz.cdxj")]);
    expect(r.code).toBe(0);
    const expected = linesOf([join(CONF, "wget-http.warc.gz.cdxj"), join(CONF, "wget-https.warc.gz.cdxj")]).sort(byteOrder);
    expect(await readFile(a, "utf8")).toBe(expected.map((l) => l + "\n").join(""));
  });

  it("an unsorted input: exit 1 naming the file and line; the output is not written", async () => {
    const bad = join(tmp, "unsorted.cdxj");
    await writeFile(bad, "b 1 {}\na 1 {}\n");
    const o = join(tmp, "never.cdxj");
    const r = await cli(["--merge", "-o", o, join(CONF, "jwarc-cc.warc.gz.cdxj"), bad]);
    expect(r.code).toBe(1);
    expect(r.err).toContain(`${bad} is not sorted: line 2`);
    expect(existsSync(o)).toBe(false);
  });

  it("a missing input: exit 1", async () => {
    const r = await cli(["--merge", join(tmp, "missing.cdxj")]);
    expect(r.code).toBe(1);
    expect(r.err).toContain("missing.cdxj");
  });

  it("streams: the first merged line comes before the inputs are read", async () => {
    const n = 60_000;
    const pad = "x".repeat(100);
    const files: string[] = [];
    for (let k = 0; k < 3; k++) {
      const f = join(tmp, `big-${k}.cdxj`);
      const lines: string[] = [];
      for (let i = 0; i < n; i++) lines.push(`com,example)/${String(i).padStart(6, "0")} 2026120300000${k} {"url": "${pad}"}\n`);
      await writeFile(f, lines.join(""));
      files.push(f);
    }
    let first: { bytesDone: number; bytesTotal: number } | null = null;
    let count = 0;
    let prev = "";
    await mergeIndexesTo(
      files,
      (text) => {
        for (const line of text.split("\n").slice(0, -1)) {
          expect(line >= prev).toBe(true);
          prev = line;
          count++;
        }
      },
      { onProgress: (p) => (first ??= { ...p }) },
    );
    expect(count).toBe(3 * n);
    expect(first!.bytesDone).toBeLessThan(first!.bytesTotal / 4);
  });
});
