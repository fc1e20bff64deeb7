/**
 * When the writer fsyncs (warc-files.md §6, `warc.durability`). Every mode: the file at close,
 * before its rename, and the directory after the rename. `rollover` (the default) nothing more,
 * never per group; `strict` also the directory once a new file is created, and the file after
 * every append, before write() resolves.
 */
import { DONE } from "../core/done.js";
import type { WarcFileHandle, WriterFs } from "./writerFs.js";

export type DurabilityMode = "rollover" | "strict";

export class Durability {
  readonly #strict: boolean;
  readonly #fs: WriterFs;
  readonly #dir: string;

  constructor(mode: DurabilityMode, fs: WriterFs, dir: string) {
    this.#strict = mode === "strict";
    this.#fs = fs;
    this.#dir = dir;
  }

  /** A new `.open` file holds its warcinfo. */
  async created(): Promise<void> {
    // Strict durability: the file's directory entry must survive a crash as well as its bytes.
    if (this.#strict) await this.#fs.syncDir(this.#dir);
  }

  /** Groups were appended to the file; their write() has not resolved yet. DONE: nothing to sync. */
  appended(fh: WarcFileHandle): Promise<void> {
    return this.#strict ? fh.sync() : DONE;
  }

  /** The file is about to be closed and renamed to its final name. */
  async closing(fh: WarcFileHandle): Promise<void> {
    await fh.sync();
  }

  /** The file has its final name. */
  async renamed(): Promise<void> {
    await this.#fs.syncDir(this.#dir);
  }
}
