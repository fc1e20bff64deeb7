/**
 * The live index at the writer (no proxy): records whose pairing spans groups (a response, then
 * its POST request in the next write; a PUT request, then its response), blocks held in stream
 * sources with the HTTP head cut across chunks, records without WARC-Payload-Digest, warc-fields
 * metadata (not indexed), gzip and plain files. The index beside each closed file equals the one
 * read back from the file; the journal is gone; a writer abandoning a fresh file leaves nothing.
 */
import { existsSync, mkdirSync, readdirSync } from "node:fs";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { createLiveIndex, rebuiltLines, type LiveFileLines } from "../../src/index/live.js";
import { createLogger, silentLogger } from "../../src/core/log.js";
import type { RecordDraft } from "../../src/warc/types.js";
import { createWarcWriter } from "../../src/warc/writer.js";
import { bufferSource, writerOpts } from "../warc/helpers.js";

const dirs: string[] = [];
afterAll(async () => {
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});

let n = 0;
const id = () => `<urn:uuid:00000000-0000-4000-8000-${String(++n).padStart(12, "0")}>`;
const date = "2026-12-03T10:00:00.123456Z";

function draft(type: RecordDraft["type"], uri: string, extra: Array<[string, string]>, block: RecordDraft["block"], rid = id()): RecordDraft {
  return { type, id: rid, fields: [["WARC-Type", type], ["WARC-Record-ID", rid], ["WARC-Date", date], ["WARC-Target-URI", uri], ...extra], block };
}
const http = (s: string) => Buffer.from(s.replace(/\n/g, "\r\n"), "latin1");

/** The closed WARC in `dir` and its index lines as read back from it (`lathe index --cdxj`). */
async function closedFile(dir: string): Promise<{ path: string; want: string[] }> {
  const [file] = readdirSync(dir).filter((f) => /\.warc(\.gz)?$/.test(f));
  const path = join(dir, file!);
  const want: string[] = [];
  for await (const l of rebuiltLines(path)) want.push(l);
  return { path, want };
}

function groups(): RecordDraft[][] {
  const u1 = "http://example.com/form?x=1";
  const resp1 = id();
  const u2 = "https://example.com/api";
  const req2 = id();
  const bodyResp = Buffer.concat([http("HTTP/1.1 200 OK\nContent-Type: application/json; charset=utf-8\nContent-Length: 11\n\n"), Buffer.from('{"ok":true}')]);
  return [
    [draft("response", u1, [["Content-Type", "application/http;msgtype=response"], ["WARC-Payload-Digest", "sha1:AAAA"]], [bodyResp], resp1)],
    [draft("request", u1, [["WARC-Concurrent-To", resp1], ["Content-Type", "application/http;msgtype=request"]], [http("POST /form?x=1 HTTP/1.1\nHost: example.com\nContent-Type: application/x-www-form-urlencoded\nContent-Length: 13\n\n"), Buffer.from("a=1&b=hello+w")])],
    [draft("request", u2, [["Content-Type", "application/http;msgtype=request"]], [http("PUT /api HTTP/1.1\nHost: example.com\nContent-Type: application/octet-stream\nContent-Length: 4\n\n"), Buffer.from([1, 2, 3, 4])], req2)],
    [
      // The head arrives in 7-byte chunks from a stream source: no payload digest, computed.
      draft("response", u2, [["WARC-Concurrent-To", req2], ["Content-Type", "application/http;msgtype=response"]], [bufferSource(Buffer.concat([http("HTTP/1.1 201 Created\nContent-Type: text/plain\n\n"), Buffer.alloc(30000, 97)]), 7)]),
      draft("metadata", "http://example.com/form?x=1", [["Content-Type", "application/warc-fields"]], [Buffer.from("via: x\r\n")]),
      draft("metadata", "http://example.com/form?x=1", [["Content-Type", "application/json"]], [Buffer.from("{}")]),
    ],
    [draft("resource", "urn:view:http://example.com/form?x=1", [["Content-Type", "image/png"]], [bufferSource(Buffer.alloc(5000, 1), 999)])],
    [draft("revisit", u1, [["WARC-Profile", "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest"], ["WARC-Payload-Digest", "sha1:AAAA"], ["Content-Type", "application/http;msgtype=response"]], [http("HTTP/1.1 200 OK\nContent-Type: application/json\n\n")])],
  ];
}

describe("live index at the writer", () => {
  for (const gzip of [true, false]) {
    it(`equals the index read back from the closed file (${gzip ? "gzip" : "plain"})`, async () => {
      const dir = await mkdtemp(join(tmpdir(), "lathe-live-writer-"));
      dirs.push(dir);
      const closed: string[] = [];
      const index = createLiveIndex({ dir, log: silentLogger, onClosed: (_name, p) => closed.push(p) });
      const w = createWarcWriter(writerOpts(dir, { gzip, index }));
      for (const g of groups()) await w.write(g);
      expect(readdirSync(dir).filter((f) => f.endsWith(".cdxj.open"))).toHaveLength(1);
      await w.close();
      const { path, want } = await closedFile(dir);
      expect(closed).toEqual([`${path}.cdxj`]);
      const live = await readFile(`${path}.cdxj`, "utf8");
      expect(live).toBe(want.join(""));
      expect(live).toMatch(/\)\/form\?__wb_method=post&a=1&b=hello%20w&x=1 /);
      expect(live).toMatch(/\)\/api\?__wb_method=put&__wb_post_data=aqidba== /);
      expect(live.split("\n").filter(Boolean)).toHaveLength(5); // 2 responses, 1 metadata, 1 resource, 1 revisit
      expect(existsSync(`${path}.cdxj.open`)).toBe(false);
    });
  }
});

