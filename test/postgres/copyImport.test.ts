/**
 * `lathe index --dedup-db postgresql://…` (src/postgres/copyImport.ts, src/cli/index.ts) against a
 * real PostgreSQL: the entries and the summary are those the SQLite import of the same WARCs
 * gives, field by field; importing again adds nothing; damaged and foreign files; a file the
 * server refuses halfway leaves none of its entries; the server unreachable, a wrong password, a
 * missing database; and the CLI as a child process. The password is never printed.
 */
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdtemp, readFile, readdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { gzipSync } from "node:zlib";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { formatSummary, indexCommand } from "../../src/cli/index.js";
import { importWarcs, type ImportSummary } from "../../src/dedup/importer.js";
import { ALG_NAME } from "../../src/dedup/sqliteKeys.js";
import { openSqliteDedupStore } from "../../src/dedup/sqliteStore.js";
import type { DedupEntry } from "../../src/dedup/types.js";
import { ADMIN_PASSWORD, startPostgres, type PostgresServer } from "../helpers/postgres.js";
import { describeUsing, sharedDir } from "../helpers/shared.js";

const REPO = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const BIN = join(REPO, "bin", "lathe.js");
const CONFORMANCE = sharedDir("conformance/warcs", "LATHE_CONFORMANCE_WARCS");
const conf = (name: string) => join(CONFORMANCE.path, name);

let pg: PostgresServer;
let tmp = "";
beforeAll(async () => {
  pg = await startPostgres();
  tmp = await mkdtemp(join(tmpdir(), "lathe-copy-import-"));
});
afterAll(async () => {
  pg?.destroy();
  await rm(tmp, { recursive: true, force: true });
});

async function runIndex(args: string[], isTTY = false) {
  let out = "";
  let err = "";
  const code = await indexCommand(args, (s) => (out += s), { err: (s) => (err += s), isTTY, columns: 100 });
  return { code, out, err };
}

/** The SQLite import of `files` (twice when `times` is 2): each summary, and every entry given to the store in order. */
async function sqliteImport(files: string[], bucket: string, times = 1): Promise<{ summaries: ImportSummary[]; entries: DedupEntry[] }> {
  const store = openSqliteDedupStore(join(tmp, `sqlite-${Math.random().toString(36).slice(2)}.db`), {});
  const entries: DedupEntry[] = [];
  const add = store.add.bind(store);
  store.add = (es) => {
    entries.push(...es);
    add(es);
  };
  const summaries: ImportSummary[] = [];
  try {
    for (let i = 0; i < times; i++) summaries.push(await importWarcs(files, store, { bucket }));
  } finally {
    store.close();
  }
  return { summaries, entries };
}

/** dedup_entries in `seq` order, as DedupEntry (the columns renamed by the query). */
async function pgEntries(db: string): Promise<DedupEntry[]> {
  const rows = await pg.query<Omit<DedupEntry, "digest"> & { alg: number; bytes: Buffer }>(
    `SELECT bucket, alg, digest AS bytes, url, warc_date AS date, record_id AS "recordId", filename, file_offset::float8 AS "offset",
            record_length::float8 AS length, status, etag, last_modified AS "lastModified"
     FROM dedup_entries ORDER BY seq`,
    [],
    db,
  );
  return rows.map(({ alg, bytes, ...e }) => ({ ...e, digest: { alg: ALG_NAME[alg]!, bytes } }));
}

/** Field by field, in order; a mismatch names the entry. */
function expectSameEntries(actual: DedupEntry[], expected: DedupEntry[]): void {
  expect(actual.length).toBe(expected.length);
  expected.forEach((e, i) => {
    const a = actual[i]!;
    expect({ ...a, digest: `${a.digest.alg}:${a.digest.bytes.toString("hex")}` }, `entry ${i} (${e.filename} at ${e.offset})`).toEqual({ ...e, digest: `${e.digest.alg}:${e.digest.bytes.toString("hex")}` });
  });
}

