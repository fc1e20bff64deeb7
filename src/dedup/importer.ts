/**
 * Load existing WARC files into the dedup store (issue "Deduplication", "Building the dedup index
 * outside a crawl"; decisions.md §7): every `response` with a comparable WARC-Payload-Digest
 * becomes an entry pointing at its record (file base name, offset, length of its gzip member),
 * with the HTTP status, ETag and Last-Modified from its head (the payload is never read). A
 * `revisit` whose original is not in the imported files (nor already in the store) yields an
 * entry made of its Refers-To data, without file/offset, so later captures can still refer to
 * that original. What other tools wrote is kept as it is (a wget digest of a chunked body stays
 * what it is). Damaged files are reported with file and offset; the rest still loads.
 */
import { stat } from "node:fs/promises";
import { basename } from "node:path";
import { errorMessage } from "../core/errors.js";
import type { Logger } from "../core/log.js";
import { readWarcRecords, WarcReadError, type WarcReadProblem, type WarcRecord } from "../warc/reader.js";
import { parseDigest } from "./digestKey.js";
import type { DedupEntry, DedupStore, DigestKey } from "./types.js";

/** Why a response or revisit gave no entry. */
export const SKIP_REASONS = {
  "no-payload-digest": "response without WARC-Payload-Digest",
  "unsupported-digest": "response whose payload digest is not sha1/sha256 in a form lathe can compare",
  truncated: "truncated response (WARC-Truncated)",
  "incomplete-response": "response without WARC-Target-URI or WARC-Date",
  "already-in-store": "response already in the store (same file and offset: imported before)",
  "revisit-no-payload-digest": "revisit without a comparable WARC-Payload-Digest",
  "revisit-no-refers-to": "revisit without WARC-Refers-To and without WARC-Refers-To-Target-URI/-Date (Heritrix 1.0 style)",
  "revisit-refers-to-id-only": "revisit with WARC-Refers-To but without WARC-Refers-To-Target-URI/-Date",
  "revisit-original-present": "revisit whose original is in the imported files or already in the store",
  "revisit-duplicate": "revisit of an original another revisit already named",
} as const;
export type SkipReason = keyof typeof SKIP_REASONS;

export interface ImportProblem {
  file: string;
  offset: number;
  reason: string;
}

export interface ImportProgress {
  /** The file being read (as given). */
  file: string;
  /** 0-based index of that file; `filesDone` files are finished. */
  fileIndex: number;
  filesDone: number;
  files: number;
  /** Bytes of all files processed so far / their total size. */
  bytesDone: number;
  bytesTotal: number;
  records: number;
  entriesAdded: number;
  errors: number;
}

export interface ImportOptions {
  bucket: string;
  /** Called often (after each record and each file); throttle any rendering. */
  onProgress?(p: ImportProgress): void;
  log?: Logger;
  /** Entries per `store.add` call (one transaction each); default 10,000. */
  batchSize?: number;
}

export interface ImportSummary {
  bucket: string;
  files: number;
  /** Files with at least one error (damage, truncation, unreadable). */
  filesWithErrors: number;
  bytes: number;
  /** Records read, of every type. */
  records: number;
  responses: number;
  revisits: number;
  /** Entries given to the store, from responses and from revisits' originals. */
  entriesAdded: number;
  entriesFromRevisits: number;
  /** Responses and revisits that gave no entry, by reason (see SKIP_REASONS). */
  skipped: Partial<Record<SkipReason, number>>;
  skippedTotal: number;
  errors: ImportProblem[];
  warnings: ImportProblem[];
}

const DEFAULT_BATCH = 50_000; // the store loads ≥ 100k entries/s only with large transactions

function digestKeyString(d: DigestKey): string {
  return `${d.alg}:${d.bytes.toString("base64")}`;
}

