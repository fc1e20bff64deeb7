/**
 * The captures that did not make it into the WARCs whole (issue #26), told in the log and kept
 * for `/status`: those a closing writer gave up (written to `lost/` if at all possible), and those
 * whose spool could not be written (recorded truncated to what was kept, `WARC-Truncated`).
 */
import type { Logger } from "../core/log.js";
import type { CapturedMessage } from "../capture/messageCapture.js";
import type { LostCapture } from "../warc/lostFile.js";

/** The most recent ones kept for status, per kind. */
const KEPT = 100;

export interface LostEntry {
  uri: string;
  /** The WARC file of its own under `lost/`, or null when even that could not be written. */
  file: string | null;
  reason: string;
  at: string;
}

export interface TruncatedEntry {
  uri: string;
  reason: string;
  at: string;
}

export class CaptureTroubles {
  readonly #log: Logger;
  #lostCount = 0;
  #truncatedCount = 0;
  readonly #lost: LostEntry[] = [];
  readonly #truncated: TruncatedEntry[] = [];

  constructor(log: Logger) {
    this.#log = log;
  }

  lost(uri: string, e: LostCapture): void {
    this.#lostCount++;
    keep(this.#lost, { uri, file: e.file, reason: e.message, at: new Date().toISOString() });
    this.#log.error("capture-lost", { uri, file: e.file, error: e.message });
  }

  /** A capture about to be written: noted if a spool of it could not keep every byte. */
  spoolCut(ex: { targetUri: string; request: CapturedMessage; response: CapturedMessage }): void {
    const reason = ex.response.spoolFailure ?? ex.request.spoolFailure;
    if (!reason) return;
    this.#truncatedCount++;
    keep(this.#truncated, { uri: ex.targetUri, reason, at: new Date().toISOString() });
    this.#log.warn("capture-truncated", { uri: ex.targetUri, reason, requestBytesKept: ex.request.bodyLength, responseBytesKept: ex.response.bodyLength });
  }

  get lostCount(): number {
    return this.#lostCount;
  }

  get truncatedCount(): number {
    return this.#truncatedCount;
  }

  report(): { lost: { count: number; recent: LostEntry[] }; spoolTruncated: { count: number; recent: TruncatedEntry[] } } {
    return { lost: { count: this.#lostCount, recent: [...this.#lost] }, spoolTruncated: { count: this.#truncatedCount, recent: [...this.#truncated] } };
  }
}

function keep<T>(list: T[], entry: T): void {
  list.push(entry);
  if (list.length > KEPT) list.shift();
}