/** One WARC/1.1 response record, gzipped as its own member. */
function responseRecord(url: string, body: string): Buffer {
  const http = `HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
  const digest = "sha1:" + "A".repeat(32);
  const head =
    `WARC/1.1\r\nWARC-Type: response\r\nWARC-Record-ID: <urn:uuid:${crypto.randomUUID()}>\r\nWARC-Date: 2026-01-02T03:04:05Z\r\n` +
    `WARC-Target-URI: ${url}\r\nWARC-Payload-Digest: ${digest}\r\nContent-Type: application/http; msgtype=response\r\nContent-Length: ${Buffer.byteLength(http)}\r\n\r\n`;
  return gzipSync(Buffer.from(`${head}${http}\r\n\r\n`));
}

describeUsing(CONFORMANCE, "the same entries as the SQLite import", () => {
  let files: string[] = [];
  let db = "";
  beforeAll(async () => {
    files = (await readdir(CONFORMANCE.path)).filter((f) => /\.warc(\.gz)?$/.test(f)).sort().map(conf);
    db = await pg.createDatabase("same_entries");
  });

  it("every conformance WARC: the summary and every entry, field by field, in order", async () => {
    const r = await runIndex(["--dedup-db", db, "--bucket", "crawl", ...files]);
    const sqlite = await sqliteImport(files, "crawl");
    expect(r.err).toBe("");
    expect(r.code).toBe(sqlite.summaries[0]!.errors.length ? 1 : 0);
    expect(r.out).toBe(formatSummary(sqlite.summaries[0]!));
    expect(sqlite.entries.length).toBeGreaterThan(100);
    expect(sqlite.entries.some((e) => e.filename === null)).toBe(true); // revisits' originals too
    expectSameEntries(await pgEntries("same_entries"), sqlite.entries);
  });

  it("importing the same files again adds nothing, with the same summary as SQLite's second import", async () => {
    const again = await runIndex(["--dedup-db", db, "--bucket", "crawl", ...files]);
    const sqlite = await sqliteImport(files, "crawl", 2);
    expect(again.out).toBe(formatSummary(sqlite.summaries[1]!));
    expect(again.out).toMatch(/^entries added: +0$/m);
    expectSameEntries(await pgEntries("same_entries"), sqlite.entries);
  });

  it("another bucket gets its own entries; the by-digest lookup finds the latest, as SQLite's byDigest does", async () => {
    const two = files.filter((f) => /pywb-example-url-agnostic|warcprox/.test(f));
    const r = await runIndex(["--dedup-db", db, "--bucket", "other", ...two]);
    expect(r.code).toBe(0);
    const rows = await pgEntries("same_entries");
    const other = rows.filter((e) => e.bucket === "other");
    expect(other.length).toBeGreaterThan(0);
    const store = openSqliteDedupStore(join(tmp, "lookup.db"), {});
    try {
      await importWarcs(two, store, { bucket: "other" });
      for (const e of other) {
        const [latest] = await pg.query<{ url: string; filename: string | null; file_offset: string | null }>(
          "SELECT url, filename, file_offset FROM dedup_entries WHERE bucket = $1 AND alg = $2 AND digest = $3 ORDER BY seq DESC LIMIT 1",
          ["other", e.digest.alg === "sha1" ? 1 : 2, e.digest.bytes],
          "same_entries",
        );
        const s = store.byDigest("other", e.digest)!;
        expect({ url: latest!.url, filename: latest!.filename, offset: latest!.file_offset === null ? null : Number(latest!.file_offset) }).toEqual({ url: s.url, filename: s.filename, offset: s.offset });
      }
    } finally {
      store.close();
    }
  });
});

describeUsing(CONFORMANCE, "bad input", () => {
  it("a damaged WARC loads its whole records (as with SQLite); a file that is not a WARC and a missing one are named, nothing from them; exit 1", async () => {
    const db = await pg.createDatabase("bad_input");
    const iana = await readFile(conf("pywb-iana.warc.gz"));
    const damaged = join(tmp, "iana-cut.warc.gz");
    await writeFile(damaged, Buffer.concat([iana.subarray(0, 300_000), iana.subarray(310_000)]));
    const notWarc = join(tmp, "notes.txt");
    await writeFile(notWarc, "these are my notes, not a WARC\n");
    const missing = join(tmp, "missing.warc.gz");
    const files = [notWarc, damaged, missing, conf("wget-http.warc.gz")];
    const r = await runIndex(["--dedup-db", db, ...files]);
    const sqlite = await sqliteImport(files, "default");
    expect(r.code).toBe(1);
    expect(r.out).toBe(formatSummary(sqlite.summaries[0]!));
    expect(r.out).toContain(`${notWarc} at offset 0: not a WARC record`);
    expect(r.out).toMatch(new RegExp(`${missing.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")} at offset 0: cannot open`));
    const rows = await pgEntries("bad_input");
    expectSameEntries(rows, sqlite.entries);
    expect(rows.some((e) => e.filename === "notes.txt")).toBe(false);
    expect(rows.filter((e) => e.filename === "iana-cut.warc.gz").length).toBeGreaterThan(0);
    expect(rows.filter((e) => e.filename === "wget-http.warc.gz").length).toBe(11);
  });

  it("a file the server refuses halfway: none of its entries, the files before it stay, the message names it; a second run completes", async () => {
    const db = await pg.createDatabase("refused");
    const runIt = (args: string[]) => runIndex(["--dedup-db", db, ...args]);
    expect((await runIt([conf("wget-http.warc.gz")])).code).toBe(0); // creates the schema
    // The server refuses one row of the second file, after its first rows went in (a real PostgreSQL error, raised by a trigger).
    await pg.query(
      `CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN IF NEW.url LIKE '%/refused' THEN RAISE EXCEPTION 'refused by the test'; END IF; RETURN NEW; END $$;
       CREATE TRIGGER refuse BEFORE INSERT ON dedup_entries FOR EACH ROW EXECUTE FUNCTION refuse();`,
      [],
      "refused",
    );
    const half = join(tmp, "half.warc.gz");
    await writeFile(half, Buffer.concat([...Array.from({ length: 20 }, (_, i) => responseRecord(`http://example.org/${i}`, `body ${i}`)), responseRecord("http://example.org/refused", "no"), responseRecord("http://example.org/after", "after")]));
    const r = await runIt([conf("warcprox-capture.warc.gz"), half, conf("wget-uncompressed.warc")]);
    expect(r.code).toBe(1);
    expect(r.out).toBe("");
    expect(r.err.trim().split("\n")).toHaveLength(1);
    expect(r.err).toContain(`loading the entries of ${half} failed: refused by the test; none of that file's entries was stored`);
    const files = (await pg.query<{ filename: string; n: string }>("SELECT filename, count(*) AS n FROM dedup_entries GROUP BY filename ORDER BY filename", [], "refused")).map((x) => [x.filename, Number(x.n)]);
    expect(files).toEqual([["warcprox-capture.warc.gz", 11], ["wget-http.warc.gz", 11]]);

    await pg.query("DROP TRIGGER refuse ON dedup_entries", [], "refused");
    const again = await runIt([conf("warcprox-capture.warc.gz"), half, conf("wget-uncompressed.warc")]);
    expect(again.code).toBe(0);
    expect(again.out).toMatch(/^entries added: +26$/m);
    expect(again.out).toMatch(/^ +11 +response already in the store/m);
  });

  it("server unreachable, wrong password, missing database: one line each, exit 1, the password never shown; a malformed URL is a usage error", async () => {
    const secret = "s3cr3t-Pw";
    const unreachable = await runIndex(["--dedup-db", `postgresql://lathe:${secret}@127.0.0.1:1/x`, conf("wget-http.warc.gz")]);
    const auth = await runIndex(["--dedup-db", pg.url("postgres", "lathe_admin", secret), conf("wget-http.warc.gz")]);
    const missingDb = await runIndex(["--dedup-db", pg.url("no_such_db"), conf("wget-http.warc.gz")]);
    for (const r of [unreachable, auth, missingDb]) {
      expect(r.code).toBe(1);
      expect(r.out).toBe("");
      expect(r.err.endsWith("\n")).toBe(true);
      expect(r.err.trimEnd().split("\n")).toHaveLength(1);
      expect(r.err).toMatch(/^lathe index: cannot open the dedup database: PostgreSQL at postgresql:\/\/[^@\s]*:\*\*\*@/);
      expect(r.err).not.toContain(secret);
      expect(r.err).not.toContain(ADMIN_PASSWORD);
    }
    expect(unreachable.err).toContain("is unreachable");
    expect(auth.err).toContain('authentication failed for user "lathe_admin"');
    expect(missingDb.err).toContain('database "no_such_db" does not exist');
    const malformed = await runIndex(["--dedup-db", `postgresql://lathe:${secret}@/x`, conf("wget-http.warc.gz")]);
    expect(malformed.code).toBe(2);
    expect(malformed.err).toContain("is not a PostgreSQL connection URL");
    expect(malformed.err).not.toContain(secret);
  });
});