/** `n` captures of `/<dir>/NN` (a response and its GET request: one index line each), in reverse key order. */
async function writeCaptures(w: { write(g: RecordDraft[]): Promise<unknown> }, n: number, dir: string): Promise<void> {
  for (let i = 0; i < n; i++) {
    const resp = id();
    const uri = `http://example.com/${dir}/${String(n - 1 - i).padStart(2, "0")}`;
    await w.write([
      draft("response", uri, [["Content-Type", "application/http;msgtype=response"], ["WARC-Payload-Digest", `sha1:${dir}${String(i).padStart(28, "A")}`]], [http("HTTP/1.1 200 OK\nContent-Type: text/html\nContent-Length: 2\n\nhi")], resp),
      draft("request", uri, [["WARC-Concurrent-To", resp], ["Content-Type", "application/http;msgtype=request"]], [http(`GET /${dir}/${i} HTTP/1.1\nHost: example.com\n\n`)]),
    ]);
  }
}

describe("an open file's lines past the spill bound", () => {
  it("go to sorted runs beside the journal, which queries read with the lines in memory; the closed file's index is whole and the runs go", async () => {
    const dir = await mkdtemp(join(tmpdir(), "lathe-live-spill-"));
    dirs.push(dir);
    let open: LiveFileLines | null = null;
    const index = createLiveIndex({ dir, log: silentLogger, spillLines: 10, onOpened: (_name, lines) => void (open = lines) });
    const w = createWarcWriter(writerOpts(dir, { gzip: true, index }));
    // 49 captures (a response and its GET request: one line), then the groups above. Their first,
    // a response alone, is the 50th line: a run goes to disk while that line waits for its POST
    // request in the next group (and is then replaced), so it must stay in memory.
    await writeCaptures(w, 49, "page");
    for (const g of groups()) await w.write(g);
    const lines = open as unknown as LiveFileLines;
    expect(lines.count).toBe(54);
    for (let i = 0; i < 100 && lines.runs.length < 5; i++) await new Promise((r) => setTimeout(r, 10));
    expect(lines.runs.length).toBe(5);
    for (const r of lines.runs) expect(r).toMatch(/\.warc\.gz\.cdxj\.open\.run-\d$/);
    // What a query reads: the runs on disk and the arrays in memory, each sorted, together every line once.
    const q = lines.forQuery();
    const parts = [...q.memory.map((m) => m.map((l) => `${l}\n`)), ...(await Promise.all(q.files.map(async (f) => (await readFile(f, "utf8")).split(/(?<=\n)/))))];
    for (const part of parts) expect(part).toEqual([...part].sort());
    const seen = parts.flat().sort();
    await w.close();
    const { path, want } = await closedFile(dir);
    expect(want).toHaveLength(54);
    expect(seen).toEqual([...want].sort());
    expect(await readFile(`${path}.cdxj`, "utf8")).toBe(want.join(""));
    expect(want.join("")).toMatch(/\)\/form\?__wb_method=post&a=1&b=hello%20w&x=1 /);
    for (let i = 0; i < 100 && readdirSync(dir).some((f) => f.includes(".run-")); i++) await new Promise((r) => setTimeout(r, 10));
    expect(readdirSync(dir).filter((f) => f.includes(".cdxj.open"))).toEqual([]);
  });

  it("stay in memory when a run cannot be written, said in the log; queries and the closed file's index still have every line", async () => {
    const dir = await mkdtemp(join(tmpdir(), "lathe-live-spill-fail-"));
    dirs.push(dir);
    let open: LiveFileLines | null = null;
    const logs: Array<Record<string, unknown>> = [];
    const log = createLogger({ json: true, level: "warn", write: (l) => logs.push(JSON.parse(l) as Record<string, unknown>) });
    // A directory where the first run's file would go: the rename that puts a run in place fails.
    const onOpened = (name: string, lines: LiveFileLines) => {
      open = lines;
      mkdirSync(join(dir, `${name}.cdxj.open.run-0`, "taken"), { recursive: true });
    };
    const index = createLiveIndex({ dir, log, spillLines: 10, onOpened });
    const w = createWarcWriter(writerOpts(dir, { gzip: true, index }));
    await writeCaptures(w, 25, "item");
    const lines = open as unknown as LiveFileLines;
    for (let i = 0; i < 100 && !logs.some((e) => e.event === "cdx-live-spill-failed"); i++) await new Promise((r) => setTimeout(r, 10));
    expect(logs.filter((e) => e.event === "cdx-live-spill-failed")).toHaveLength(1);
    expect(lines.runs).toEqual([]);
    const q = lines.forQuery();
    expect(q.files).toEqual([]);
    expect(q.memory.flat()).toHaveLength(25);
    await w.close();
    const { path, want } = await closedFile(dir);
    expect(want).toHaveLength(25);
    expect(await readFile(`${path}.cdxj`, "utf8")).toBe(want.join(""));
  });
});

