/**
 * What "nothing lost" means, checked on a WARC directory as lathe left it (crash test, disk-full
 * tests): no `.open` file; every record reads back (warcio) with valid digests; every response a
 * client received completely is archived byte-exact (a response, or a revisit of one); no dedup
 * or CDXJ index entry points at a record that is not on disk; optionally, each client's captures
 * in the order it made them, and one crawl log line per capture naming its file.
 */
import { closeSync, existsSync, openSync, readFileSync, readSync, readdirSync } from "node:fs";
import { createHash } from "node:crypto";
import { basename, join } from "node:path";
import { gunzipSync } from "node:zlib";
import Database from "better-sqlite3";
import { expect } from "vitest";
import { unpackRecordId } from "../../src/dedup/sqliteKeys.js";
import { checkDigests, readAllWarcs, type ReadRecord } from "./warcs.js";

export const sha1 = (b: Buffer) => createHash("sha1").update(b).digest("hex");

/** A response a client received completely: the URL (unique per request) and its body's hash. */
export interface Received {
  url: string;
  sha1: string;
  /** The client (a sequential worker) that made it, and its place in that worker's requests. */
  worker?: number;
  seq?: number;
  /** When the client had it all (ms). */
  at?: number;
}

export interface CheckOptions {
  /** The dedup database; default `lathe-dedup.sqlite3` in the directory. */
  dedupDb?: string;
  /** Each worker's captures must appear in the WARCs in the order it made them. */
  inOrder?: boolean;
  /** The crawl log file: one line per received URL, naming the WARC file of its record. */
  crawlLog?: string;
  /** Received responses may be missing (rollover durability after kill -9): returned, not failed. */
  allowMissing?: boolean;
}

/** Everything above, checked; the counts found. */
export async function checkArchive(dir: string, received: Received[], o: CheckOptions = {}): Promise<{ records: number; dedupRows: number; cdxLines: number; missing: Received[] }> {
  const names = readdirSync(dir);
  expect(names.filter((f) => f.endsWith(".open")), "no .open file is left").toEqual([]);
  const recs = await readAllWarcs(dir);
  for (const r of recs) expect(checkDigests(r), `${r.file} ${r.get("WARC-Record-ID")}`).toEqual([]);
  const { byUri, missing } = checkReceived(recs, received, o.allowMissing ?? false);
  if (o.inOrder) checkOrder(recs, received);
  if (o.crawlLog) checkCrawlLog(o.crawlLog, received, byUri);
  const dedupRows = checkDedup(dir, new Set(recs.map((r) => r.get("WARC-Record-ID"))), o.dedupDb ?? join(dir, "lathe-dedup.sqlite3"));
  return { records: recs.length, dedupRows, cdxLines: checkCdx(dir, names), missing };
}

/** Every complete answer is archived, byte-exact: as a response, or as a revisit of one. */
function checkReceived(recs: ReadRecord[], received: Received[], allowMissing: boolean): { byUri: Map<string, ReadRecord>; missing: Received[] } {
  const byUri = new Map<string, ReadRecord>();
  const bodyByDigest = new Map<string, string>();
  for (const r of recs) {
    if (r.type === "response" || r.type === "revisit") byUri.set(r.get("WARC-Target-URI")!, r);
    if (r.type === "response" && !r.get("WARC-Truncated")) bodyByDigest.set(r.get("WARC-Payload-Digest")!, sha1(r.body!));
  }
  const missing: Received[] = [];
  for (const g of received) {
    const r = byUri.get(g.url);
    if (!r && allowMissing) {
      missing.push(g);
      continue;
    }
    expect(r, `a client received ${g.url} completely, so it must be archived`).toBeDefined();
    const stored = r!.type === "response" ? sha1(r!.body!) : bodyByDigest.get(r!.get("WARC-Payload-Digest")!);
    expect(stored, `${g.url} archived byte-exact`).toBe(g.sha1);
  }
  return { byUri, missing };
}