describeUsing(CONFORMANCE, "the progress bar", () => {
  it("on a terminal, as for the SQLite file: bar, files, entries; cleared at the end", async () => {
    const db = await pg.createDatabase("progress");
    const r = await runIndex(["--dedup-db", db, conf("pywb-iana.warc.gz"), conf("wget-http.warc.gz")], true);
    expect(r.code).toBe(0);
    expect(r.err).toMatch(/\r\[[#-]+\] +\d+%/);
    expect(r.err).toMatch(/files 2\/2 +entries \d+/);
    expect(r.err.endsWith("\r\x1b[K")).toBe(true);
    expect(r.err).not.toContain(ADMIN_PASSWORD);
  });
});

describe.skipIf(!existsSync(join(REPO, "dist", "postgres", "copyImport.js")))("through bin/lathe.js", () => {
  const run = (args: string[]) =>
    new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
      execFile(process.execPath, [BIN, "index", ...args], (e, stdout, stderr) => resolve({ code: e ? Number(e.code) : 0, stdout, stderr }));
    });

  it.skipIf(!CONFORMANCE.present)("loads, then exit 1 with one line when the server is gone, 2 on a bad URL", async () => {
    const db = await pg.createDatabase("child");
    const ok = await run(["--dedup-db", db, "--bucket", "kids", conf("wget-http.warc.gz"), conf("warcprox-capture.warc.gz")]);
    expect(ok.code, ok.stderr).toBe(0);
    expect(ok.stdout).toMatch(/^bucket: +kids$/m);
    expect(ok.stdout).toMatch(/^entries added: +22$/m);
    expect((await pg.query<{ n: string }>("SELECT count(*) AS n FROM dedup_entries WHERE bucket = 'kids'", [], "child"))[0]!.n).toBe("22");
    const gone = await run(["--dedup-db", db.replace(`:${pg.port}/`, ":1/"), conf("wget-http.warc.gz")]);
    expect(gone.code).toBe(1);
    expect(gone.stderr.trimEnd().split("\n")).toHaveLength(1);
    expect(gone.stderr).toContain("is unreachable");
    expect(gone.stderr).not.toContain(ADMIN_PASSWORD);
    const bad = await run(["--dedup-db", "postgresql://u:pw@h:notaport/db", conf("wget-http.warc.gz")]);
    expect(bad.code).toBe(2);
  });
});
