/**
 * importWarcs (src/dedup/importer.ts) on every conformance WARC (read in place) and on damaged
 * copies, against a small in-memory DedupStore.
 */
import { mkdtemp, readFile, readdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { importWarcs, type ImportProgress } from "../../src/dedup/importer.js";
import { parseDigest, sameDigest } from "../../src/dedup/digestKey.js";
import type { DedupEntry, DedupStore, DigestKey } from "../../src/dedup/types.js";
import { describeUsing, sharedDir } from "../helpers/shared.js";

const CONFORMANCE = sharedDir("conformance/warcs", "LATHE_CONFORMANCE_WARCS");
const CONF = CONFORMANCE.path;

/** Entries in insertion order; "most recent" = latest WARC-Date, then latest added. */
class MemoryStore implements DedupStore {
  entries: DedupEntry[] = [];
  addCalls: number[] = [];
  closed = false;
  #latest(list: DedupEntry[]): DedupEntry | null {
    let best: DedupEntry | null = null;
    for (const e of list) if (!best || e.date >= best.date) best = e;
    return best;
  }
  byDigest(bucket: string, digest: DigestKey): DedupEntry | null {
    return this.#latest(this.entries.filter((e) => e.bucket === bucket && sameDigest(e.digest, digest)));
  }
  byUrlAndDigest(bucket: string, url: string, digest: DigestKey): DedupEntry | null {
    return this.#latest(this.entries.filter((e) => e.bucket === bucket && e.url === url && sameDigest(e.digest, digest)));
  }
  byUrl(bucket: string, url: string, limit: number): DedupEntry[] {
    return this.entries
      .filter((e) => e.bucket === bucket && e.url === url)
      .sort((a, b) => (a.date < b.date ? 1 : -1))
      .slice(0, limit);
  }
  add(entries: DedupEntry[]): void {
    this.addCalls.push(entries.length);
    this.entries.push(...entries);
  }
  removeFileTail(filename: string, fromOffset: number): number {
    const before = this.entries.length;
    this.entries = this.entries.filter((e) => !(e.filename === filename && (e.offset ?? 0) >= fromOffset));
    return before - this.entries.length;
  }
  count(): number {
    return this.entries.length;
  }
  close(): void {
    this.closed = true;
  }
}

let files: string[] = [];
let tmp = "";
beforeAll(async () => {
  tmp = await mkdtemp(join(tmpdir(), "lathe-import-test-"));
});
afterAll(async () => {
  await rm(tmp, { recursive: true, force: true });
});

const conf = (name: string) => join(CONF, name);

interface CdxjLine {
  url: string;
  mime: string;
  status?: string;
  digest: string;
  offset: string;
  length: string;
  filename: string;
}
async function cdxj(name: string): Promise<CdxjLine[]> {
  return (await readFile(conf(`${name}.cdxj`), "utf8"))
    .split("\n")
    .filter(Boolean)
    .map((l) => JSON.parse(l.slice(l.indexOf("{"))) as CdxjLine);
}

