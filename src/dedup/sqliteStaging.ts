/**
 * The small log-structured level of the SQLite dedup store (sqliteSchema.ts): new keys go to the
 * *_new trees in key order, and each add() moves one slice of key space from there to the big
 * trees, so a batch touches only that slice of their pages.
 */
import type Database from "better-sqlite3";
import { KEY_SPACE } from "./sqliteKeys.js";

/** Batches at least this large are sorted by key before they go into the *_new trees. */
const SORT_MIN = 64;
/** Sort chunk: the batch index takes the low 20 bits of the sort value. */
const SORT_CHUNK = 1 << 20;

/**
 * Call `each(i)` for i < n in the order of keys[i] (47-bit). Sorted on the keys' top 33 bits with
 * the index in the low 20, which a Float64Array sorts natively, without a comparator.
 */
export function inKeyOrder(keys: Float64Array, n: number, each: (i: number) => void): void {
  if (n < SORT_MIN) {
    for (let i = 0; i < n; i++) each(i);
    return;
  }
  for (let base = 0; base < n; base += SORT_CHUNK) {
    const m = Math.min(SORT_CHUNK, n - base);
    const order = new Float64Array(m);
    for (let j = 0; j < m; j++) order[j] = Math.floor(keys[base + j]! / 16384) * SORT_CHUNK + j;
    order.sort();
    for (let j = 0; j < m; j++) each(base + (order[j]! % SORT_CHUNK));
  }
}

/**
 * How many entries the *_new trees may keep before add() promotes: the bound adapts to the
 * batch sizes this process sees.
 */
export class StagingBound {
  readonly #min: number;
  /** Moving average of add() batch sizes in this process: what the staging bound adapts to. */
  #batchAvg = 0;

  constructor(min: number) {
    this.#min = min;
  }

  /** After a batch of `n` entries, with `entries` in the store (these included). */
  next(n: number, entries: number): number {
    // A batch of n entries dirties about min(n, pages of the *_new tree) pages there, plus the
    // fraction n/staged of the big tree's pages when as many are promoted: sqrt(n × entries)
    // staged minimises the sum. Promoting costs CPU as well and pays only once the big tree holds
    // well over ~26 batches (below that a batch dirties most of its pages anyway): until then, none.
    this.#batchAvg = this.#batchAvg === 0 ? n : 0.8 * this.#batchAvg + 0.2 * n;
    const batch = this.#batchAvg;
    return Math.max(this.#min, Math.ceil(Math.sqrt(batch * entries)), entries < 26 * batch ? entries : 0);
  }
}

/**
 * How far the *_new trees may go over their bound before add() promotes (back down to the bound).
 * A commit rewrites every page it touched: promoting on every single-entry add() (the proxy's
 * usual batch) dirtied four more pages per add (the slice's page in each big tree and in each
 * *_new tree), ~7 WAL frames an add instead of ~5. Letting 64 entries gather moves them as one
 * slice: those pages once per 64 adds, and a slice still small enough (about 50 pages per
 * promotion at 10 million entries) not to stall the add that moves it.
 */
const PROMOTE_SLACK = 64;

/** One lookup path: its big tree, its *_new tree, and moving key ranges from one to the other. */
export class KeyTree {
  readonly #promote: Database.Statement<[number, number]>;
  readonly #dropStaged: Database.Statement<[number, number]>;
  readonly #delete: Database.Statement<[number, number]>;
  readonly #deleteStaged: Database.Statement<[number, number]>;

  constructor(db: Database.Database, table: string, columns: string) {
    this.#promote = db.prepare(`INSERT INTO ${table}(${columns}) SELECT ${columns} FROM ${table}_new WHERE key >= ? AND key < ? ORDER BY key, seq`);
    this.#dropStaged = db.prepare(`DELETE FROM ${table}_new WHERE key >= ? AND key < ?`);
    this.#delete = db.prepare(`DELETE FROM ${table} WHERE key = ? AND seq = ?`);
    this.#deleteStaged = db.prepare(`DELETE FROM ${table}_new WHERE key = ? AND seq = ?`);
  }

  /**
   * With `staged` entries in the *_new tree, once they are more than PROMOTE_SLACK over `bound`,
   * promote as many as are over `bound` (at most `most`) from the key range after `cursor`.
   * Returns [staged, cursor] after.
   */
  keepTo(bound: number, most: number, staged: number, cursor: number): [number, number] {
    if (staged <= bound + PROMOTE_SLACK) return [staged, cursor];
    const [moved, next] = this.promote(cursor, staged, Math.min(most, staged - bound));
    return [staged - moved, next];
  }

  /**
   * Move the staged entries of the next key range after `cursor` to the big tree: a slice of key
   * space expected to hold `want` of the `staged` entries. Returns [moved, new cursor].
   */
  promote(cursor: number, staged: number, want: number): [number, number] {
    const width = Math.min(KEY_SPACE, Math.ceil((KEY_SPACE * want) / staged));
    let moved = 0;
    const end = cursor + width;
    const ranges: Array<[number, number]> = end <= KEY_SPACE ? [[cursor, end]] : [[cursor, KEY_SPACE], [0, end - KEY_SPACE]];
    for (const [a, b] of ranges) {
      this.#promote.run(a, b);
      moved += this.#dropStaged.run(a, b).changes;
    }
    return [moved, end % KEY_SPACE];
  }

  /** Remove one entry's row, wherever it is; true when it was staged. */
  remove(key: number, seq: number): boolean {
    if (this.#deleteStaged.run(key, seq).changes) return true;
    this.#delete.run(key, seq);
    return false;
  }
}
