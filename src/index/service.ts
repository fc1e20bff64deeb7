/**
 * The CDX index of each collection (decisions.md §6), kept LSM-style under
 * `<warcDir>/lathe-cdx/`:
 * - `files.tsv`: `WARC file name TAB collection`, one line per file, appended when the file is
 *   opened (so a file recovered at start-up is still attributed);
 * - `<collection>/state.json`: `{"runs": [{"file": "merged-<n>.cdxj", "files": [...], "bytes": N}, …]}`,
 *   the merged runs (largest, oldest first) and the WARC files each holds, replaced atomically
 *   after each merge (the first version's `{"merged", "files"}` is read as one run);
 * - `<collection>/merged-<n>.cdxj`: one run, the sorted index of its files.
 * A query reads every run, the sorted `.cdxj` of each closed file not merged yet, and the lines of
 * the files still open (memory). Closed files are merged in the background.
 *
 * Runs are tiered, so a long crawl does not rewrite everything it has indexed at every merge (one
 * merged file rewritten each time cost O(n²): 1.5 s of CPU per merge after a 12-minute soak, and
 * growing). New files become a run of their own, which absorbs the runs before it while they are
 * at most twice its size: run sizes grow geometrically, a line is rewritten O(log n) times, and a
 * query binary-searches O(log n) runs.
 */
import { appendFile, mkdir, readFile, readdir, rm, stat } from "node:fs/promises";
import { basename, join } from "node:path";
import { errorMessage } from "../core/errors.js";
import type { Logger } from "../core/log.js";
import type { WriterIndexHook } from "../warc/writer.js";
import { mergeIndexesToFile, writeFileAtomically } from "./build.js";
import { createLiveIndex, indexPathOf, regenerateIndex, type LiveFileLines } from "./live.js";
import { relatedLines, runQuery, type CdxLine, type CdxQuery } from "./query.js";
import { MemoryLines, SortedFile, type LineSource } from "./sortedFile.js";

export interface CdxServiceOptions {
  warcDir: string;
  log: Logger;
  /** Names of the collections that exist (a query without `collection=` covers them all). */
  collections(): string[];
  /** Merge closed files' indexes after this many are waiting (default 8)… */
  mergeAfterFiles?: number;
  /** …or this long after the first one closed (default 60 s; 0 = only by count or mergeNow). */
  mergeAfterMs?: number;
  /** Lines of an open file kept in memory before they go to a sorted run on disk (live.ts; default 50,000). */
  liveSpillLines?: number;
}

/** One merged, sorted index file and the WARC files whose lines it holds. */
interface Run {
  path: string;
  files: string[];
  bytes: number;
}

interface CollectionIndex {
  name: string;
  dir: string;
  /** Largest (oldest) first. */
  runs: Run[];
  /** Closed files whose own `.cdxj` is read until they are merged: file name → index path. */
  pending: Map<string, string>;
  /** Files being written. */
  open: Map<string, LiveFileLines>;
  generation: number;
  merging: Promise<void> | null;
  timer: NodeJS.Timeout | null;
}

const SAFE_NAME = /^[a-z0-9][a-z0-9._-]{0,63}$/;

export class CdxService {
  readonly #o: CdxServiceOptions;
  readonly #root: string;
  readonly #colls = new Map<string, CollectionIndex>();
  readonly #fileColl = new Map<string, string>();
  /** Sorted index files held open across queries: each keeps the probes of its binary searches. */
  readonly #files = new Map<string, Promise<SortedFile>>();
  /** Closed files' runs (live.ts), removed a while after their file closed, or when this closes. */
  readonly #retiring = new Map<LiveFileLines, NodeJS.Timeout>();
  #closed = false;

  constructor(o: CdxServiceOptions) {
    this.#o = o;
    this.#root = join(o.warcDir, "lathe-cdx");
  }

