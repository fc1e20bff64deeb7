/**
 * The CDX index of each collection (decisions.md §6), kept LSM-style under
 * `<warcDir>/lathe-cdx/`:
 * - `files.tsv`: `WARC file name TAB collection`, one line per file, appended when the file is
 *   opened (so a file recovered at start-up is still attributed);
 * - `<collection>/state.json`: `{"merged": "merged-<n>.cdxj", "files": [...]}`, the current merged
 *   index and the files it holds, replaced atomically after each merge;
 * - `<collection>/merged-<n>.cdxj`: the merged, sorted index of those files.
 * A query reads the merged index, the sorted `.cdxj` of each closed file not merged yet, and the
 * lines of the files still open (memory). Closed files are merged in the background.
 */
import { appendFile, mkdir, readFile, readdir, rename, rm, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { errorMessage } from "../core/errors.js";
import type { Logger } from "../core/log.js";
import type { WriterIndexHook } from "../warc/writer.js";
import { mergeIndexes, writeLinesToFile } from "./build.js";
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
}

interface CollectionIndex {
  name: string;
  dir: string;
  merged: string | null;
  mergedFiles: Set<string>;
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
      if (n.endsWith(".warc.gz.cdxj.open") || n.endsWith(".warc.cdxj.open")) await rm(join(this.#o.warcDir, n), { force: true });
    }
    for (const coll of new Set(this.#fileColl.values())) await this.#load(coll);
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
      if (indexed && !c.mergedFiles.has(file)) c.pending.set(file, idx);
    }
    for (const c of this.#colls.values()) if (c.pending.size) this.#scheduleMerge(c);
  }

  async #load(name: string): Promise<CollectionIndex> {
    let c = this.#colls.get(name);
    if (c) return c;
    c = { name, dir: join(this.#root, name), merged: null, mergedFiles: new Set(), pending: new Map(), open: new Map(), generation: 0, merging: null, timer: null };
    this.#colls.set(name, c);
    try {
      const st = JSON.parse(await readFile(join(c.dir, "state.json"), "utf8")) as { merged: string; files: string[]; generation: number };
      c.merged = join(c.dir, st.merged);
      c.mergedFiles = new Set(st.files);
      c.generation = st.generation;
    } catch {
      // Nothing merged yet.
    }
    return c;
  }

  /** The index hook for a writer of `collection`'s files. */
  hookFor(collection: string): WriterIndexHook {
    return createLiveIndex({
      dir: this.#o.warcDir,
      log: this.#o.log,
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
    const inputs = [...(c.merged ? [c.merged] : []), ...taken.map(([, p]) => p)];
    await mkdir(c.dir, { recursive: true });
    const gen = c.generation + 1;
    const file = `merged-${gen}.cdxj`;
    const lines = await writeLinesToFile(mergeIndexes(inputs), join(c.dir, file));
    const files = [...c.mergedFiles, ...taken.map(([f]) => f)];
    const tmp = join(c.dir, `.state.json.tmp-${process.pid}`);
    await writeFile(tmp, JSON.stringify({ merged: file, files, generation: gen }) + "\n");
    await rename(tmp, join(c.dir, "state.json"));
    const old = c.merged;
    c.merged = join(c.dir, file);
    c.generation = gen;
    c.mergedFiles = new Set(files);
    for (const [f] of taken) c.pending.delete(f);
    this.#o.log.info("cdx-merged", { collection: c.name, files: taken.length, lines });
    // Queries still reading the old files keep them; they go once those are surely done.
    const retired = [...(old ? [old] : []), ...taken.map(([, p]) => p)];
    const handles = retired.map((p) => this.#files.get(p)).filter((h) => h !== undefined);
    for (const p of retired) this.#files.delete(p);
    setTimeout(() => {
      for (const h of handles) h.then((f) => f.close()).catch(() => {});
      if (old) rm(old, { force: true }).catch(() => {});
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
        const paths = [...(c.merged ? [c.merged] : []), ...c.pending.values()];
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
        for (const l of c.open.values()) for (const part of l.forQuery()) out.push(new MemoryLines(part));
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

  async close(): Promise<void> {
    this.#closed = true;
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
