/**
 * Compressing a group (the records of one capture) for the file it will land in, ahead of the
 * append queue: at once when every record is small and in memory (most captures), else on a
 * bounded number of slots, with a bound on the groups compressed and waiting for their append.
 */
import { availableParallelism } from "node:os";
import { allDone } from "../core/done.js";
import { ProxyError, isProxyError } from "../core/errors.js";
import type { Pending } from "./appendQueue.js";
import type { WarcVersion } from "./date.js";
import { encodeRecord, encodeRecordSync, type EncodeOptions, type EncodedRecord } from "./gzipMember.js";
import { semaphore } from "./semaphore.js";
import { serializeHeader } from "./serialize.js";
import type { RecordDraft } from "./types.js";

/** Groups compressed and waiting for their append, at most (bounds the memory they hold). */
const MAX_AHEAD = 128;

/** A group compressed for the file whose warcinfo is `warcinfoId`. */
export interface EncodedGroup {
  warcinfoId: string;
  drafts: RecordDraft[];
  records: EncodedRecord[];
  size: number;
}

/** Its records disposed; DONE when none had anything to release (members held in memory). */
export const disposeGroup = (g: EncodedGroup): Promise<unknown> => allDone(g.records.map((r) => r.dispose()));

/** Whether all its members are in memory (then it can go to the file in one pwritev(2) with others). */
export const inMemory = (g: EncodedGroup) => g.records.every((r) => r.parts !== null);

/** A group whose compression failed, to be compressed again on its turn (it names no file). */
export const uncompressed = (drafts: RecordDraft[]): EncodedGroup => ({ warcinfoId: "", drafts, records: [], size: 0 });

export class GroupEncoder {
  readonly #version: WarcVersion;
  readonly #enc: EncodeOptions;
  readonly #slots: ReturnType<typeof semaphore>;
  readonly #ahead = semaphore(MAX_AHEAD);
  readonly #fallbackSpoolDir: string | undefined;

  /**
   * `concurrency`: groups compressed at once; default min(4, CPUs). `fallbackSpoolDir`: where a
   * large member is spooled when the spool directory cannot take it (full while the WARC
   * directory is not: issue #26); the spool file is unlinked at once, so it never shows there.
   */
  constructor(version: WarcVersion, enc: EncodeOptions, concurrency?: number, fallbackSpoolDir?: string) {
    this.#version = version;
    this.#enc = enc;
    this.#slots = semaphore(concurrency ?? Math.max(1, Math.min(4, availableParallelism())));
    this.#fallbackSpoolDir = fallbackSpoolDir;
  }

  /**
   * Start compressing `group`: at once if it can be, else once a slot is free, for the file
   * `target()` names at that moment. Its `release()` (once its append is over, landed or not)
   * lets the next group be compressed ahead.
   */
  start(group: RecordDraft[], target: () => string): Pending<EncodedGroup> {
    const now = this.#encodeSync(group, target());
    if (now) return { ready: now, result: Promise.resolve(now), release: () => {} };
    const result = this.#ahead
      .acquire()
      .then(() => this.#slots.acquire())
      .then(() => this.encode(group, target()).finally(() => this.#slots.release()));
    return { ready: null, result, release: () => this.#ahead.release() };
  }

  async encode(group: RecordDraft[], warcinfoId: string): Promise<EncodedGroup> {
    try {
      return await this.#encodeWith(group, warcinfoId, this.#enc);
    } catch (e) {
      // A system error is the spool directory's (full, read-only): a ProxyError is the source's.
      const fallback = this.#fallbackSpoolDir;
      if (isProxyError(e) || fallback === undefined || fallback === this.#enc.spoolDir) throw e;
      return this.#encodeWith(group, warcinfoId, { ...this.#enc, spoolDir: fallback });
    }
  }

  async #encodeWith(group: RecordDraft[], warcinfoId: string, enc: EncodeOptions): Promise<EncodedGroup> {
    const records: EncodedRecord[] = [];
    try {
      for (const d of group) {
        if (d.type === "warcinfo") throw new ProxyError("ERR_INTERNAL", "a group must not hold a warcinfo record: each file's own is written by the writer");
        records.push(await encodeRecord(serializeHeader(d, { version: this.#version, warcinfoId }), d.block, enc));
      }
    } catch (e) {
      await Promise.all(records.map((r) => r.dispose()));
      throw e;
    }
    return { warcinfoId, drafts: group, records, size: records.reduce((n, r) => n + r.size, 0) };
  }

  /**
   * The group compressed at once when every record is small and in memory (most captures), or
   * null: then it takes the asynchronous path, which also reports any error.
   */
  #encodeSync(group: RecordDraft[], warcinfoId: string): EncodedGroup | null {
    const records: EncodedRecord[] = [];
    let size = 0;
    try {
      for (const d of group) {
        if (d.type === "warcinfo") return null;
        const r = encodeRecordSync(serializeHeader(d, { version: this.#version, warcinfoId }), d.block, this.#enc);
        if (!r) return null;
        records.push(r);
        size += r.size;
      }
    } catch {
      return null;
    }
    return { warcinfoId, drafts: group, records, size };
  }
}
