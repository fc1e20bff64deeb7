/**
 * Dedup entries that could not reach the shared store, kept on disk until it is back.
 *
 * A capture's records are already in the WARC when its entries are made, so losing an entry
 * loses no archive, only the chance to deduplicate against that record later; still, a crawler
 * re-fetching a site after an outage should find yesterday's payloads. The outbox is a JSON-lines
 * file next to the WARCs, appended synchronously (in capture order, surviving a kill -9 and a
 * restart), bounded by `shared.outboxMaxBytes`: past it, further entries are dropped, counted and
 * logged.
 *
 * Draining renames the file aside first, so entries queued while it drains go to a fresh file and
 * are drained next; entries are applied in order. A batch replayed after a crash in the middle of
 * a drain is inserted twice: a duplicate entry points at the same record, so lookups are unchanged.
 */
import { appendFileSync, existsSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { createReadStream } from "node:fs";
import { createInterface } from "node:readline";
import type { Logger } from "../core/log.js";
import { parseDigest } from "../dedup/digestKey.js";
import type { DedupEntry } from "../dedup/types.js";
import { formatDigest } from "../warc/digest.js";

/** An entry as one JSON value (the digest in its WARC spelling). */
type Stored = Omit<DedupEntry, "digest"> & { digest: string };

const toStored = (e: DedupEntry): Stored => ({ ...e, digest: formatDigest(e.digest.alg, e.digest.bytes) });

function fromStored(s: Stored): DedupEntry | null {
  const digest = parseDigest(String(s?.digest ?? ""));
  if (!digest || typeof s.bucket !== "string" || typeof s.url !== "string") return null;
  return { ...s, digest };
}

export interface OutboxReport {
  queuedEntries: number;
  queuedBytes: number;
  droppedEntries: number;
}

export class Outbox {
  readonly path: string;
  readonly #draining: string;
  readonly #maxBytes: number;
  readonly #log: Logger;
  #bytes = 0;
  #entries = 0;
  #dropped = 0;

  constructor(path: string, maxBytes: number, log: Logger) {
    this.path = path;
    this.#draining = path + ".draining";
    this.#maxBytes = maxBytes;
    this.#log = log;
    for (const f of [this.#draining, path]) if (existsSync(f)) this.#bytes += statSync(f).size;
    if (this.#bytes > 0) this.#entries = -1; // unknown until drained
  }

  /** Whether anything waits to be drained (also from before a restart). */
  get pending(): boolean {
    return this.#bytes > 0;
  }

  report(): OutboxReport {
    return { queuedEntries: Math.max(this.#entries, 0), queuedBytes: this.#bytes, droppedEntries: this.#dropped };
  }

  /** Queue entries; false (and logged) when the outbox is full and they were dropped. */
  append(entries: DedupEntry[]): boolean {
    if (entries.length === 0) return true;
    const line = JSON.stringify(entries.map(toStored)) + "\n";
    const size = Buffer.byteLength(line);
    if (this.#bytes + size > this.#maxBytes) {
      if (this.#dropped === 0) this.#log.error("dedup-outbox-full", { path: this.path, maxBytes: this.#maxBytes, note: "further dedup entries are dropped until the shared store is back; their records are in the WARCs" });
      this.#dropped += entries.length;
      return false;
    }
    appendFileSync(this.path, line);
    this.#bytes += size;
    if (this.#entries >= 0) this.#entries += entries.length;
    return true;
  }

  /**
   * Apply every queued batch, oldest first, with `apply`; entries queued meanwhile are drained
   * too. Throws (leaving the rest queued) when `apply` throws.
   */
  async drain(apply: (entries: DedupEntry[]) => Promise<void>): Promise<number> {
    let applied = 0;
    for (;;) {
      if (!existsSync(this.#draining)) {
        if (!existsSync(this.path) || statSync(this.path).size === 0) break;
        renameSync(this.path, this.#draining);
      }
      applied += await this.#drainFile(apply);
      this.#bytes = existsSync(this.path) ? statSync(this.path).size : 0;
      rmSync(this.#draining, { force: true });
    }
    this.#bytes = 0;
    this.#entries = 0;
    return applied;
  }

  async #drainFile(apply: (entries: DedupEntry[]) => Promise<void>): Promise<number> {
    let applied = 0;
    let skipped = 0;
    const lines = createInterface({ input: createReadStream(this.#draining), crlfDelay: Infinity });
    for await (const line of lines) {
      if (line === "") continue;
      let batch: DedupEntry[];
      try {
        batch = (JSON.parse(line) as Stored[]).map(fromStored).filter((e): e is DedupEntry => e !== null);
      } catch {
        skipped++; // a line torn by a crash while it was appended
        continue;
      }
      await apply(batch);
      applied += batch.length;
    }
    if (skipped) this.#log.warn("dedup-outbox-lines-skipped", { path: this.#draining, skipped });
    return applied;
  }

  /** Drop queued entries pointing into `filename` at offsets ≥ `fromOffset` (crash recovery cut them). */
  async removeFileTail(filename: string, fromOffset: number): Promise<number> {
    if (!this.pending) return 0;
    const kept: DedupEntry[][] = [];
    let removed = 0;
    await this.drain(async (batch) => {
      const keep = batch.filter((e) => !(e.filename === filename && e.offset !== null && e.offset >= fromOffset));
      removed += batch.length - keep.length;
      if (keep.length) kept.push(keep);
    });
    if (kept.length) {
      writeFileSync(this.path, kept.map((b) => JSON.stringify(b.map(toStored)) + "\n").join(""));
      this.#bytes = statSync(this.path).size;
      this.#entries = kept.reduce((n, b) => n + b.length, 0);
    }
    return removed;
  }
}
