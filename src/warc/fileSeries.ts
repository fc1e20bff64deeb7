/**
 * The files of one output series, one at a time (warc-files.md §2, §6): which file is current,
 * opening the next `NAME.open` with its warcinfo, appending groups to it (all land, or none),
 * closing it when full or idle and renaming it to `NAME`, and giving up on a file whose tail is
 * uncertain (left `.open` for start-up recovery).
 */
import type { Clock } from "../core/clock.js";
import { DONE } from "../core/done.js";
import { recordId, type IdSource } from "../core/ids.js";
import type { Logger } from "../core/log.js";
import type { WarcVersion } from "./date.js";
import type { Durability } from "./durability.js";
import type { EncodeOptions } from "./gzipMember.js";
import type { EncodedGroup } from "./groupEncoder.js";
import type { RecordDraft, WrittenRecord } from "./types.js";
import { createExclusive, landedRecords, writeGroups, writeWarcinfo, type OpenWarcFile } from "./warcFile.js";
import type { WriterFailure } from "./writerFailure.js";
import type { WriterFs } from "./writerFs.js";
import type { GuardedIndexHook } from "./writerIndexHook.js";

export interface FileSeriesOptions {
  dir: string;
  gzip: boolean;
  version: WarcVersion;
  enc: EncodeOptions;
  maxFileBytes: number;
  /** 0 disables. */
  idleRolloverMs: number;
  clock: Clock;
  ids: IdSource;
  log: Logger;
  fs: WriterFs;
  /** The next file name for a file opened at that instant. */
  nextName: (openedMicros: bigint) => string;
  /** The warcinfo record of a new file. */
  warcinfo: (id: string, openedMicros: bigint, filename: string) => RecordDraft;
  durability: Durability;
  failure: WriterFailure;
  index: GuardedIndexHook;
  /** Called with the final path after each file is closed and renamed. */
  onFileClosed?: (finalPath: string) => void;
  /** Run a task through the writer's queue (the idle rollover never races a write). */
  schedule: (task: () => Promise<void>) => Promise<void>;
}

/**
 * Whether a group of `groupSize` bytes must go to a new file: the current one would overflow and
 * already holds records (groups never split; no file holds only its warcinfo; a group larger
 * than the limit goes alone into a file).
 */
export function needsNewFile(current: { size: number; records: number } | null, groupSize: number, maxFileBytes: number): boolean {
  return current !== null && current.records > 0 && current.size + groupSize > maxFileBytes;
}

export class WarcFileSeries {
  readonly #o: FileSeriesOptions;
  #current: OpenWarcFile | null = null;
  // Pre-drawn so a group can be compressed for the file that its arrival will open.
  #nextWarcinfoId: string;
  #idle: NodeJS.Timeout | null = null;
  /** The file the idle timer is for, and its record count when last armed. */
  #idleFile: OpenWarcFile | null = null;
  #idleSeen = 0;
  readonly #filesWritten: string[] = [];
  #recordsWritten = 0;
  #bytesWritten = 0;

  constructor(o: FileSeriesOptions) {
    this.#o = o;
    this.#nextWarcinfoId = recordId(o.ids.uuid());
  }

  get current(): OpenWarcFile | null {
    return this.#current;
  }

  /** The warcinfo a group compressed now names: the current file's, or the one the next file gets. */
  get warcinfoId(): string {
    return this.#current?.warcinfoId ?? this.#nextWarcinfoId;
  }

