/**
 * A WACZ (WACZ 1.1.1, issue #23) from closed WARC files, in two steps:
 *
 * 1. `prepareWacz`: the inputs are checked, then one pass over the WARCs — lathe's own CDXJ
 *    indexer, the one `lathe index --cdxj` runs — gives the sorted index (written compressed to a
 *    temporary directory) and, from the same records, the page list. Damage anywhere (not a
 *    WARC, a truncated or corrupt member) stops here, before any byte of the package exists.
 *    Every entry's size is then known, and with it the archive's (an HTTP Content-Length).
 * 2. `write`: the ZIP through a sink — `archive/` (the WARC files as they are, stored: their
 *    byte offsets stay valid), `indexes/index.cdx.gz` and `index.idx`, `pages/pages.jsonl`,
 *    `datapackage.json` (every file's path, size and SHA-256) and `datapackage-digest.json`.
 *    Each WARC byte is read once: SHA-256 and CRC-32 come from the same buffers.
 *
 * Memory does not grow with the WARCs: the index is sorted on disk past a bound, files stream
 * through a fixed ring of buffers.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import { VERSION } from "../core/version.js";
import { buildIndex } from "../index/build.js";
import type { WarcReadProblem, WarcRecord } from "../warc/reader.js";
import { CDX_GZ_NAME, writeCompressedIndex, type CompressedIndex } from "./compressedIndex.js";
import { datapackageDigestJson, datapackageJson, HASH_PLACEHOLDER, type PackageMeta, type Resource } from "./datapackage.js";
import { bufferEntry, copyFileEntry, type Sha256 } from "./entryCopy.js";
import { checkWarcInputs, type WarcInput } from "./inputs.js";
import { PageCollector, pagesJsonl, type PageRule, type PageSource } from "./pages.js";
import { WaczError } from "./waczError.js";
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
  /** Tests: ZIP64 records even for a small package. */
  forceZip64?: boolean;
}

export interface WaczProgress {
  phase: "index" | "write";
  bytesDone: number;
  bytesTotal: number;
}

export type OnWaczProgress = (p: WaczProgress) => void;

export interface PreparedWacz {
  /** Exact length of the package `write` will produce. */
  readonly size: number;
  readonly files: number;
  /** CDXJ lines. */
  readonly lines: number;
  readonly pages: number;
  readonly pageRule: PageRule;
  /** Write the package through `sink`; once. */
  write(sink: ByteSink, onProgress?: OnWaczProgress): Promise<void>;
  /** Remove the temporary files (also after a failed or abandoned write). */
  dispose(): Promise<void>;
}

/** Sorted-run memory of the index pass: about 16 M characters of lines before they go to disk. */
const SORT_MEMORY_CHARS = 16 * 1024 * 1024;
/** Damage reports named in the error (the rest are counted). */
const LISTED_PROBLEMS = 5;

/** One entry of the ZIP: its path and size in advance, and how to write it (returning its hash); all but the manifest and its digest are listed in the manifest. */
interface Part {
  path: string;
  size: number;
  put(zip: ZipWriter, tick: () => void): Promise<Sha256>;
}

export async function prepareWacz(spec: WaczSpec, onProgress?: OnWaczProgress): Promise<PreparedWacz> {
  const inputs = await checkWarcInputs(spec.files);
  const work = await mkdtemp(join(spec.tmpDir ?? tmpdir(), ".lathe-wacz-"));
  try {
    const { index, pages } = await indexPass(inputs, spec.pages, work, onProgress);
    const created = new Date();
    const meta: PackageMeta = { title: spec.title, ...(spec.description !== undefined ? { description: spec.description } : {}), created: created.toISOString(), software: `lathe ${VERSION}` };
    const parts = planParts(inputs, join(work, CDX_GZ_NAME), index, pagesJsonl(pages.pages), meta, created);
    const zipOpts = { forceZip64: spec.forceZip64 === true };
    const size = zipLength(parts.map((p) => ({ name: p.path, size: p.size })), zipOpts);
    let written = false;
    return {
      size,
      files: inputs.length,
      lines: index.lines,
      pages: pages.pages.length,
      pageRule: pages.rule,
      async write(sink, onWrite) {
        if (written) throw new Error("a prepared WACZ is written once");
        written = true;
        const zip = new ZipWriter(sink, zipOpts);
        const tick = () => onWrite?.({ phase: "write", bytesDone: zip.offset, bytesTotal: size });
        for (const p of parts) await p.put(zip, tick);
        const total = await zip.finish();
        tick();
        if (total !== size) throw new Error(`internal: the WACZ came to ${total} bytes, not the ${size} announced`);
      },
      dispose: () => rm(work, { recursive: true, force: true }),
    };
  } catch (e) {
    await rm(work, { recursive: true, force: true });
    throw e;
  }
}