describeUsing(CONFORMANCE, "importWarcs on the conformance WARCs", () => {
  beforeAll(async () => {
    files = (await readdir(CONF)).filter((f) => /\.warc(\.gz)?$/.test(f)).sort();
  });

  it("every file alone: no errors, one entry per response with a digest, pointing at its record as the .cdxj does", async () => {
    for (const name of files) {
      const store = new MemoryStore();
      const s = await importWarcs([conf(name)], store, { bucket: "b" });
      expect(s.errors, name).toEqual([]);
      expect(s.files).toBe(1);
      expect(store.count()).toBe(s.entriesAdded);
      const responseSkips = (s.skipped["no-payload-digest"] ?? 0) + (s.skipped["unsupported-digest"] ?? 0) + (s.skipped.truncated ?? 0) + (s.skipped["incomplete-response"] ?? 0);
      expect(s.entriesAdded - s.entriesFromRevisits, name).toBe(s.responses - responseSkips);

      const lines = await cdxj(name);
      for (const e of store.entries) {
        expect(e.bucket).toBe("b");
        if (e.filename === null) {
          expect([e.offset, e.length, e.status]).toEqual([null, null, null]);
          continue;
        }
        expect(e.filename).toBe(name);
        const line = lines.find((l) => Number(l.offset) === e.offset);
        expect(line, `${name} entry at ${e.offset}`).toBeDefined();
        expect(line!.mime).not.toBe("warc/revisit");
        expect(Number(line!.length)).toBe(e.length);
        expect(line!.url).toBe(e.url);
        expect(sameDigest(parseDigest(line!.digest)!, e.digest)).toBe(true);
        if (line!.status !== undefined && line!.status !== "-") expect(String(e.status)).toBe(line!.status);
        expect(e.recordId).toMatch(/^<urn:/);
      }
    }
  });

  it("Heritrix 3.1.1 (WARC/1.0) revisits without any Refers-To are skipped; dns: responses without a payload digest too", async () => {
    const store = new MemoryStore();
    const s = await importWarcs([conf("heritrix-3.1.1-gov.uk-revisits.warc.gz")], store, { bucket: "default" });
    expect(s.revisits).toBe(55);
    expect(s.skipped["revisit-no-refers-to"]).toBe(55);
    expect(s.responses).toBe(10);
    expect(s.skipped["no-payload-digest"]).toBe(3);
    expect(s.entriesAdded).toBe(7);
    expect(s.entriesFromRevisits).toBe(0);
    expect(store.entries.every((e) => /^https?:/.test(e.url))).toBe(true);
    // ETag / Last-Modified come from the HTTP head.
    expect(store.entries.some((e) => e.etag !== null)).toBe(true);
    expect(store.entries.some((e) => e.lastModified !== null)).toBe(true);
  });

  it("a URL-agnostic revisit without its original yields an entry from its Refers-To data, no file/offset", async () => {
    const store = new MemoryStore();
    const s = await importWarcs([conf("pywb-example-url-agnostic-revisit.warc.gz")], store, { bucket: "b" });
    expect(s.entriesFromRevisits).toBe(1);
    expect(store.entries).toEqual([
      {
        bucket: "b",
        digest: parseDigest("sha1:B2LTWWPUOYAH7UIPQ7ZUPQ4VMBSVC36A"),
        url: "http://example.iana.org/",
        date: "2013-07-02T19:54:02Z",
        recordId: "<urn:uuid:c0b8a812-1a11-4cd1-9189-58bc8eb6457f>",
        filename: null,
        offset: null,
        length: null,
        status: null,
        etag: null,
        lastModified: null,
      },
    ]);
    // Imported again: the store has it already.
    const again = await importWarcs([conf("pywb-example-url-agnostic-revisit.warc.gz")], store, { bucket: "b" });
    expect(again.entriesAdded).toBe(0);
    expect(again.skipped["revisit-original-present"]).toBe(1);
  });

  it("with the original among the imported files (either order) only the original's entry is added", async () => {
    for (const order of [
      ["pywb-example-url-agnostic-orig.warc.gz", "pywb-example-url-agnostic-revisit.warc.gz"],
      ["pywb-example-url-agnostic-revisit.warc.gz", "pywb-example-url-agnostic-orig.warc.gz"],
    ]) {
      const store = new MemoryStore();
      const s = await importWarcs(order.map(conf), store, { bucket: "b" });
      expect(s.files).toBe(2);
      expect(s.entriesAdded).toBe(1);
      expect(s.entriesFromRevisits).toBe(0);
      expect(s.skipped["revisit-original-present"]).toBe(1);
      expect(store.entries).toEqual([
        {
          bucket: "b",
          digest: parseDigest("sha1:B2LTWWPUOYAH7UIPQ7ZUPQ4VMBSVC36A"),
          url: "http://example.iana.org/",
          date: "2013-07-02T19:54:02Z",
          recordId: "<urn:uuid:c0b8a812-1a11-4cd1-9189-58bc8eb6457f>",
          filename: "pywb-example-url-agnostic-orig.warc.gz",
          offset: 353,
          length: 1001,
          status: 200,
          etag: '"780602-4f6-4db31b2978ec0"',
          lastModified: "Thu, 25 Apr 2013 16:13:23 GMT",
        },
      ]);
    }
  });

  it("warcprox: hex digests, every revisit's original is in the file", async () => {
    const store = new MemoryStore();
    const s = await importWarcs([conf("warcprox-capture.warc.gz")], store, { bucket: "b" });
    expect(s.responses).toBe(11);
    expect(s.entriesAdded).toBe(11);
    expect(s.revisits).toBe(14);
    expect((s.skipped["revisit-original-present"] ?? 0) + (s.skipped["revisit-duplicate"] ?? 0)).toBe(14);
    // Hex `sha1:01a1...` and base32 compare equal.
    const hex = parseDigest("sha1:01a12205291caa27a777a4f03f8064f4298cccb6")!;
    expect(store.byDigest("b", hex)).not.toBeNull();
  });

  it("pywb revisits (Refers-To-Target-URI/-Date, no WARC-Refers-To): one entry per original not in the files", async () => {
    const store = new MemoryStore();
    const s = await importWarcs([conf("pywb-dupes.warc.gz"), conf("pywb-iana.warc.gz")], store, { bucket: "b" });
    expect(s.revisits).toBe(132);
    const fromRevisits = store.entries.filter((e) => e.filename === null);
    expect(fromRevisits.length).toBe(s.entriesFromRevisits);
    expect(fromRevisits.every((e) => e.recordId === null)).toBe(true);
    // No two entries for the same original.
    const keys = fromRevisits.map((e) => `${e.url} ${e.date}`);
    expect(new Set(keys).size).toBe(keys.length);
    // And none for an original that was imported.
    for (const e of fromRevisits) expect(store.entries.some((o) => o.filename !== null && o.url === e.url && sameDigest(o.digest, e.digest))).toBe(false);
  });

  it("importing the same files again adds nothing", async () => {
    const store = new MemoryStore();
    const names = ["wget-http.warc.gz", "pywb-dupes.warc.gz", "pywb-example-url-agnostic-revisit.warc.gz"].map(conf);
    const first = await importWarcs(names, store, { bucket: "b" });
    const again = await importWarcs(names, store, { bucket: "b" });
    expect(again.entriesAdded).toBe(0);
    expect(store.count()).toBe(first.entriesAdded);
    expect(again.skipped["already-in-store"]).toBe(first.entriesAdded - first.entriesFromRevisits);
    // The same file twice in one run, too.
    const twice = new MemoryStore();
    const t = await importWarcs([conf("wget-http.warc.gz"), conf("wget-http.warc.gz")], twice, { bucket: "b" });
    expect(t.entriesAdded).toBe(11);
    expect(t.skipped["already-in-store"]).toBe(11);
    // Another bucket is another index.
    const other = await importWarcs([conf("wget-http.warc.gz")], store, { bucket: "other" });
    expect(other.entriesAdded).toBe(11);
  });

  it("all files at once, in batches, with progress", async () => {
    const store = new MemoryStore();
    const progress: ImportProgress[] = [];
    const s = await importWarcs(files.map(conf), store, { bucket: "all", batchSize: 16, onProgress: (p) => progress.push(p) });
    expect(s.files).toBe(files.length);
    expect(s.errors).toEqual([]);
    expect(s.filesWithErrors).toBe(0);
    expect(s.records).toBe(804);
    expect(s.responses).toBe(144);
    expect(s.revisits).toBe(204);
    expect(store.count()).toBe(s.entriesAdded);
    expect(Math.max(...store.addCalls)).toBeLessThanOrEqual(16);
    expect(store.addCalls.length).toBeGreaterThanOrEqual(Math.ceil(s.entriesAdded / 16));
    const last = progress.at(-1)!;
    expect([last.filesDone, last.files, last.bytesDone, last.records]).toEqual([files.length, files.length, last.bytesTotal, 804]);
    expect(s.bytes).toBe(last.bytesTotal);
    for (let i = 1; i < progress.length; i++) expect(progress[i]!.bytesDone).toBeGreaterThanOrEqual(progress[i - 1]!.bytesDone);
  });
});