export async function importWarcs(files: string[], store: DedupStore, opts: ImportOptions): Promise<ImportSummary> {
  const sizes = await Promise.all(files.map((f) => stat(f).then((s) => (s.isFile() ? s.size : 0), () => 0)));
  const run = new WarcImport(files, sizes, store, opts);
  for (let i = 0; i < files.length; i++) await run.importFile(i);
  run.flush();
  run.addRevisitOriginals();
  return run.summary;
}

function emptySummary(bucket: string, files: number): ImportSummary {
  return {
    bucket,
    files,
    filesWithErrors: 0,
    bytes: 0,
    records: 0,
    responses: 0,
    revisits: 0,
    entriesAdded: 0,
    entriesFromRevisits: 0,
    skipped: {},
    skippedTotal: 0,
    errors: [],
    warnings: [],
  };
}

/** Importing the same file again adds nothing: its entries are in the store (flushed after each file). */
function sameRecord(o: DedupEntry, e: DedupEntry): boolean {
  return o.filename === e.filename && o.offset === e.offset && o.length === e.length;
}

/** One importWarcs call: the summary so far, the batch not yet added, the revisits' originals. */
class WarcImport {
  readonly summary: ImportSummary;
  readonly #files: string[];
  readonly #sizes: number[];
  readonly #bytesTotal: number;
  /** Sizes of the files before the current one. */
  #bytesBefore = 0;
  readonly #store: DedupStore;
  readonly #opts: ImportOptions;
  readonly #bucket: string;
  readonly #batchSize: number;
  #batch: DedupEntry[] = [];
  /** Originals named by revisits, resolved once every response is in the store. */
  readonly #pending = new Map<string, DedupEntry>();

  constructor(files: string[], sizes: number[], store: DedupStore, opts: ImportOptions) {
    this.#files = files;
    this.#sizes = sizes;
    this.#bytesTotal = sizes.reduce((a, b) => a + b, 0);
    this.#store = store;
    this.#opts = opts;
    this.#bucket = opts.bucket;
    this.#batchSize = Math.max(1, opts.batchSize ?? DEFAULT_BATCH);
    this.summary = emptySummary(opts.bucket, files.length);
  }

  /** Read file `i` to its end (or its damage), then add its entries. */
  async importFile(i: number): Promise<void> {
    const path = this.#files[i]!;
    const summary = this.summary;
    const log = this.#opts.log;
    const filename = basename(path);
    let fileErrors = 0;
    const onError = (p: WarcReadProblem) => {
      fileErrors++;
      summary.errors.push(p);
      log?.warn("dedup-import-damage", { file: p.file, offset: p.offset, reason: p.reason });
    };
    const onWarning = (p: WarcReadProblem) => {
      summary.warnings.push(p);
      log?.debug("dedup-import-warning", { file: p.file, offset: p.offset, reason: p.reason });
    };
    const reader = readWarcRecords(path, { onError, onWarning, prefixBytes: 64 * 1024 });
    const progress = () => this.#progress(i, i, this.#bytesBefore + reader.position);
    progress();
    let fileRecords = 0;
    try {
      for await (const rec of reader) {
        summary.records++;
        fileRecords++;
        this.#record(rec, filename);
        progress();
      }
    } catch (e) {
      const p = e instanceof WarcReadError ? { file: e.file, offset: e.offset, reason: e.reason } : { file: path, offset: reader.position, reason: errorMessage(e) };
      onError(p);
    }
    this.flush();
    if (fileErrors > 0) summary.filesWithErrors++;
    summary.bytes += reader.size;
    this.#bytesBefore += this.#sizes[i]!;
    log?.info("dedup-import-file", { file: path, records: fileRecords, errors: fileErrors });
    this.#progress(i, i + 1, this.#bytesBefore);
  }

