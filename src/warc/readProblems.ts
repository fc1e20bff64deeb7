/**
 * How the WARC reader reports damage (issue "Deduplication", issue "CDXJ"): every damaged or odd
 * spot is a `{file, offset, reason}` — damage (reading continues after it) or a warning (an
 * oddity that loses nothing) — and only a file that cannot be opened or read at all throws.
 */

/** A damaged or odd spot in a WARC file. `offset` is a file offset (of a gzip member, or a record). */
export interface WarcReadProblem {
  file: string;
  offset: number;
  reason: string;
}

/** Thrown by the iterator only when the file cannot be opened or read at all. */
export class WarcReadError extends Error {
  readonly file: string;
  readonly offset: number;
  readonly reason: string;
  constructor(file: string, offset: number, reason: string, cause?: unknown) {
    super(`${file} at offset ${offset}: ${reason}`);
    this.name = "WarcReadError";
    this.file = file;
    this.offset = offset;
    this.reason = reason;
    if (cause !== undefined) (this as { cause?: unknown }).cause = cause;
  }
}

/** Where the reader's sources and parsers report damage: the member or record offset, and why. */
export type Report = (offset: number, reason: string) => void;

/** Callbacks for problems as they are found (the reader's options). */
export interface ProblemHooks {
  /** Damage: reading continues after it. */
  onError?(p: WarcReadProblem): void;
  /** Oddities that lose nothing. */
  onWarning?(p: WarcReadProblem): void;
}

/** The problems of one file, collected in order and passed to the hooks as they come. */
export class ProblemLog {
  readonly errors: WarcReadProblem[] = [];
  readonly warnings: WarcReadProblem[] = [];
  constructor(
    readonly file: string,
    readonly hooks: ProblemHooks,
  ) {}

  error(offset: number, reason: string): void {
    const p = { file: this.file, offset, reason };
    this.errors.push(p);
    this.hooks.onError?.(p);
  }

  warn(offset: number, reason: string): void {
    const p = { file: this.file, offset, reason };
    this.warnings.push(p);
    this.hooks.onWarning?.(p);
  }
}
