/**
 * The HTTP head at the start of an `application/http` block (a response or a request), as the
 * indexers need it: status, method, target, fields, and where the payload starts.
 */
import { fieldGetter, findHeadEnd, MAX_HEAD, parseFields } from "./headerFields.js";

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

/** Parse the HTTP head at the start of a block; null when it is not one or does not end in `b`. */
export function parseHttpHead(b: Buffer): HttpHead | null {
  if (b.length < 8) return null;
  const isResponse = b[0] === 0x48 && b.subarray(0, 5).toString("latin1") === "HTTP/";
  if (!isResponse && !/^[A-Z][A-Z_-]* \S/.test(b.subarray(0, 32).toString("latin1"))) return null;
  const e = findHeadEnd(b.length > MAX_HEAD ? b.subarray(0, MAX_HEAD) : b);
  if (!e) return null;
  const f = parseFields(b.subarray(0, e.end).toString("latin1"));
  const g = fieldGetter(f.lower, f.values);
  let status: number | null = null;
  let method: string | null = null;
  let requestTarget: string | null = null;
  if (isResponse) {
    const m = /^HTTP\/\S+\s+(\d{3})(?:\s|$)/.exec(f.firstLine);
    status = m ? Number(m[1]) : null;
  } else {
    const parts = f.firstLine.split(/\s+/);
    method = parts[0] ?? null;
    requestTarget = parts[1] ?? null;
  }
  return { startLine: f.firstLine, status, method, requestTarget, headers: f.headers, get: g.get, getAll: g.getAll, length: e.end + e.sep };
}