  #record(rec: WarcRecord, filename: string): void {
    const summary = this.summary;
    if (rec.warcType === "response") {
      summary.responses++;
      const e = responseEntry(rec, this.#bucket, filename);
      if (typeof e === "string") this.#skip(e);
      else if (this.#inStore(e)) this.#skip("already-in-store");
      else this.#push(e);
    } else if (rec.warcType === "revisit") {
      summary.revisits++;
      const r = revisitOriginal(rec, this.#bucket);
      if (typeof r === "string") this.#skip(r);
      else {
        const key = `${digestKeyString(r.digest)} ${r.date} ${r.url}`;
        if (this.#pending.has(key)) this.#skip("revisit-duplicate");
        else this.#pending.set(key, r);
      }
    }
  }

  /** Revisits whose original is neither among the imported records nor already in the store. */
  addRevisitOriginals(): void {
    for (const e of this.#pending.values()) {
      const have = this.#store.byUrlAndDigest(this.#bucket, e.url, e.digest);
      if (have && (have.filename !== null || have.date === e.date)) {
        this.#skip("revisit-original-present");
        continue;
      }
      this.#push(e);
      this.summary.entriesFromRevisits++;
    }
    this.flush();
  }

  #progress(fileIndex: number, filesDone: number, bytesDone: number): void {
    this.#opts.onProgress?.({
      file: this.#files[fileIndex]!,
      fileIndex,
      filesDone,
      files: this.#files.length,
      bytesDone,
      bytesTotal: this.#bytesTotal,
      records: this.summary.records,
      entriesAdded: this.summary.entriesAdded + this.#batch.length,
      errors: this.summary.errors.length,
    });
  }

  #skip(r: SkipReason): void {
    this.summary.skipped[r] = (this.summary.skipped[r] ?? 0) + 1;
    this.summary.skippedTotal++;
  }

  #inStore(e: DedupEntry): boolean {
    const latest = this.#store.byUrlAndDigest(this.#bucket, e.url, e.digest);
    if (latest === null) return false;
    return sameRecord(latest, e) || this.#store.byUrl(this.#bucket, e.url, 64).some((o) => sameRecord(o, e));
  }

  #push(e: DedupEntry): void {
    this.#batch.push(e);
    if (this.#batch.length >= this.#batchSize) this.flush();
  }

  flush(): void {
    if (this.#batch.length === 0) return;
    this.#store.add(this.#batch);
    this.summary.entriesAdded += this.#batch.length;
    this.#batch = [];
  }
}

/** The entry a response gives, or why it gives none. */
export function responseEntry(rec: WarcRecord, bucket: string, filename: string): DedupEntry | SkipReason {
  const pd = rec.get("WARC-Payload-Digest");
  if (pd === null) return "no-payload-digest";
  const digest = parseDigest(pd);
  if (!digest) return "unsupported-digest";
  if (rec.get("WARC-Truncated") !== null) return "truncated";
  if (rec.targetUri === null || rec.date === null) return "incomplete-response";
  const http = rec.httpHead();
  return {
    bucket,
    digest,
    url: rec.targetUri,
    date: rec.date,
    recordId: rec.recordId,
    filename,
    offset: rec.offset,
    length: rec.length,
    status: http?.status ?? null,
    etag: http?.get("etag") ?? null,
    lastModified: http?.get("last-modified") ?? null,
  };
}

/** The original a revisit names (an entry without file/offset), or why there is none. */
export function revisitOriginal(rec: WarcRecord, bucket: string): DedupEntry | SkipReason {
  const refersTo = rec.get("WARC-Refers-To");
  const url = stripAngles(rec.get("WARC-Refers-To-Target-URI"));
  const date = rec.get("WARC-Refers-To-Date");
  if (url === null || date === null) return refersTo === null ? "revisit-no-refers-to" : "revisit-refers-to-id-only";
  const pd = rec.get("WARC-Payload-Digest");
  const digest = pd === null ? null : parseDigest(pd);
  if (!digest) return "revisit-no-payload-digest";
  return {
    bucket,
    digest,
    url,
    date,
    recordId: refersTo,
    filename: null,
    offset: null,
    length: null,
    status: null,
    etag: null,
    lastModified: null,
  };
}

function stripAngles(v: string | null): string | null {
  return v !== null && v.startsWith("<") && v.endsWith(">") ? v.slice(1, -1) : v;
}