function checkOrder(recs: ReadRecord[], received: Received[]): void {
  const position = new Map<string, number>();
  recs.forEach((r, i) => {
    if (r.type === "response" || r.type === "revisit") position.set(r.get("WARC-Target-URI")!, i);
  });
  const workers = new Map<number, Received[]>();
  for (const g of received) if (g.worker !== undefined) workers.set(g.worker, [...(workers.get(g.worker) ?? []), g]);
  for (const [w, list] of workers) {
    const sorted = [...list].sort((a, b) => a.seq! - b.seq!);
    const at = sorted.map((g) => position.get(g.url)!);
    expect(at, `worker ${w}: its captures in the WARCs in the order it made them`).toEqual([...at].sort((a, b) => a - b));
  }
}

function checkCrawlLog(path: string, received: Received[], byUri: Map<string, ReadRecord>): void {
  const lines = readFileSync(path, "utf8").split("\n").filter(Boolean);
  const byUrl = new Map<string, string[][]>();
  for (const l of lines) {
    const f = l.split(/ +/);
    byUrl.set(f[3]!, [...(byUrl.get(f[3]!) ?? []), f]);
  }
  for (const g of received) {
    const got = byUrl.get(g.url) ?? [];
    expect(got.length, `one crawl log line for ${g.url}`).toBe(1);
    const extra = JSON.parse(got[0]!.at(-1)!) as { warcFilename?: string };
    expect(got[0]![1]).toBe("200");
    expect(extra.warcFilename, `crawl log line of ${g.url} names its WARC`).toBe(basename(byUri.get(g.url)!.file));
  }
}

/** Dedup entries point at records that are on disk, at their exact offsets. */
function checkDedup(dir: string, ids: Set<string | undefined>, dbPath: string): number {
  const db = new Database(dbPath, { readonly: true, fileMustExist: true });
  const rows = (db.prepare("SELECT e.record_id AS id, f.name AS file, e.offset AS offset, e.length AS length FROM entries e JOIN files f ON f.id = e.file").all() as Array<{ id: unknown; file: string; offset: number; length: number }>).map((r) => ({ ...r, id: unpackRecordId(r.id)! }));
  db.close();
  for (const row of rows) {
    expect(ids.has(row.id), `dedup entry ${row.id} → ${row.file}`).toBe(true);
    expect(member(dir, row.file, row.offset, row.length)).toContain(`WARC-Record-ID: ${row.id}\r\n`);
  }
  return rows.length;
}

/** CDXJ index lines (one sorted NAME.warc.gz.cdxj or NAME.warc.cdxj per WARC) point at records that are on disk. */
function checkCdx(dir: string, names: string[]): number {
  let cdxLines = 0;
  for (const f of names.filter((x) => /\.warc(\.gz)?\.cdxj$/.test(x))) {
    expect(existsSync(join(dir, f.slice(0, -".cdxj".length))), `${f} belongs to a WARC`).toBe(true);
    for (const line of readFileSync(join(dir, f), "utf8").split("\n").filter(Boolean)) {
      const j = JSON.parse(line.slice(line.indexOf("{"))) as { url: string; offset: string | number; length: string | number; filename: string };
      const text = member(dir, j.filename, Number(j.offset), Number(j.length));
      expect(text, `${f}: ${j.url} at ${j.offset}`).toContain(`\r\nWARC-Target-URI: ${j.url}\r\n`);
      cdxLines++;
    }
  }
  return cdxLines;
}

/** The record at `offset`: its gzip member inflated, or (a `.warc`) its bytes as they are. */
function member(dir: string, file: string, offset: number, length: number): string {
  const fd = openSync(join(dir, file), "r");
  const buf = Buffer.alloc(length);
  readSync(fd, buf, 0, length, offset);
  closeSync(fd);
  return (file.endsWith(".gz") ? gunzipSync(buf) : buf).toString("latin1");
}