  counts(): { filesWritten: string[]; recordsWritten: number; bytesWritten: number } {
    return { filesWritten: [...this.#filesWritten], recordsWritten: this.#recordsWritten, bytesWritten: this.#bytesWritten };
  }

  /** Whether a group of `size` bytes must go to a new file (see needsNewFile). */
  needsNewFile(size: number): boolean {
    return needsNewFile(this.#current, size, this.#o.maxFileBytes);
  }

  /** Open the next file, its warcinfo written: it becomes the current one. */
  async open(): Promise<OpenWarcFile> {
    const { fs, dir, log, failure } = this.#o;
    const micros = this.#o.clock.nowMicros();
    const { name, finalPath, openPath, fh } = await createExclusive(fs, dir, () => this.#o.nextName(micros), failure);
    const id = this.#nextWarcinfoId;
    this.#nextWarcinfoId = recordId(this.#o.ids.uuid());
    try {
      const size = await writeWarcinfo(fh, this.#o.warcinfo(id, micros, name), this.#o.version, this.#o.enc);
      await this.#o.durability.created();
      this.#current = { name, finalPath, openPath, fh, warcinfoId: id, size, records: 0 };
      log.info("warc-file-opened", { file: openPath });
      await this.#o.index.opened({ name, openPath, finalPath });
      return this.#current;
    } catch (e) {
      await fh.close().catch(() => {});
      await fs.unlink(openPath).catch(() => {});
      throw failure.wrap(e, openPath);
    }
  }

  /**
   * Append consecutive groups to `f` (`fresh`: opened for them); all land, or none. Where each
   * record landed, once the durability mode is satisfied and the index told.
   */
  async append(f: OpenWarcFile, groups: EncodedGroup[], fresh: boolean): Promise<WrittenRecord[][]> {
    const start = f.size;
    let op = "write";
    let written: { outs: WrittenRecord[][]; end: number };
    try {
      written = await writeGroups(f, groups, this.#o.gzip);
      op = "fsync";
      const synced = this.#o.durability.appended(f.fh);
      if (synced !== DONE) await synced; // `rollover` durability: no fsync per append, no hop
    } catch (e) {
      const err = this.#o.failure.wrap(e, f.openPath, op);
      await this.#rollback(f, start, fresh, op === "fsync");
      throw err;
    }
    if (this.#o.index.present) await this.#o.index.written(f.name, landedRecords(groups, written.outs));
    const n = groups.reduce((k, g) => k + g.drafts.length, 0);
    f.size = written.end;
    f.records += n;
    this.#recordsWritten += n;
    this.#bytesWritten += written.end - (fresh ? 0 : start); // a fresh file's warcinfo counts once it is kept
    this.#o.failure.clear();
    // A group that filled the file (or one larger than the limit, alone in it) closes it now.
    // Should that close fail, this write rejects too: its bytes are only as safe as the file.
    if (f.size >= this.#o.maxFileBytes) await this.close();
    else this.#armIdle(f);
    return written.outs;
  }

  /** Close the current file (if any), fsynced, and rename it to its final name. */
  async close(): Promise<void> {
    const f = this.#current;
    if (!f) return;
    this.#current = null;
    this.#clearIdle();
    const { fs, durability, index, failure } = this.#o;
    let op = "fsync";
    try {
      await durability.closing(f.fh);
      op = "close";
      await f.fh.close();
      await index.closing(f.name);
      op = "rename";
      await fs.rename(f.openPath, f.finalPath);
      op = "fsync the directory of";
      await durability.renamed();
    } catch (e) {
      if (op === "fsync") await f.fh.close().catch(() => {});
      const err = failure.fail(f.openPath, e, op); // stays `.open`; start-up recovery finishes it
      if (op !== "fsync the directory of") await index.abandoned(f.name, false);
      throw err;
    }
    this.#filesWritten.push(f.name);
    this.#o.log.info("warc-file-closed", { file: f.finalPath, bytes: f.size, records: f.records });
    await index.closed(f.name, f.finalPath);
    try {
      this.#o.onFileClosed?.(f.finalPath);
    } catch (e) {
      this.#o.log.error("warc-file-closed-callback-failed", { file: f.finalPath, error: e });
    }
  }

  /** The writer is closing: no idle timer outlives it. */
  stopIdle(): void {
    this.#clearIdle();
  }

  /** Leave no part of a failed group in the file. */
  async #rollback(f: OpenWarcFile, start: number, fresh: boolean, syncFailed: boolean): Promise<void> {
    const log = this.#o.log;
    if (!fresh && !syncFailed) {
      try {
        await f.fh.truncate(start);
        log.warn("warc-group-rolled-back", { file: f.openPath, offset: start });
        return;
      } catch (e) {
        log.error("warc-truncate-failed", { file: f.openPath, error: e });
      }
    }
    // A fresh file holds nothing anyone was told about: remove it. Otherwise (truncate or fsync
    // failed) the tail is uncertain: stop using the file and leave it `.open` for start-up
    // recovery (§7), which cuts it back to its complete records.
    if (this.#current === f) this.#current = null;
    this.#clearIdle();
    await f.fh.close().catch(() => {});
    if (fresh) await this.#o.fs.unlink(f.openPath).catch(() => {});
    else log.error("warc-file-abandoned", { file: f.openPath, keptBytes: start });
    await this.#o.index.abandoned(f.name, fresh);
  }

  #armIdle(f: OpenWarcFile): void {
    if (this.#o.idleRolloverMs <= 0) return this.#clearIdle();
    this.#idleFile = f;
    this.#idleSeen = f.records;
    // Armed after every append: the running timer starts over rather than a new one per append.
    if (this.#idle) {
      this.#idle.refresh();
      return;
    }
    this.#idle = setTimeout(() => {
      this.#idle = null;
      const idleFile = this.#idleFile;
      const seen = this.#idleSeen;
      // Through the queue, and only if nothing arrived meanwhile. A failure is already logged
      // and marked in state().failed by close().
      this.#o
        .schedule(async () => {
          if (this.#current === idleFile && idleFile?.records === seen) await this.close();
        })
        .catch(() => {});
    }, this.#o.idleRolloverMs);
    this.#idle.unref();
  }

  #clearIdle(): void {
    if (this.#idle) clearTimeout(this.#idle);
    this.#idle = null;
    this.#idleFile = null;
  }
}
