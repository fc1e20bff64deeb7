/**
 * A WACZ (WACZ 1.1.1, issue #23) from closed WARC files: `archive/` (the WARC files as they are,
 * stored: their byte offsets stay valid), `indexes/index.cdx.gz` and `index.idx` (lathe's own
 * CDXJ), `pages/pages.jsonl`, `datapackage.json` (every file's path, size and SHA-256) and
 * `datapackage-digest.json`, in that order. Each WARC byte is read once for the ZIP: SHA-256 and
 * CRC-32 come from the same buffers (entryCopy.ts); the index pass (indexPass.ts) reads them
 * again, inflating, in a worker thread.
 *
 * Two ways to run it:
 * - `prepareWacz`: the index pass first — damage stops it before any byte exists — and then the
 *   archive's exact size is known, for an HTTP answer's Content-Length; `write` streams it.
 * - `writeWacz`: for a file, the archive entries are copied while the index pass runs beside
 *   them, and the rest follows once it is done (a failure then still leaves no file: output.ts).
 *
 * Memory does not grow with the WARCs: the index is sorted on disk past a bound, files stream
 * through a fixed ring of buffers.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import { VERSION } from "../core/version.js";
import { CDX_GZ_NAME } from "./compressedIndex.js";
import { datapackageDigestJson, datapackageJson, HASH_PLACEHOLDER, type PackageMeta, type Resource } from "./datapackage.js";
import { bufferEntry, copyFileEntry, copyRing, type Sha256 } from "./entryCopy.js";
import type { IndexPassResult, IndexSource } from "./indexPass.js";
import { startIndexPass } from "./indexThread.js";
import { checkWarcInputs, type WarcInput } from "./inputs.js";
import { pagesJsonl, type PageRule, type PageSource } from "./pages.js";
import { type ByteSink, ZipWriter, zipLength } from "./zipWriter.js";

export interface WaczSpec {
  /** WARC files, closed. */
  files: string[];
  pages: PageSource;
  /** datapackage.json `title`. */
  title: string;
  description?: string;
  /** Where the temporary directory goes (default the OS's). */
  tmpDir?: string;
  /**
   * The files are lathe's own, closed with their CDXJ beside them (a collection, a session): that
   * index is used instead of reading every record again when it fits the file (guidedPass.ts).
   */
  ownIndexes?: boolean;
  /** Tests: ZIP64 records even for a small package. */
  forceZip64?: boolean;
}

export interface WaczProgress {
  phase: "index" | "write";
  bytesDone: number;
  bytesTotal: number;
}

export type OnWaczProgress = (p: WaczProgress) => void;

/** What a package holds, once made. */
export interface WaczFacts {
  /** Bytes of the whole package. */
  size: number;
  files: number;
  /** CDXJ lines. */
  lines: number;
  pages: number;
  pageRule: PageRule;
  /** Where the index came from: lathe's indexes beside the files, or a reading of every record. */
  indexedFrom: IndexSource;
}

export interface PreparedWacz extends WaczFacts {
  /** Write the package through `sink`; once. */
  write(sink: ByteSink, onProgress?: OnWaczProgress): Promise<void>;
  /** Remove the temporary files (also after a failed or abandoned write). */
  dispose(): Promise<void>;
}

/** One entry of the ZIP: its path and size in advance, and how to write it (returning its hash). */
interface Part {
  path: string;
  size: number;
  put(zip: ZipWriter, tick: () => void): Promise<Sha256>;
}

/** The checked inputs, the work directory and what the manifest says of the package. */
interface Job {
  inputs: WarcInput[];
  work: string;
  meta: PackageMeta;
  created: Date;
  zipOpts: { forceZip64: boolean };
  /** datapackage.json's resources, filled as the entries are written. */
  resources: Resource[];
  /** The buffers every file entry is copied through. */
  ring: Buffer[];
}

async function startJob(spec: WaczSpec): Promise<Job> {
  const inputs = await checkWarcInputs(spec.files);
  const work = await mkdtemp(join(spec.tmpDir ?? tmpdir(), ".lathe-wacz-"));
  const created = new Date();
  const meta: PackageMeta = { title: spec.title, ...(spec.description !== undefined ? { description: spec.description } : {}), created: created.toISOString(), software: `lathe ${VERSION}` };
  return { inputs, work, meta, created, zipOpts: { forceZip64: spec.forceZip64 === true }, resources: [], ring: copyRing() };
}

function indexPassOf(job: Job, spec: WaczSpec, onProgress?: OnWaczProgress, signal?: AbortSignal): Promise<IndexPassResult> {
  const progress = onProgress ? (done: number, total: number) => onProgress({ phase: "index", bytesDone: done, bytesTotal: total }) : undefined;
  return startIndexPass({ paths: job.inputs.map((i) => i.path), pages: spec.pages, work: job.work, ownIndexes: spec.ownIndexes === true }, progress, signal);
}

