/**
 * Writes held back instead of failed (issue #26, `rollover` durability): in that mode the client
 * already has its response when the records are written, so a write that fails (disk full, the
 * directory read-only, I/O error) must not drop the capture. The write whose turn it is waits and
 * tries again, with a growing pause, until it lands; the writer's queue keeps every later write
 * behind it, so captures land in their original order. Only a closing writer gives up: one more
 * try, then every write still waiting is given up (the writer puts each in `lost/`).
 *
 * This is also the ledger of the writes not yet landed: how many, their bytes (memory + spool),
 * and since when the oldest has been held, for status and for the bounds that refuse new
 * exchanges (capture.retryMaxBytes, capture.retryMaxMs).
 */
import { isProxyError } from "../core/errors.js";

/** A write not yet landed. */
export interface LedgerEntry {
  /** Bytes of the group's blocks (in memory or spooled). */
  readonly bytes: number;
  /** When it began to wait for a writer that cannot write (ms), or null. */
  heldSince: number | null;
  onHeld?: () => void;
}

/** The writes held back right now. */
export interface Waiting {
  captures: number;
  bytes: number;
  /** When the oldest of them began to wait (ms since the epoch), or null when none does. */
  since: number | null;
}

/** Pause before the first retry, doubled after each failed one up to MAX_PAUSE_MS. */
const FIRST_PAUSE_MS = 100;
const MAX_PAUSE_MS = 5000;

/**
 * Whether a failed write may succeed later: a failure of the file system (ERR_WARC_WRITE, or a
 * system error spooling a record) may; a source that cannot be read (ERR_SPOOL) or a bug never will.
 */
export function worthRetrying(e: unknown): boolean {
  return !isProxyError(e) || e.code === "ERR_WARC_WRITE";
}

export class WriteHold {
  readonly #ledger = new Set<LedgerEntry>();
  #failing = false;
  #closing = false;
  #retriedAtClose = false;
  #givenUp = false;
  #pause = FIRST_PAUSE_MS;
  #wake: (() => void) | null = null;

  /** A write was called: it is in the ledger until `leave`; held at once while writes fail. */
  enter(bytes: number, onHeld?: () => void): LedgerEntry {
    const entry: LedgerEntry = { bytes, heldSince: null, ...(onHeld && { onHeld }) };
    this.#ledger.add(entry);
    if (this.#failing) this.#hold(entry, Date.now());
    return entry;
  }

  leave(entry: LedgerEntry): void {
    this.#ledger.delete(entry);
  }

  /** True from a failed write until the next one lands: the write whose turn it is is trying again. */
  get failing(): boolean {
    return this.#failing;
  }

  /** True once the writer gave up (closing): every write still waiting goes to `lost/`. */
  get givenUp(): boolean {
    return this.#givenUp;
  }

  /**
   * The write whose turn it is failed with `e`: resolves true once it should try again (after a
   * pause, or at once when the writer is closing and has not tried once more yet), false when
   * it must give up (a failure that cannot heal, or a closing writer that already retried).
   */
  async failed(e: unknown): Promise<boolean> {
    if (this.#givenUp || !worthRetrying(e)) return false;
    this.#failing = true;
    const now = Date.now();
    for (const entry of this.#ledger) this.#hold(entry, now);
    if (this.#closing) {
      if (this.#retriedAtClose) {
        this.#givenUp = true;
        return false;
      }
      this.#retriedAtClose = true;
      return true;
    }
    await new Promise<void>((resolve) => {
      const t = setTimeout(() => {
        this.#wake = null;
        resolve();
      }, this.#pause);
      this.#wake = () => {
        clearTimeout(t);
        this.#wake = null;
        resolve();
      };
    });
    this.#pause = Math.min(this.#pause * 2, MAX_PAUSE_MS);
    return true;
  }

  /** A write landed: the writer writes again. */
  landed(): void {
    this.#failing = false;
    this.#pause = FIRST_PAUSE_MS;
  }

  /** The writer is closing: a held write tries once more now, then everything waiting is given up. */
  close(): void {
    this.#closing = true;
    this.#wake?.();
  }

  waiting(): Waiting {
    let captures = 0;
    let bytes = 0;
    let since: number | null = null;
    for (const e of this.#ledger) {
      if (e.heldSince === null) continue;
      captures++;
      bytes += e.bytes;
      if (since === null || e.heldSince < since) since = e.heldSince;
    }
    return { captures, bytes, since };
  }

  #hold(entry: LedgerEntry, now: number): void {
    if (entry.heldSince !== null) return;
    entry.heldSince = now;
    try {
      entry.onHeld?.();
    } catch {
      // The caller's business; the write waits either way.
    }
  }
}