describeUsing(CONFORMANCE, "importWarcs on damaged and missing files", () => {
  it("reports file and offset and loads the rest", async () => {
    const iana = await readFile(conf("pywb-iana.warc.gz"));
    const good = new MemoryStore();
    const gs = await importWarcs([conf("pywb-iana.warc.gz")], good, { bucket: "b" });
    // Cut the file in the middle of the member holding the 20th response.
    const cut = good.entries.filter((e) => e.filename !== null)[19]!;
    const bad = Buffer.concat([iana.subarray(0, cut.offset! + 40), iana.subarray(cut.offset! + cut.length!)]);
    const path = join(tmp, "iana-damaged.warc.gz");
    await writeFile(path, bad);
    const missing = join(tmp, "missing.warc.gz");

    const store = new MemoryStore();
    const s = await importWarcs([missing, path, conf("wget-http.warc.gz")], store, { bucket: "b" });
    expect(s.files).toBe(3);
    expect(s.filesWithErrors).toBe(2);
    expect(s.errors[0]).toEqual({ file: missing, offset: 0, reason: expect.stringMatching(/cannot open/) });
    expect(s.errors.slice(1).every((e) => e.file === path)).toBe(true);
    expect(s.errors[1]!.offset).toBe(cut.offset);
    // Everything but the damaged response still loaded, and the file after it.
    const fromDamaged = store.entries.filter((e) => e.filename === "iana-damaged.warc.gz");
    expect(fromDamaged.length).toBe(good.entries.filter((e) => e.filename !== null).length - 1);
    expect(store.entries.filter((e) => e.filename === "wget-http.warc.gz").length).toBe(11);
    expect(gs.errors).toEqual([]);
  });
});