  /** Read the state on disk: merged indexes, and closed files not merged yet. */
  async start(): Promise<void> {
    await mkdir(this.#root, { recursive: true });
    let text = "";
    try {
      text = await readFile(join(this.#root, "files.tsv"), "utf8");
    } catch {
      // No file yet.
    }
    for (const line of text.split("\n")) {
      const [file, coll] = line.split("\t");
      if (file && coll && SAFE_NAME.test(coll)) this.#fileColl.set(file, coll);
    }
    // Start-up recovery has run: no file is being written, so every journal left is stale.
    for (const n of await readdir(this.#o.warcDir).catch(() => [] as string[])) {
      // Journals, and the sorted runs of their files' lines (with a run's temporary file).
      if (n.endsWith(".warc.gz.cdxj.open") || n.endsWith(".warc.cdxj.open") || /\.warc(\.gz)?\.cdxj\.open\.run-\d+(\.tmp-.*)?$/.test(n)) await rm(join(this.#o.warcDir, n), { force: true });
    }
    for (const coll of new Set(this.#fileColl.values())) await this.#load(coll);
    // Files some run already holds (read once from the state, at start-up only).
    const merged = new Set([...this.#colls.values()].flatMap((c) => c.runs.flatMap((r) => r.files)));
    for (const [file, coll] of this.#fileColl) {
      const c = this.#colls.get(coll)!;
      const warc = join(this.#o.warcDir, file);
      const idx = indexPathOf(warc);
      let indexed = await exists(idx);
      if (!indexed && (await exists(warc))) {
        // Its index could not be written at close (logged then), or was removed: read it again.
        try {
          await regenerateIndex(warc, false);
          indexed = true;
        } catch (e) {
          this.#o.log.error("cdx-index-regeneration-failed", { file, error: errorMessage(e) });
        }
      }
      if (indexed && !merged.has(file)) c.pending.set(file, idx);
    }
    for (const c of this.#colls.values()) if (c.pending.size) this.#scheduleMerge(c);
  }

  async #load(name: string): Promise<CollectionIndex> {
    let c = this.#colls.get(name);
    if (c) return c;
    c = { name, dir: join(this.#root, name), runs: [], pending: new Map(), open: new Map(), generation: 0, merging: null, timer: null };
    this.#colls.set(name, c);
    let st: { runs?: Array<{ file: string; files: string[]; bytes?: number }>; merged?: string; files?: string[]; generation: number } | null = null;
    try {
      st = JSON.parse(await readFile(join(c.dir, "state.json"), "utf8"));
    } catch {
      // Nothing merged yet.
    }
    if (st) {
      const runs = st.runs ?? (st.merged ? [{ file: st.merged, files: st.files ?? [] }] : []);
      for (const r of runs) {
        const path = join(c.dir, basename(r.file));
        c.runs.push({ path, files: r.files, bytes: r.bytes ?? (await stat(path).then((x) => x.size, () => 0)) });
      }
      c.generation = st.generation;
    }
    // Runs no state names (retired by a merge whose clean-up timer did not outlive the process,
    // or written by a merge cut short) are removed: nothing reads them.
    const live = new Set(c.runs.map((r) => basename(r.path)));
    for (const n of await readdir(c.dir).catch(() => [] as string[])) {
      if ((/^merged-\d+\.cdxj$/.test(n) && !live.has(n)) || /^\.merged-\d+\.cdxj\.tmp-/.test(n) || /^\.state\.json\.tmp-/.test(n)) await rm(join(c.dir, n), { force: true });
    }
    return c;
  }

  /** The index hook for a writer of `collection`'s files. */
  hookFor(collection: string): WriterIndexHook {
    return createLiveIndex({
      dir: this.#o.warcDir,
      log: this.#o.log,
      spillLines: this.#o.liveSpillLines,
      retireRuns: (lines) => this.#retireRuns(lines),
      onOpened: async (name, lines) => {
        const c = await this.#load(collection);
        if (this.#fileColl.get(name) !== collection) {
          this.#fileColl.set(name, collection);
          await appendFile(join(this.#root, "files.tsv"), `${name}\t${collection}\n`);
        }
        c.open.set(name, lines);
      },
      onClosed: (name, cdxjPath) => {
        const c = this.#colls.get(collection);
        if (!c) return;
        c.open.delete(name);
        c.pending.set(name, cdxjPath);
        this.#scheduleMerge(c);
      },
      onDropped: (name) => this.#colls.get(collection)?.open.delete(name),
    });
  }

  #scheduleMerge(c: CollectionIndex): void {
    if (this.#closed) return;
    if (c.pending.size >= (this.#o.mergeAfterFiles ?? 8)) {
      void this.mergeNow(c.name);
      return;
    }
    const ms = this.#o.mergeAfterMs ?? 60_000;
    if (ms > 0 && !c.timer) {
      c.timer = setTimeout(() => {
        c.timer = null;
        void this.mergeNow(c.name);
      }, ms);
      c.timer.unref();
    }
  }

  /** Merge the collection's waiting file indexes into its merged index (one merge at a time). */
  async mergeNow(name: string): Promise<void> {
    const c = this.#colls.get(name);
    if (!c) return;
    while (c.merging) await c.merging;
    if (c.pending.size === 0) return;
    c.merging = this.#merge(c).catch((e) => this.#o.log.error("cdx-merge-failed", { collection: name, error: errorMessage(e) }));
    try {
      await c.merging;
    } finally {
      c.merging = null;
    }
  }

  async #merge(c: CollectionIndex): Promise<void> {
    if (c.timer) clearTimeout(c.timer);
    c.timer = null;
    const taken = [...c.pending];
    // The new run absorbs the runs before it while each is at most twice what is merged so far.
    let bytes = 0;
    for (const [, p] of taken) bytes += await stat(p).then((x) => x.size, () => 0);
    let keep = c.runs.length;
    while (keep > 0 && c.runs[keep - 1]!.bytes <= 2 * bytes) bytes += c.runs[--keep]!.bytes;
    const absorbed = c.runs.slice(keep);
    const inputs = [...absorbed.map((r) => r.path), ...taken.map(([, p]) => p)];
    await mkdir(c.dir, { recursive: true });
    const gen = c.generation + 1;
    const file = `merged-${gen}.cdxj`;
    const path = join(c.dir, file);
    const lines = await mergeIndexesToFile(inputs, path);
    const run: Run = { path, files: [...absorbed.flatMap((r) => r.files), ...taken.map(([f]) => f)], bytes: (await stat(path)).size };
    const runs = [...c.runs.slice(0, keep), run];
    const state = JSON.stringify({ runs: runs.map((r) => ({ file: basename(r.path), files: r.files, bytes: r.bytes })), generation: gen }) + "\n";
    await writeFileAtomically(join(c.dir, "state.json"), (fh) => fh.writeFile(state));
    c.runs = runs;
    c.generation = gen;
    for (const [f] of taken) c.pending.delete(f);
    this.#o.log.info("cdx-merged", { collection: c.name, files: taken.length, runsAbsorbed: absorbed.length, lines, runs: runs.length });
    // Queries still reading the old files keep them; they go once those are surely done.
    const oldRuns = absorbed.map((r) => r.path);
    const retired = [...oldRuns, ...taken.map(([, p]) => p)];
    const handles = retired.map((p) => this.#files.get(p)).filter((h) => h !== undefined);
    for (const p of retired) this.#files.delete(p);
    setTimeout(() => {
      for (const h of handles) h.then((f) => f.close()).catch(() => {});
      for (const p of oldRuns) rm(p, { force: true }).catch(() => {});
    }, 30_000).unref();
  }

  /** Names of collections with an index (files written since this feature, or merged). */
  indexed(): string[] {
    return [...this.#colls.keys()];
  }

  /** The sources of a query; the caller closes them. */
  async #sources(collections: string[]): Promise<LineSource[]> {
    const out: LineSource[] = [];
    try {
      for (const name of collections) {
        const c = this.#colls.get(name);
        if (!c) continue;
        const paths = [...c.runs.map((r) => r.path), ...c.pending.values()];
        for (const p of paths) {
          try {
            let h = this.#files.get(p);
            if (!h) {
              h = SortedFile.open(p);
              this.#files.set(p, h);
              h.catch(() => this.#files.delete(p));
            }
            const f = await h;
            // Shared: a query's close leaves it open.
            out.push({ forward: (a, b) => f.forward(a, b), backward: (a, b) => f.backward(a, b), close: async () => {} });
          } catch (e) {
            this.#o.log.warn("cdx-index-unreadable", { file: p, error: errorMessage(e) });
          }
        }
        for (const l of c.open.values()) {
          const { memory, files } = l.forQuery();
          for (const part of memory) out.push(new MemoryLines(part));
          // An open file's runs: opened per query (they go some time after the file closes).
          for (const p of files) {
            try {
              out.push(await SortedFile.open(p));
            } catch (e) {
              this.#o.log.warn("cdx-index-unreadable", { file: p, error: errorMessage(e) });
            }
          }
        }
      }
    } catch (e) {
      await Promise.all(out.map((s) => s.close()));
      throw e;
    }
    return out;
  }

  /** Answer lines of a query (page lines, then related ones when asked for). */
  async *query(q: CdxQuery): AsyncGenerator<CdxLine> {
    const names = q.collection !== null ? [q.collection] : [...new Set([...this.#o.collections(), ...this.#colls.keys()])];
    const sources = await this.#sources(names);
    try {
      const urls: string[] = [];
      for await (const l of runQuery(q, sources)) {
        if (q.related && typeof l.json.url === "string" && !urls.includes(l.json.url)) urls.push(l.json.url);
        yield l;
      }
      if (q.related) yield* relatedLines(urls, sources);
    } finally {
      await Promise.all(sources.map((s) => s.close().catch(() => {})));
    }
  }

  /** A query that took a closed file's runs before it closed may still be opening them: they go 30 s later. */
  #retireRuns(lines: LiveFileLines): void {
    const t = setTimeout(() => {
      this.#retiring.delete(lines);
      void lines.dispose();
    }, 30_000);
    t.unref();
    this.#retiring.set(lines, t);
  }

  async close(): Promise<void> {
    this.#closed = true;
    // No query runs any more: the runs of files closed in the last 30 s go now, not at the next start.
    const retiring = [...this.#retiring];
    this.#retiring.clear();
    for (const [, t] of retiring) clearTimeout(t);
    await Promise.all(retiring.map(([l]) => l.dispose()));
    for (const c of this.#colls.values()) {
      if (c.timer) clearTimeout(c.timer);
      c.timer = null;
      if (c.merging) await c.merging;
    }
    const files = [...this.#files.values()];
    this.#files.clear();
    await Promise.all(files.map((h) => h.then((f) => f.close()).catch(() => {})));
  }
}

async function exists(p: string): Promise<boolean> {
  try {
    await stat(p);
    return true;
  } catch {
    return false;
  }
}
