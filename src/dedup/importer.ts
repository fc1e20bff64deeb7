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
  /** Entries per `sink.add` call (for the SQLite store, one transaction each); default the sink's, else 50,000. */
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

/**
 * Where an import puts its entries: a DedupStore (`storeSink`, the SQLite file) or PostgreSQL
 * (src/postgres/copyImport.ts, COPY). The reading, the choice of entries and the summary are
 * the same for both; only "already in the store?" and the writing differ, and a sink may decide
 * the first per batch (SQLite) or per file in one statement (PostgreSQL).
 */
export interface ImportSink {
  /** Entries per `add` this sink works best with, when the options name none. */
  readonly batchSize?: number;
  /** The next file's entries follow (the path as given; entries carry its base name). */
  beginFile(filename: string): Promise<void>;
  /** Entries from the current file's responses, in record order, at most batchSize at a time. */
  add(entries: DedupEntry[]): Promise<void>;
  /**
   * The current file was read to its end or its damage: its entries are stored when this
   * resolves. Resolves with how many of them were not added because the store already held them.
   */
  endFile(): Promise<number>;
  /**
   * The originals revisits named, after every file: add those whose original the store does not
   * hold (its latest entry for the URL and digest has no file and another date, or there is none).
   * Resolves with how many were added.
   */
  addOriginals(entries: DedupEntry[]): Promise<number>;
}

const DEFAULT_BATCH = 50_000; // the store loads ≥ 100k entries/s only with large transactions

function digestKeyString(d: DigestKey): string {
  return `${d.alg}:${d.bytes.toString("base64")}`;
}

export async function importWarcs(files: string[], store: DedupStore, opts: ImportOptions): Promise<ImportSummary> {
  return importWarcsInto(files, storeSink(store, opts), opts);
}

/** importWarcs into any sink. A sink's error ends the import (rejects); damaged files do not. */
export async function importWarcsInto(files: string[], sink: ImportSink, opts: ImportOptions): Promise<ImportSummary> {
  const sizes = await Promise.all(files.map((f) => stat(f).then((s) => (s.isFile() ? s.size : 0), () => 0)));
  const run = new WarcImport(files, sizes, sink, opts);
  for (let i = 0; i < files.length; i++) await run.importFile(i);
  await run.addRevisitOriginals();
  return run.summary;
}

/** Importing the same file again adds nothing: its entries are in the store (flushed after each file). */
function sameRecord(o: DedupEntry, e: DedupEntry): boolean {
  return o.filename === e.filename && o.offset === e.offset && o.length === e.length;
}

/** A DedupStore as a sink: each response checked against the store, each batch one `add`. */
export function storeSink(store: DedupStore, opts: Pick<ImportOptions, "batchSize">): ImportSink {
  const batchSize = Math.max(1, opts.batchSize ?? DEFAULT_BATCH);
  let present = 0;
  const inStore = (e: DedupEntry): boolean => {
    const latest = store.byUrlAndDigest(e.bucket, e.url, e.digest);
    if (latest === null) return false;
    return sameRecord(latest, e) || store.byUrl(e.bucket, e.url, 64).some((o) => sameRecord(o, e));
  };
  return {
    async beginFile() {},
    async add(entries) {
      const fresh = entries.filter((e) => !inStore(e));
      present += entries.length - fresh.length;
      if (fresh.length) store.add(fresh);
    },
    async endFile() {
      const n = present;
      present = 0;
      return n;
    },
    async addOriginals(entries) {
      const missing = entries.filter((e) => {
        const have = store.byUrlAndDigest(e.bucket, e.url, e.digest);
        return !(have && (have.filename !== null || have.date === e.date));
      });
      for (let i = 0; i < missing.length; i += batchSize) store.add(missing.slice(i, i + batchSize));
      return missing.length;
    },
  };
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

/** One import: the summary so far, the batch not yet given to the sink, the revisits' originals. */
class WarcImport {
  readonly summary: ImportSummary;
  readonly #files: string[];
  readonly #sizes: number[];
  readonly #bytesTotal: number;
  /** Sizes of the files before the current one. */
  #bytesBefore = 0;
  readonly #sink: ImportSink;
  readonly #opts: ImportOptions;
  readonly #bucket: string;
  readonly #batchSize: number;
  #batch: DedupEntry[] = [];
  /** Entries of the current file given to the sink so far. */
  #fileEntries = 0;
  /** Originals named by revisits, resolved once every response is in the store. */
  readonly #pending = new Map<string, DedupEntry>();

  constructor(files: string[], sizes: number[], sink: ImportSink, opts: ImportOptions) {
    this.#files = files;
    this.#sizes = sizes;
    this.#bytesTotal = sizes.reduce((a, b) => a + b, 0);
    this.#sink = sink;
    this.#opts = opts;
    this.#bucket = opts.bucket;
    this.#batchSize = Math.max(1, opts.batchSize ?? sink.batchSize ?? DEFAULT_BATCH);
    this.summary = emptySummary(opts.bucket, files.length);
  }

  /**
   * Read file `i` to its end (or its damage), then have the sink store its entries. Only reading
   * problems are the file's errors; a failing sink rejects.
   */
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
    const records = reader[Symbol.asyncIterator]();
    const progress = () => this.#progress(i, i, this.#bytesBefore + reader.position);
    progress();
    await this.#sink.beginFile(path);
    let fileRecords = 0;
    for (;;) {
      let next: IteratorResult<WarcRecord>;
      try {
        next = await records.next();
      } catch (e) {
        onError(e instanceof WarcReadError ? { file: e.file, offset: e.offset, reason: e.reason } : { file: path, offset: reader.position, reason: errorMessage(e) });
        break;
      }
      if (next.done) break;
      summary.records++;
      fileRecords++;
      this.#record(next.value, filename);
      if (this.#batch.length >= this.#batchSize) await this.#flush();
      progress();
    }
    await this.#flush();
    const present = await this.#sink.endFile();
    this.summary.entriesAdded += this.#fileEntries - present;
    if (present > 0) this.#skip("already-in-store", present);
    this.#fileEntries = 0;
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
      else this.#batch.push(e);
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
  async addRevisitOriginals(): Promise<void> {
    const originals = [...this.#pending.values()];
    const added = originals.length ? await this.#sink.addOriginals(originals) : 0;
    if (added < originals.length) this.#skip("revisit-original-present", originals.length - added);
    this.summary.entriesAdded += added;
    this.summary.entriesFromRevisits += added;
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
      entriesAdded: this.summary.entriesAdded + this.#fileEntries + this.#batch.length,
      errors: this.summary.errors.length,
    });
  }

  #skip(r: SkipReason, n = 1): void {
    this.summary.skipped[r] = (this.summary.skipped[r] ?? 0) + n;
    this.summary.skippedTotal += n;
  }

  async #flush(): Promise<void> {
    if (this.#batch.length === 0) return;
    const batch = this.#batch;
    this.#batch = [];
    this.#fileEntries += batch.length;
    await this.#sink.add(batch);
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
