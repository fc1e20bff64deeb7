/**
 * The two writes of the SQLite dedup store, each one transaction: add() appends entries, stages
 * their keys and promotes a slice of staged keys (sqliteStaging.ts); removeTail() deletes the
 * entries of a file's tail wherever their keys are. Both keep the state row's counters and
 * cursors in step. The caller has checked its arguments (entryChecks.ts).
 */
import type Database from "better-sqlite3";
import { asBuffer } from "./entryChecks.js";
import { Inserter } from "./sqliteInserter.js";
import { ALG_CODE, digestKey, digestTag, packRecordId, urlKey } from "./sqliteKeys.js";
import type { NameIds } from "./sqliteNames.js";
import { ENTRY_COLUMNS } from "./sqliteSchema.js";
import { inKeyOrder, KeyTree, StagingBound } from "./sqliteStaging.js";
import type { DedupEntry } from "./types.js";

interface State {
  entries: number;
  staged_digest: number;
  staged_url: number;
  cursor_digest: number;
  cursor_url: number;
}

/** The lookup keys of a batch, by index in the batch. */
interface BatchKeys {
  digest: Float64Array;
  url: Float64Array;
  tag: Uint16Array;
}

/** Rows (key, seq[, tag]) for the `n` keys of a batch whose first entry is seq `first`, in key order. */
function stage(rows: Inserter, keys: Float64Array, tags: Uint16Array | null, n: number, first: number): void {
  const p = rows.p;
  rows.reset();
  inKeyOrder(keys, n, (i) => {
    const at = rows.slot();
    p[at] = keys[i];
    p[at + 1] = first + i;
    if (tags) p[at + 2] = tags[i];
  });
  rows.finish();
}

type Stmt<P extends unknown[], R = unknown> = Database.Statement<P, R>;

export class SqliteWrites {
  readonly #buckets: NameIds;
  readonly #files: NameIds;
  readonly #bound: StagingBound;
  readonly #maxSeq: Stmt<[], number | null>;
  readonly #state: Stmt<[], State>;
  readonly #setState: Stmt<[number, number, number, number, number]>;
  readonly #insEntries: Inserter;
  readonly #insByDigest: Inserter;
  readonly #insByUrl: Inserter;
  readonly #digestTree: KeyTree;
  readonly #urlTree: KeyTree;
  readonly #tail: Stmt<[number, number], { seq: number; bucket: number; alg: number; digest: Buffer; url: string }>;
  readonly #delTail: Stmt<[number, number]>;
  readonly #add: Database.Transaction<(entries: DedupEntry[]) => void>;
  readonly #removeTail: Database.Transaction<(file: number, from: number) => number>;

  constructor(db: Database.Database, buckets: NameIds, files: NameIds, stagedMin: number) {
    this.#buckets = buckets;
    this.#files = files;
    this.#bound = new StagingBound(stagedMin);
    this.#maxSeq = db.prepare<[], number | null>("SELECT max(seq) FROM entries").pluck();
    this.#state = db.prepare<[], State>("SELECT entries, staged_digest, staged_url, cursor_digest, cursor_url FROM state WHERE id = 1");
    this.#setState = db.prepare("UPDATE state SET entries = ?, staged_digest = ?, staged_url = ?, cursor_digest = ?, cursor_url = ? WHERE id = 1");
    this.#insEntries = new Inserter(db, "entries", ENTRY_COLUMNS, 64);
    this.#insByDigest = new Inserter(db, "by_digest_new", ["key", "seq"], 256);
    this.#insByUrl = new Inserter(db, "by_url_new", ["key", "seq", "tag"], 256);
    this.#digestTree = new KeyTree(db, "by_digest", "key, seq");
    this.#urlTree = new KeyTree(db, "by_url", "key, seq, tag");
    this.#tail = db.prepare("SELECT seq, bucket, alg, digest, url FROM entries WHERE file = ? AND offset >= ?");
    this.#delTail = db.prepare("DELETE FROM entries WHERE file = ? AND offset >= ?");
    this.#add = db.transaction((entries: DedupEntry[]) => this.#addTx(entries));
    this.#removeTail = db.transaction((file: number, from: number) => this.#removeTailTx(file, from));
  }

