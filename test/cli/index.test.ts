/**
 * `lathe index --dedup-db FILE [--bucket NAME] WARC...` (src/cli/index.ts): usage errors, the
 * summary and exit codes, the progress bar only on a terminal; end to end with the SQLite store,
 * in process and through bin/lathe.js.
 */
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { indexCommand, type IndexIo } from "../../src/cli/index.js";
import { parseDigest, sameDigest } from "../../src/dedup/digestKey.js";
import { openSqliteDedupStore } from "../../src/dedup/sqliteStore.js";
import type { DedupEntry, DedupStore, DigestKey } from "../../src/dedup/types.js";
import { describeUsing, sharedDir } from "../helpers/shared.js";

const REPO = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const CONFORMANCE = sharedDir("conformance/warcs", "LATHE_CONFORMANCE_WARCS");
const CONF = CONFORMANCE.path;
const BIN = join(REPO, "bin", "lathe.js");
const run = promisify(execFile);

class MemoryStore implements DedupStore {
  entries: DedupEntry[] = [];
  closed = false;
  byDigest(bucket: string, d: DigestKey): DedupEntry | null {
    return this.entries.filter((e) => e.bucket === bucket && sameDigest(e.digest, d)).at(-1) ?? null;
  }
  byUrlAndDigest(bucket: string, url: string, d: DigestKey): DedupEntry | null {
    return this.entries.filter((e) => e.bucket === bucket && e.url === url && sameDigest(e.digest, d)).at(-1) ?? null;
  }
  byUrl(): DedupEntry[] {
    return [];
  }
  add(entries: DedupEntry[]): void {
    this.entries.push(...entries);
  }
  removeFileTail(): number {
    return 0;
  }
  count(): number {
    return this.entries.length;
  }
  close(): void {
    this.closed = true;
  }
}

async function runIndex(args: string[], io: Partial<IndexIo> = {}) {
  let out = "";
  let err = "";
  const code = await indexCommand(args, (s) => (out += s), { err: (s) => (err += s), isTTY: false, ...io });
  return { code, out, err };
}

let tmp = "";
let damaged = "";
beforeAll(async () => {
  tmp = await mkdtemp(join(tmpdir(), "lathe-cli-index-"));
  if (!CONFORMANCE.present) return; // only the groups that read it use the damaged copy
  const iana = await readFile(join(CONF, "pywb-iana.warc.gz"));
  damaged = join(tmp, "damaged.warc.gz");
  // Truncated inside a member.
  await writeFile(damaged, iana.subarray(0, 400_000));
});
afterAll(async () => {
  await rm(tmp, { recursive: true, force: true });
});

describe("lathe index: usage", () => {
  it("requires --dedup-db and at least one file; exit 2", async () => {
    const a = await runIndex([join(CONF, "wget-http.warc.gz")]);
    expect(a.code).toBe(2);
    expect(a.err).toContain("--dedup-db FILE is required");
    const b = await runIndex(["--dedup-db", join(tmp, "x.db")]);
    expect(b.code).toBe(2);
    expect(b.err).toContain("name at least one WARC file");
    const d = await runIndex(["--dedup-db", join(tmp, "x.db"), "--frobnicate", "f.warc"]);
    expect(d.code).toBe(2);
    expect(d.err).toMatch(/frobnicate/);
    const e = await runIndex(["--dedup-db", join(tmp, "x.db"), "--bucket", "", "f.warc"]);
    expect(e.code).toBe(2);
    const h = await runIndex(["--help"]);
    expect(h.code).toBe(0);
    expect(h.out).toContain("lathe index --dedup-db FILE");
    expect(existsSync(join(tmp, "x.db"))).toBe(false);
  });
});

