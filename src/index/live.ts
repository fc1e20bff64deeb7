/**
 * The live CDXJ index (issue "CDXJ index"; decisions.md §6): while `NAME.warc.gz.open` is
 * written, each group's index lines are appended to `NAME.warc.gz.cdxj.open` (unsorted, a
 * journal) and kept in memory; when the writer closes the file, the sorted `NAME.warc.gz.cdxj`
 * is written (temporary file + rename) before the WARC gets its final name, and the journal is
 * removed.
 *
 * Past `spillLines` lines (50,000 by default, ~17 MB of heap at ~350 bytes a line) the file's
 * lines go to a sorted run beside the journal (`NAME.warc.gz.cdxj.open.run-N`), read by queries
 * from there, merged into the final index at close and removed: the memory a file's index holds
 * does not grow with the file (a 1 GB file of tiny captures holds ~700,000 lines).
 *
 * The lines come from the same entry builder as `lathe index --cdxj` (cdxj.ts), fed with the
 * record drafts as they landed: the header fields as the writer serialised them, the block from
 * the draft's parts, the offset and length of the gzip member on disk. Pairing of a response with
 * its POST/PUT request follows the same adjacency rule as the file reader, across groups too. If
 * anything goes wrong for a file, its index is rebuilt from the closed file instead.
 */
import { open, rm, type FileHandle } from "node:fs/promises";
import { basename } from "node:path";
import { appendWhole } from "../core/appendWhole.js";
import { errorMessage } from "../core/errors.js";
import type { Logger } from "../core/log.js";
import type { WarcRecord } from "../warc/warcRecord.js";
import type { LandedRecord, WriterIndexHook } from "../warc/writer.js";
import { buildEntry, computedPayloadDigest, formatCdxj, indexWarc, isIndexed, pairOf, postAppendFor, sortLines, type PostAppend } from "./cdxj.js";
import { mergeIndexesToFile, writeLinesToFile } from "./build.js";
import { landedRecord } from "./landedRecord.js";

/** Lines kept unsorted (sorted per query) before they are merged into the sorted ones. */
const TAIL_MAX = 2048;
/** Lines of an open file kept in memory before they go to a sorted run on disk. */
const SPILL_LINES = 50_000;
/**
 * How long a journal write waits for more lines: each write through the threadpool costs ~40 µs
 * of CPU however short, and under load a group lands every few hundred µs (the journal is behind
 * the queue anyway: queries read memory, recovery rebuilds the index after a crash).
 */
const JOURNAL_COALESCE_MS = 10;

/**
 * A WarcRecord view of a landed draft, with what the entry builder needs worked out up front
 * (HTTP head, payload digest, POST query): the draft's spooled block may be released as soon as
 * its write resolves, and a record may only pair with the next group's first record.
 */
export interface PreparedRecord {
  rec: WarcRecord;
  /** The payload digest of an indexed record. */
  digest: string | null;
  /** For a request: what it adds to the response it pairs with (POST/PUT only). */
  post: PostAppend | null;
}

/**
 * The record ready for the entry builder; synchronous for nearly every record (its head in
 * memory, its payload digest in its fields, not a POST or PUT), which spares the live index two
 * async frames per record.
 */
export function prepareLanded(l: LandedRecord, filename: string): PreparedRecord | Promise<PreparedRecord> {
  const r = landedRecord(l.draft, l.offset, l.length, filename);
  return r instanceof Promise ? r.then(preparedFrom) : preparedFrom(r);
}

function preparedFrom(rec: WarcRecord): PreparedRecord | Promise<PreparedRecord> {
  const indexed = isIndexed(rec);
  // Parsed now, while the draft's block is surely there: the line may be built again later.
  if (indexed) rec.httpHead();
  const given = indexed ? rec.get("warc-payload-digest") : null;
  const mayPost = rec.warcType === "request" && mayBePostOrPut(rec.blockPrefix);
  if ((!indexed || given) && !mayPost) return { rec, digest: indexed ? given : null, post: null };
  return preparedSlowly(rec, indexed, given, mayPost);
}

async function preparedSlowly(rec: WarcRecord, indexed: boolean, given: string | null, mayPost: boolean): Promise<PreparedRecord> {
  const digest = indexed ? given || (await computedPayloadDigest(rec)) : null;
  const post = mayPost ? await postAppendFor(rec) : null;
  return { rec, digest, post };
}

/**
 * Whether a request block may start a POST or PUT head. The head parser takes a request's method
 * only from a first line that begins `METHOD ` in upper case, so any other start means
 * postAppendFor gives null: a GET's head need not be parsed at all (it is not indexed either).
 */