  /** One IMMEDIATE transaction; on an error nothing of it remains (forget cached name ids then). */
  add(entries: DedupEntry[]): void {
    this.#add.immediate(entries);
  }

  /** Remove the entries of file id `file` at offsets ≥ `from`; returns how many. */
  removeTail(file: number, from: number): number {
    return this.#removeTail.immediate(file, from);
  }

  #addTx(entries: DedupEntry[]): void {
    const n = entries.length;
    const first = (this.#maxSeq.get() ?? 0) + 1;
    const keys = this.#insertEntries(entries, first);
    this.#stageKeys(keys, n, first);
    this.#promote(n);
  }

  /** Append the entries as seq first, first + 1, …; returns their lookup keys. */
  #insertEntries(entries: DedupEntry[], first: number): BatchKeys {
    const n = entries.length;
    const keys: BatchKeys = { digest: new Float64Array(n), url: new Float64Array(n), tag: new Uint16Array(n) };
    const rows = this.#insEntries;
    const p = rows.p;
    rows.reset();
    for (let i = 0; i < n; i++) {
      const e = entries[i]!;
      const b = this.#buckets.idFor(e.bucket);
      const alg = ALG_CODE[e.digest.alg];
      const bytes = asBuffer(e.digest.bytes);
      const at = rows.slot();
      p[at] = first + i;
      p[at + 1] = b;
      p[at + 2] = alg;
      p[at + 3] = bytes;
      p[at + 4] = e.url;
      p[at + 5] = e.date;
      p[at + 6] = packRecordId(e.recordId ?? null);
      p[at + 7] = e.filename === null || e.filename === undefined ? null : this.#files.idFor(e.filename);
      p[at + 8] = e.offset ?? null;
      p[at + 9] = e.length ?? null;
      p[at + 10] = e.status ?? null;
      p[at + 11] = e.etag ?? null;
      p[at + 12] = e.lastModified ?? null;
      keys.digest[i] = digestKey(b, alg, bytes);
      keys.url[i] = urlKey(b, e.url);
      keys.tag[i] = digestTag(bytes);
    }
    rows.finish();
    return keys;
  }

  /** Put the batch's keys into the *_new trees, in key order. */
  #stageKeys(keys: BatchKeys, n: number, first: number): void {
    stage(this.#insByDigest, keys.digest, null, n, first);
    stage(this.#insByUrl, keys.url, keys.tag, n, first);
  }

  /** After a batch of `n`: count it, and move staged keys to the big trees as the bound asks. */
  #promote(n: number): void {
    // Keep the *_new trees near their bound, promoting as many entries as are over it (at most
    // about two batches' worth per add(), so a lowered bound never stalls one call).
    const s = this.#state.get()!;
    const entriesNow = s.entries + n;
    const bound = this.#bound.next(n, entriesNow);
    const most = 2 * n + 256;
    const [stagedD, cursorD] = this.#digestTree.keepTo(bound, most, s.staged_digest + n, s.cursor_digest);
    const [stagedU, cursorU] = this.#urlTree.keepTo(bound, most, s.staged_url + n, s.cursor_url);
    this.#setState.run(entriesNow, stagedD, stagedU, cursorD, cursorU);
  }

  #removeTailTx(file: number, from: number): number {
    const s = this.#state.get()!;
    let [stagedD, stagedU] = [s.staged_digest, s.staged_url];
    for (const r of this.#tail.all(file, from)) {
      if (this.#digestTree.remove(digestKey(r.bucket, r.alg, r.digest), r.seq)) stagedD--;
      if (this.#urlTree.remove(urlKey(r.bucket, r.url), r.seq)) stagedU--;
    }
    const n = this.#delTail.run(file, from).changes;
    if (n) this.#setState.run(s.entries - n, stagedD, stagedU, s.cursor_digest, s.cursor_url);
    return n;
  }
}