describeUsing(CONFORMANCE, "lathe index: summary and exit code (in-memory store)", () => {
  it("exit 0 and a summary when every file loads; the store is closed", async () => {
    const store = new MemoryStore();
    const files = ["heritrix-3.1.1-gov.uk-revisits.warc.gz", "pywb-example-url-agnostic-revisit.warc.gz", "wget-http.warc.gz"].map((f) => join(CONF, f));
    const r = await runIndex(["--dedup-db", "mem", "--bucket", "crawl-1", ...files], { openStore: () => store });
    expect(r.code).toBe(0);
    expect(r.err).toBe("");
    expect(store.closed).toBe(true);
    expect(r.out).toMatch(/^bucket: +crawl-1$/m);
    expect(r.out).toMatch(/^files: +3,/m);
    expect(r.out).toMatch(/^records: +218 \(21 responses, 56 revisits\)$/m);
    expect(r.out).toMatch(/^entries added: +19 \(1 from revisits' originals/m);
    expect(r.out).toMatch(/^skipped: +58$/m);
    expect(r.out).toMatch(/55 +revisit without WARC-Refers-To/);
    expect(r.out).toMatch(/^errors: +0$/m);
    expect(store.entries.every((e) => e.bucket === "crawl-1")).toBe(true);
  });

  it("exit 1 when a file has errors, listed with file and offset; the other files still load", async () => {
    const store = new MemoryStore();
    const r = await runIndex(["--dedup-db", "mem", damaged, join(CONF, "wget-http.warc.gz")], { openStore: () => store });
    expect(r.code).toBe(1);
    expect(r.out).toMatch(/^files: +2 \(1 with errors\)/m);
    expect(r.out).toMatch(/^errors: +1$/m);
    expect(r.out).toMatch(new RegExp(`^  ${damaged.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")} at offset \\d+: truncated`, "m"));
    expect(store.entries.filter((e) => e.filename === "wget-http.warc.gz").length).toBe(11);
    expect(store.entries.filter((e) => e.filename === "damaged.warc.gz").length).toBeGreaterThan(0);
  });

  it("a progress bar on a terminal (stderr), cleared at the end; nothing when not a terminal", async () => {
    const files = ["pywb-iana.warc.gz", "wget-http.warc.gz"].map((f) => join(CONF, f));
    const tty = await runIndex(["--dedup-db", "mem", ...files], { openStore: () => new MemoryStore(), isTTY: true, columns: 100 });
    expect(tty.code).toBe(0);
    expect(tty.err).toMatch(/\r\[[#-]+\] +\d+%/);
    expect(tty.err).toMatch(/files 2\/2/);
    expect(tty.err.endsWith("\r\x1b[K")).toBe(true);
    for (const line of tty.err.split("\r")) expect(line.replace("\x1b[K", "").length).toBeLessThan(100);
    const plain = await runIndex(["--dedup-db", "mem", ...files], { openStore: () => new MemoryStore() });
    expect(plain.err).toBe("");
    expect(plain.out).toBe(tty.out);
  });

  it("a store that cannot be opened: exit 1 with the reason", async () => {
    const r = await runIndex(["--dedup-db", "bad.db", join(CONF, "wget-http.warc.gz")], {
      openStore: () => {
        throw new Error("database is newer than this lathe");
      },
    });
    expect(r.code).toBe(1);
    expect(r.err).toContain("cannot open the dedup database bad.db: database is newer than this lathe");
  });
});

describeUsing(CONFORMANCE, "lathe index end to end with the SQLite store", () => {
  it("loads the conformance WARCs into a database that lookups then find", async () => {
    const db = join(tmp, "dedup.db");
    const files = ["warcprox-capture.warc.gz", "pywb-example-url-agnostic-revisit.warc.gz", "wget-uncompressed.warc"].map((f) => join(CONF, f));
    const r = await runIndex(["--dedup-db", db, ...files]);
    expect(r.code, r.out + r.err).toBe(0);
    expect(existsSync(db)).toBe(true);
    const store = openSqliteDedupStore(db, { readonly: true });
    try {
      expect(store.count()).toBe(11 + 1 + 4);
      // warcprox wrote hex digests, wget base32: the same page from both tools is one payload.
      const hex = parseDigest("sha1:01a12205291caa27a777a4f03f8064f4298cccb6")!;
      expect(store.byDigest("default", hex)).not.toBeNull();
      const page = store.byUrl("default", "http://127.0.0.1:18080/", 10).filter((e) => sameDigest(e.digest, hex));
      expect(new Set(page.map((e) => e.filename))).toEqual(new Set(["warcprox-capture.warc.gz", "wget-uncompressed.warc"]));
      expect(page.every((e) => e.offset !== null && e.length !== null && e.status === 200)).toBe(true);
      const orig = store.byUrlAndDigest("default", "http://example.iana.org/", parseDigest("sha1:B2LTWWPUOYAH7UIPQ7ZUPQ4VMBSVC36A")!);
      expect(orig).toMatchObject({ filename: null, offset: null, recordId: "<urn:uuid:c0b8a812-1a11-4cd1-9189-58bc8eb6457f>", date: "2013-07-02T19:54:02Z" });
    } finally {
      store.close();
    }
  });

  it.skipIf(!existsSync(join(REPO, "dist", "cli", "index.js")))("through bin/lathe.js: exit codes 0, 1 and 2", async () => {
    const db = join(tmp, "bin.db");
    const ok = await run(process.execPath, [BIN, "index", "--dedup-db", db, join(CONF, "wget-http.warc.gz")]);
    expect(ok.stdout).toMatch(/^entries added: +11$/m);
    const bad = await run(process.execPath, [BIN, "index", "--dedup-db", db, "--bucket", "other", damaged]).then(
      () => null,
      (e: { code: number; stdout: string }) => e,
    );
    expect(bad?.code).toBe(1);
    expect(bad?.stdout).toMatch(/at offset \d+: truncated/);
    const usage = await run(process.execPath, [BIN, "index", join(CONF, "wget-http.warc.gz")]).then(
      () => null,
      (e: { code: number; stderr: string }) => e,
    );
    expect(usage?.code).toBe(2);
    expect(usage?.stderr).toContain("--dedup-db FILE is required");
  });
});
