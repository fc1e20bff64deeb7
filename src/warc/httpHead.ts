/**
 * The HTTP head at the start of an `application/http` block (a response or a request), as the
 * indexers need it: status, method, target, fields, and where the payload starts.
 */
import { fieldValue, fieldValues, findHeadEnd, findHeadEndText, firstLineOf, MAX_HEAD, parseFields, type ParsedFields } from "./headerFields.js";

/** The status line / request line and header fields of an HTTP message stored in a block. */
export interface HttpHead {
  /** First line, e.g. `HTTP/1.1 200 OK` or `GET /x HTTP/1.1`. */
  startLine: string;
  /** Response status code; null for a request or an unparsable status line. */
  status: number | null;
  /** Request method; null for a response. */
  method: string | null;
  /** Request target; null for a response. */
  requestTarget: string | null;
  headers: Array<[string, string]>;
  /** First value of a field (case-insensitive), or null. */
  get(name: string): string | null;
  getAll(name: string): string[];
  /** Bytes of the head in the block, blank line included: the payload starts here. */
  length: number;
}

/**
 * Heads are short: the end of one is looked for in the block's first bytes as text (one copy,
 * which the fields are then read from), and in the whole buffer only when it is not found there.
 */
const TEXT_WINDOW = 4096;

/** Parse the HTTP head at the start of a block; null when it is not one or does not end in `b`. */
export function parseHttpHead(b: Buffer): HttpHead | null {
  if (b.length < 8) return null;
  const isResponse = b[0] === 0x48 && b[1] === 0x54 && b[2] === 0x54 && b[3] === 0x50 && b[4] === 0x2f; // "HTTP/"
  if (!isResponse && !/^[A-Z][A-Z_-]* \S/.test(b.toString("latin1", 0, 32))) return null;
  const limit = Math.min(b.length, MAX_HEAD);
  const window = b.toString("latin1", 0, Math.min(limit, TEXT_WINDOW));
  // A blank line found whole in the window is the first in the buffer too: one starting earlier
  // would overlap it, and CRLF CRLF and LF LF cannot overlap that way.
  let e = findHeadEndText(window);
  let text: string;
  if (e !== null) text = window.slice(0, e.end);
  else {
    if (limit <= TEXT_WINDOW) return null;
    e = findHeadEnd(b.subarray(0, limit));
    if (!e) return null;
    text = b.toString("latin1", 0, e.end);
  }
  return new ParsedHttpHead(text, e.end + e.sep, isResponse);
}

/**
 * A head whose start line is read at once and whose fields are read on first use (the index
 * line of a revisit needs only its status). A class: methods on the prototype, not per head.
 */
class ParsedHttpHead implements HttpHead {
  readonly startLine: string;
  readonly status: number | null = null;
  readonly method: string | null = null;
  readonly requestTarget: string | null = null;
  readonly #text: string;
  #fields: ParsedFields | null = null;

  constructor(
    text: string,
    readonly length: number,
    isResponse: boolean,
  ) {
    this.#text = text;
    this.startLine = firstLineOf(text);
    if (isResponse) {
      const m = /^HTTP\/\S+\s+(\d{3})(?:\s|$)/.exec(this.startLine);
      this.status = m ? Number(m[1]) : null;
    } else {
      const parts = this.startLine.split(/\s+/);
      this.method = parts[0] ?? null;
      this.requestTarget = parts[1] ?? null;
    }
  }

  get headers(): Array<[string, string]> {
    return this.#parsed().headers;
  }

  get(name: string): string | null {
    const f = this.#parsed();
    return fieldValue(f.lower, f.values, name);
  }

  getAll(name: string): string[] {
    const f = this.#parsed();
    return fieldValues(f.lower, f.values, name);
  }

  #parsed(): ParsedFields {
    return (this.#fields ??= parseFields(this.#text));
  }
}