function mayBePostOrPut(b: Buffer): boolean {
  // Byte by byte: two subarrays and two equals() calls per request cost more than its head.
  if (b[0] === 0x50 && b[1] === 0x4f && b[2] === 0x53 && b[3] === 0x54 && b[4] === 0x20) return true; // "POST "
  return b[0] === 0x50 && b[1] === 0x55 && b[2] === 0x54 && b[3] === 0x20; // "PUT "
}

/**
 * The index lines of one WARC file as its groups land, in file order. `add` returns the lines
 * that are new; a line may be replaced later (a response whose POST request is the first
 * record of the next group), which `lines()` reflects.
 */
export class LiveFileLines {
  readonly filename: string;
  /** The lines in memory (those since the last run went to disk), in file order. */
  #lines: string[] = [];
  #prev: { p: PreparedRecord; line: string | null } | null = null;
  /** For queries, the lines without LF: a sorted array never changed in place (a query may be
   * reading it), and the latest lines unsorted, merged into it now and then. */
  #main: string[] = [];
  #tail: string[] = [];
  /** Where runs go (`…run-N`), null = never; how many lines in memory send them there. */
  readonly #runBase: string | null;
  readonly #spillLines: number;
  /** Sorted runs on disk, oldest first. */
  #runs: string[] = [];
  /** The run being written: its lines are answered from memory until it is on disk. */
  #spilling: { query: string[]; done: Promise<void> } | null = null;
  /** Runs that could not be written (disk full): kept in memory, and no more runs are tried. */
  #unspilled: string[][] = [];
  #spilled = 0;

  readonly #onSpillFailed: (path: string, e: unknown) => void;

  /**
   * `runBase`: path prefix of the sorted runs (none: every line stays in memory);
   * `onSpillFailed`: told when a run could not be written (its lines stay in memory).
   */
  constructor(filename: string, runBase: string | null = null, spillLines = SPILL_LINES, onSpillFailed: (path: string, e: unknown) => void = () => {}) {
    this.filename = filename;
    this.#runBase = runBase;
    this.#spillLines = spillLines;
    this.#onSpillFailed = onSpillFailed;
  }

  get count(): number {
    return this.#spilled + this.#lines.length;
  }

  /** Sorted runs on disk so far. */
  get runs(): readonly string[] {
    return this.#runs;
  }