/** The one pass over the WARCs: the compressed index in `work`, and the pages. */
async function indexPass(inputs: WarcInput[], source: PageSource, work: string, onProgress?: OnWaczProgress) {
  const collector = new PageCollector(source);
  const problems: WarcReadProblem[] = [];
  const records = new Map<string, number>();
  const inspect = (rec: WarcRecord) => {
    records.set(rec.file, (records.get(rec.file) ?? 0) + 1);
    collector.inspect(rec);
  };
  const lines = buildIndex(
    inputs.map((i) => i.path),
    {
      format: "cdxj",
      memoryChars: SORT_MEMORY_CHARS,
      tmpDir: work,
      onError: (p) => problems.push(p),
      inspect,
      ...(onProgress ? { onProgress: (p: { bytesDone: number; bytesTotal: number }) => onProgress({ phase: "index", bytesDone: p.bytesDone, bytesTotal: p.bytesTotal }) } : {}),
    },
  );
  const index = await writeCompressedIndex(lines, join(work, CDX_GZ_NAME));
  if (problems.length > 0) throw new WaczError("damaged", damageMessage(problems));
  for (const i of inputs) if (!records.get(i.path)) throw new WaczError("damaged", `${i.path} holds no WARC record`);
  return { index, pages: collector.result() };
}

function damageMessage(problems: WarcReadProblem[]): string {
  const listed = problems.slice(0, LISTED_PROBLEMS).map((p) => `${p.file} at offset ${p.offset}: ${p.reason}`);
  const more = problems.length > LISTED_PROBLEMS ? `; and ${problems.length - LISTED_PROBLEMS} more` : "";
  return `not packaged: a WARC file is damaged or is not a WARC (${listed.join("; ")}${more})`;
}

/** The entries in archive order: WARCs, index, pages, then the manifest and its digest. */
function planParts(inputs: WarcInput[], cdxPath: string, index: CompressedIndex, pages: Buffer, meta: PackageMeta, created: Date): Part[] {
  const resources: Resource[] = [];
  const listed = (path: string, size: number, put: Part["put"]): Part => ({
    path,
    size,
    put: async (zip, tick) => {
      const hash = await put(zip, tick);
      resources.push({ name: basename(path), path, hash, bytes: size });
      return hash;
    },
  });
  const parts: Part[] = inputs.map((f) => listed(`archive/${f.name}`, f.size, (zip, tick) => copyFileEntry(zip, `archive/${f.name}`, f.path, f.size, f.mtime, tick)));
  parts.push(listed(`indexes/${CDX_GZ_NAME}`, index.cdxBytes, (zip, tick) => copyFileEntry(zip, `indexes/${CDX_GZ_NAME}`, cdxPath, index.cdxBytes, created, tick)));
  parts.push(listed("indexes/index.idx", index.idx.length, (zip) => bufferEntry(zip, "indexes/index.idx", index.idx, created)));
  parts.push(listed("pages/pages.jsonl", pages.length, (zip) => bufferEntry(zip, "pages/pages.jsonl", pages, created)));
  // Hashes all have one length: the manifest's size is known before they are.
  const planned = parts.map((p) => ({ name: basename(p.path), path: p.path, hash: HASH_PLACEHOLDER, bytes: p.size }));
  const manifestSize = datapackageJson(meta, planned).length;
  let manifestHash: Sha256 = HASH_PLACEHOLDER;
  parts.push({
    path: "datapackage.json",
    size: manifestSize,
    put: async (zip) => {
      const doc = datapackageJson(meta, resources);
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
