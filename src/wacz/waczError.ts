/**
 * What stops a WACZ from being made, by kind, so that each caller can answer in its own terms:
 * `lathe wacz` exits 1 with the message, the control API answers 404, 409 or 422.
 */
export type WaczProblem =
  /** No such collection, session or file. */
  | "not-found"
  /** Not packageable in its present state: a session still open, a file still being written, nothing closed yet. */
  | "conflict"
  /** An input is not a WARC, or is damaged or truncated: the message names the file and offset. */
  | "damaged"
  /** The output cannot be written where asked. */
  | "output";

export class WaczError extends Error {
  constructor(
    readonly problem: WaczProblem,
    message: string,
  ) {
    super(message);
    this.name = "WaczError";
  }
}