  /** Records of one group, in file order; returns the lines to journal. */
  add(records: PreparedRecord[]): string[] {
    const added: string[] = [];
    const entry = (p: PreparedRecord, req: PreparedRecord | null): string | null => (p.digest === null ? null : formatCdxj(buildEntry(p.rec, this.filename, p.digest, req ? req.post : null)));
    const push = (line: string | null) => {
      if (line === null) return;
      this.#lines.push(line);
      added.push(line);
      this.#tail.push(line.slice(0, -1));
      if (this.#tail.length >= TAIL_MAX) this.#compact();
    };
    for (const p of records) {
      const prev = this.#prev;
      const pair = prev ? pairOf(prev.p.rec, p.rec) : null;
      if (prev && pair) {
        if (pair.resp === prev.p.rec) {
          // The response went in plain; with its request known, its line may change (only a
          // POST/PUT request adds anything: for others the line is the one already built).
          const line = p.post === null ? prev.line : entry(prev.p, p);
          if (line !== prev.line) {
            if (prev.line !== null) {
              const i = this.#lines.lastIndexOf(prev.line);
              if (i >= 0) this.#lines.splice(i, 1);
              const q = prev.line.slice(0, -1);
              const j = this.#tail.lastIndexOf(q);
              if (j >= 0) this.#tail.splice(j, 1);
              else this.#main = this.#main.filter((x) => x !== q);
            }
            push(line);
          }
          push(entry(p, null));
        } else {
          push(entry(p, prev.p));
        }
        this.#prev = null;
      } else {
        const line = entry(p, null);
        push(line);
        this.#prev = { p, line };
      }
    }
    if (this.#lines.length >= this.#spillLines && this.#runBase !== null && !this.#spilling && this.#unspilled.length === 0) this.#spill();
    return added;
  }

  /**
   * The lines in memory go to a sorted run on disk (written behind; answered from memory till
   * then), except the line of a record still waiting for its pair: it may yet be replaced, and
   * it is the last line added.
   */
  #spill(): void {
    const waiting = this.#prev?.line ?? null;
    if (waiting !== null && this.#lines[this.#lines.length - 1] !== waiting) return;
    this.#compact();
    let query = this.#main;
    let lines = this.#lines;
    if (waiting !== null) {
      lines = lines.slice(0, -1);
      const i = query.lastIndexOf(waiting.slice(0, -1));
      query = query.slice(0, i).concat(query.slice(i + 1));
    }
    const path = `${this.#runBase}${this.#runs.length}`;
    this.#main = [];
    this.#lines = waiting === null ? [] : [waiting];
    this.#tail = waiting === null ? [] : [waiting.slice(0, -1)];
    this.#spilled += lines.length;
    // Made from the query lines, sorted already: sorting the file-order lines held the event loop
    // 20-70 ms at 50,000 lines, an already sorted array ~4 ms (sortLines still sorts, for the
    // UTF-8 order of lines with surrogates, and drops duplicates).
    const run = sortLines(query.map((l) => `${l}\n`));
    // Each outcome swaps the memory for the file (or keeps it) in one step: a query between the
    // two would see the lines twice.
    const done = writeLinesToFile(asAsync(run), path).then(
      () => {
        this.#runs.push(path);
        this.#spilling = null;
      },
      // Disk full or the like: the lines stay in memory, as before runs existed.
      (e: unknown) => {
        this.#spilled -= lines.length;
        this.#lines = lines.concat(this.#lines);
        this.#unspilled.push(query);
        this.#spilling = null;
        this.#onSpillFailed(path, e);
      },
    );
    this.#spilling = { query, done };
  }

  /** Waits for a run being written. */
  async #settled(): Promise<void> {
    while (this.#spilling) await this.#spilling.done;
  }

  /** Writes the file's whole index, sorted and de-duplicated, to `out` (atomically). */
  async writeSorted(out: string): Promise<void> {
    await this.#settled();
    const rest = sortLines(this.#lines);
    if (this.#runs.length === 0) {
      await writeLinesToFile(asAsync(rest), out);
      return;
    }
    const inputs = [...this.#runs];
    if (rest.length > 0) {
      const last = `${this.#runBase}${inputs.length}`;
      await writeLinesToFile(asAsync(rest), last);
      this.#runs.push(last);
      inputs.push(last);
    }
    await mergeIndexesToFile(inputs, out);
  }

  /** Removes the runs (the file's index is written, or the file is gone). */
  async dispose(): Promise<void> {
    await this.#settled();
    const runs = this.#runs;
    this.#runs = [];
    await Promise.all(runs.map((r) => rm(r, { force: true })));
  }

  /**
   * For a query, a snapshot (later lines go elsewhere): the lines in memory without their LF, as
   * sorted arrays to merge, and the sorted runs on disk.
   */
  forQuery(): { memory: string[][]; files: string[] } {
    const tail = [...this.#tail].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
    const memory = [this.#main, ...this.#unspilled];
    if (tail.length) memory.push(tail);
    if (this.#spilling) memory.push(this.#spilling.query);
    return { memory, files: [...this.#runs] };
  }

  #compact(): void {
    const tail = this.#tail.sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
    const main = this.#main;
    const out = new Array<string>(main.length + tail.length);
    let i = 0;
    let j = 0;
    let k = 0;
    while (i < main.length && j < tail.length) out[k++] = main[i]! <= tail[j]! ? main[i++]! : tail[j++]!;
    while (i < main.length) out[k++] = main[i++]!;
    while (j < tail.length) out[k++] = tail[j++]!;
    this.#main = out;
    this.#tail = [];
  }
}

export interface LiveIndexOptions {
  /** Directory of the WARC files. */
  dir: string;
  log: Logger;
  /** Lines of an open file kept in memory before they go to a sorted run beside its journal (default 50,000). */
  spillLines?: number;
  /**
   * Takes over a closed file's runs: the CDX service keeps them a while for queries that took them
   * before the file closed (service.ts). Without it they go at once.
   */
  retireRuns?(lines: LiveFileLines): void;
  /** A file of the series was opened: `name` is its final name. */
  onOpened?(name: string, lines: LiveFileLines): Promise<void> | void;
  /** Its sorted index is on disk (`cdxjPath`) and the WARC has its final name. */
  onClosed?(name: string, cdxjPath: string): void;
  /** It was removed or left for recovery: its lines are no longer live. */
  onDropped?(name: string): void;
}

export const indexPathOf = (warcPath: string): string => `${warcPath}.cdxj`;
export const journalPathOf = (warcPath: string): string => `${warcPath}.cdxj.open`;

interface LiveFile {
  lines: LiveFileLines;
  openPath: string;
  finalPath: string;
  broken: boolean;
  /** The journal, written behind the queue: queries read memory, a crash is repaired by recovery. */
  journal: FileHandle | null;
  journalled: Promise<void>;
  backlog: string[];
}

/** The index hook of one writer (series). */
export function createLiveIndex(o: LiveIndexOptions): WriterIndexHook {
  const files = new Map<string, LiveFile>();
  const finish = async (f: LiveFile, removeJournal: boolean) => {
    await f.journalled;
    await f.journal?.close().catch(() => {});
    f.journal = null;
    if (removeJournal) await rm(journalPathOf(f.finalPath), { force: true });
  };
  return {
    async opened({ name, openPath, finalPath }) {
      const spillFailed = (path: string, e: unknown) => o.log.warn("cdx-live-spill-failed", { file: name, run: path, error: errorMessage(e), kept: "in memory" });
      const lines = new LiveFileLines(name, `${journalPathOf(finalPath)}.run-`, o.spillLines, spillFailed);
      let journal: FileHandle | null = null;
      try {
        journal = await open(journalPathOf(finalPath), "w", 0o644);
      } catch (e) {
        o.log.warn("cdx-journal-failed", { file: name, error: errorMessage(e) });
      }
      files.set(name, { lines, openPath, finalPath, broken: false, journal, journalled: Promise.resolve(), backlog: [] });
      await o.onOpened?.(name, lines);
    },
    async written(name, records) {
      const f = files.get(name);
      if (!f || f.broken) return;
      try {
        const prepared: PreparedRecord[] = [];
        for (const r of records) {
          const p = prepareLanded(r, name);
          prepared.push(p instanceof Promise ? await p : p);
        }
        const added = f.lines.add(prepared);
        if (added.length && f.journal) {
          // Lines that come while a write waits or is in flight go together in the next one.
          const flushing = f.backlog.length > 0;
          f.backlog.push(...added);
          if (!flushing) {
            f.journalled = f.journalled.then(async () => {
              await new Promise((r) => setTimeout(r, JOURNAL_COALESCE_MS));
              const text = f.backlog.join("");
              f.backlog = [];
              try {
                if (f.journal) await appendWhole(f.journal, Buffer.from(text));
              } catch (e) {
                if (f.journal) o.log.warn("cdx-journal-failed", { file: name, error: errorMessage(e) });
                f.journal = null;
              }
            });
          }
        }
      } catch (e) {
        // The file is fine; its index will be read from it at close.
        f.broken = true;
        o.log.warn("cdx-live-index-broken", { file: name, error: errorMessage(e) });
      }
    },
    async closing(name) {
      const f = files.get(name);
      if (!f) return;
      const out = indexPathOf(f.finalPath);
      if (f.broken) await writeLinesToFile(rebuiltLines(f.openPath, name), out);
      else await f.lines.writeSorted(out);
    },
    async closed(name, finalPath) {
      const f = files.get(name);
      files.delete(name);
      if (f) await finish(f, true);
      else await rm(journalPathOf(finalPath), { force: true });
      if (f) o.onClosed?.(name, indexPathOf(finalPath));
      // Start-up removes any a crash left behind.
      if (f?.lines.runs.length) {
        if (o.retireRuns) o.retireRuns(f.lines);
        else await f.lines.dispose();
      }
    },
    async abandoned(name, removed) {
      const f = files.get(name);
      files.delete(name);
      if (!f) return;
      // Left `.open`: the journal stays beside it until start-up recovery rebuilds the index.
      await finish(f, removed);
      o.onDropped?.(name);
      // Start-up recovery rebuilds the index from the file, not from these.
      await f.lines.dispose();
    },
  };
}

async function* asAsync(lines: string[]): AsyncGenerator<string> {
  yield* lines;
}

/** The sorted index lines of one WARC file, read from it (`filename` = the name in the lines). */
export async function* rebuiltLines(path: string, filename = basename(path)): AsyncGenerator<string> {
  const lines: string[] = [];
  for await (const e of indexWarc(path, { filename })) lines.push(formatCdxj(e));
  yield* sortLines(lines);
}

/**
 * Start-up: a WARC that recovery renamed gets its index written again from its content (the
 * journal of its last session is dropped); one that recovery deleted loses its journal too.
 */
export async function regenerateIndex(warcPath: string, deleted: boolean): Promise<number> {
  await rm(journalPathOf(warcPath), { force: true });
  if (deleted) {
    await rm(indexPathOf(warcPath), { force: true });
    return 0;
  }
  return writeLinesToFile(rebuiltLines(warcPath), indexPathOf(warcPath));
}