/** `signal`: the package is no longer wanted (its index pass stops). */
export async function prepareWacz(spec: WaczSpec, onProgress?: OnWaczProgress, signal?: AbortSignal): Promise<PreparedWacz> {
  const job = await startJob(spec);
  try {
    const pass = await indexPassOf(job, spec, onProgress, signal);
    const parts = [...archiveParts(job), ...tailParts(job, pass)];
    const size = zipLength(parts.map((p) => ({ name: p.path, size: p.size })), job.zipOpts);
    let written = false;
    return {
      ...factsOf(job, pass, size),
      async write(sink, onWrite) {
        if (written) throw new Error("a prepared WACZ is written once");
        written = true;
        const zip = new ZipWriter(sink, job.zipOpts);
        const tick = () => onWrite?.({ phase: "write", bytesDone: zip.offset, bytesTotal: size });
        for (const p of parts) await p.put(zip, tick);
        const total = await zip.finish();
        tick();
        if (total !== size) throw new Error(`internal: the WACZ came to ${total} bytes, not the ${size} announced`);
      },
      dispose: () => rm(job.work, { recursive: true, force: true }),
    };
  } catch (e) {
    await rm(job.work, { recursive: true, force: true });
    throw e;
  }
}

/** The package through `sink`, the WARCs copied while they are indexed. */
export async function writeWacz(spec: WaczSpec, sink: ByteSink, onProgress?: OnWaczProgress): Promise<WaczFacts> {
  const job = await startJob(spec);
  const stop = new AbortController();
  // The index pass's failure is kept until it is awaited (no unhandled rejection meanwhile).
  const pass = indexPassOf(job, spec, onProgress, stop.signal).then((r) => ({ r }), (e: unknown) => ({ e }));
  try {
    const zip = new ZipWriter(sink, job.zipOpts);
    const archived = job.inputs.reduce((n, i) => n + i.size, 0);
    const tick = () => onProgress?.({ phase: "write", bytesDone: zip.offset, bytesTotal: archived });
    for (const p of archiveParts(job)) await p.put(zip, tick);
    const done = await pass;
    if ("e" in done) throw done.e;
    for (const p of tailParts(job, done.r)) await p.put(zip, () => undefined);
    const size = await zip.finish();
    return factsOf(job, done.r, size);
  } finally {
    stop.abort(); // a no-op once the pass is done; else the copy failed: stop indexing
    await pass;
    await rm(job.work, { recursive: true, force: true });
  }
}

function factsOf(job: Job, pass: IndexPassResult, size: number): WaczFacts {
  return { size, files: job.inputs.length, lines: pass.index.lines, pages: pass.pages.length, pageRule: pass.pageRule, indexedFrom: pass.indexedFrom };
}

/** An entry listed in datapackage.json once written. */
function listed(job: Job, path: string, size: number, put: Part["put"]): Part {
  return {
    path,
    size,
    put: async (zip, tick) => {
      const hash = await put(zip, tick);
      job.resources.push({ name: basename(path), path, hash, bytes: size });
      return hash;
    },
  };
}

function archiveParts(job: Job): Part[] {
  return job.inputs.map((f) => listed(job, `archive/${f.name}`, f.size, (zip, tick) => copyFileEntry(zip, job.ring, `archive/${f.name}`, f.path, f.size, f.mtime, tick)));
}

/** After the WARCs: the index, the pages, then the manifest and its digest. */
function tailParts(job: Job, pass: IndexPassResult): Part[] {
  const { index } = pass;
  const { created, meta } = job;
  const pages = pagesJsonl(pass.pages);
  const parts: Part[] = [
    listed(job, `indexes/${CDX_GZ_NAME}`, index.cdxBytes, (zip, tick) => copyFileEntry(zip, job.ring, `indexes/${CDX_GZ_NAME}`, pass.cdxPath, index.cdxBytes, created, tick)),
    listed(job, "indexes/index.idx", index.idx.length, (zip) => bufferEntry(zip, "indexes/index.idx", index.idx, created)),
    listed(job, "pages/pages.jsonl", pages.length, (zip) => bufferEntry(zip, "pages/pages.jsonl", pages, created)),
  ];
  // Hashes all have one length: the manifest's size is known before they are.
  const all = [...archiveParts(job), ...parts];
  const manifestSize = datapackageJson(meta, all.map((p) => ({ name: basename(p.path), path: p.path, hash: HASH_PLACEHOLDER, bytes: p.size }))).length;
  let manifestHash: Sha256 = HASH_PLACEHOLDER;
  parts.push({
    path: "datapackage.json",
    size: manifestSize,
    put: async (zip) => {
      const doc = datapackageJson(meta, job.resources);
      if (doc.length !== manifestSize) throw new Error(`internal: datapackage.json came to ${doc.length} bytes, not the ${manifestSize} planned`);
      manifestHash = await bufferEntry(zip, "datapackage.json", doc, created);
      return manifestHash;
    },
  });
  parts.push({
    path: "datapackage-digest.json",
    size: datapackageDigestJson(HASH_PLACEHOLDER).length,
    put: (zip) => bufferEntry(zip, "datapackage-digest.json", datapackageDigestJson(manifestHash), created),
  });
  return parts;
}
