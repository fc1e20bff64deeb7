/**
 * The writer's side of the live index of a series' files (issue "CDXJ index"): what it tells the
 * index, and the guard that keeps an index failure from ever failing a write.
 */
import { errorMessage } from "../core/errors.js";
import type { Logger } from "../core/log.js";
import type { RecordDraft } from "./types.js";

/**
 * A record as it landed: its draft (whose fields the serializer wrote as they are, adding only
 * WARC-Warcinfo-ID and Content-Length) and where its bytes are.
 */
export interface LandedRecord {
  draft: RecordDraft;
  offset: number;
  length: number;
}

/**
 * Told about each file of a series, in queue order: a new `.open` file, each group once its
 * bytes are in the file (consecutive groups appended in one write come in one call, in order;
 * before `write()` resolves, while the drafts' block sources are still
 * readable), the close (before the rename, so the final name never exists without its index),
 * and the end of a file the writer gave up on.
 */
export interface WriterIndexHook {
  opened(file: { name: string; openPath: string; finalPath: string }): Promise<void>;
  written(name: string, records: LandedRecord[]): Promise<void>;
  closing(name: string): Promise<void>;
  closed(name: string, finalPath: string): Promise<void> | void;
  /** The file was removed (`removed`) or left `.open` for start-up recovery. */
  abandoned(name: string, removed: boolean): Promise<void> | void;
}

/**
 * The index hook as the writer calls it: absent or not, every call resolves. The index is derived
 * data (it can be rebuilt from the file): its failure is logged, never thrown.
 */
export class GuardedIndexHook {
  readonly #index: WriterIndexHook | undefined;
  readonly #log: Logger;

  constructor(index: WriterIndexHook | undefined, log: Logger) {
    this.#index = index;
    this.#log = log;
  }

  /** Whether there is an index to tell (saves building what only it would read). */
  get present(): boolean {
    return this.#index !== undefined;
  }

  opened(file: { name: string; openPath: string; finalPath: string }): Promise<void> {
    return this.#call("opened", (i) => i.opened(file));
  }

  written(name: string, records: LandedRecord[]): Promise<void> {
    return this.#call("written", (i) => i.written(name, records));
  }

  closing(name: string): Promise<void> {
    return this.#call("closing", (i) => i.closing(name));
  }

  closed(name: string, finalPath: string): Promise<void> {
    return this.#call("closed", (i) => i.closed(name, finalPath));
  }

  abandoned(name: string, removed: boolean): Promise<void> {
    return this.#call("abandoned", (i) => i.abandoned(name, removed));
  }

  async #call(what: string, call: (index: WriterIndexHook) => Promise<void> | void): Promise<void> {
    try {
      if (this.#index) await call(this.#index);
    } catch (e) {
      this.#log.error("warc-index-failed", { what, error: errorMessage(e) });
    }
  }
}
