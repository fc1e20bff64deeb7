/**
 * Header sections as the reader finds them: a WARC header or an HTTP head — a first line, then
 * `Name: value` fields (obsolete line folding honoured), ended by CRLF CRLF or, from bare-LF
 * writers, LF LF. Pure: text in, fields out.
 */

const MIB = 1024 * 1024;
/** A WARC header section must end within this many bytes. */
export const MAX_HEAD = 1 * MIB;

export const CRLF2 = Buffer.from("\r\n\r\n");
const LF2 = Buffer.from("\n\n");

/** Case-insensitive lookup of fields by name: `names` lower-cased, `values` in the same order. */
export function fieldGetter(names: string[], values: string[]) {
  return {
    get: (name: string): string | null => fieldValue(names, values, name),
    getAll: (name: string): string[] => fieldValues(names, values, name),
  };
}

/** The first value of field `name` (any case), or null; `names` lower-cased, `values` in the same order. */
export function fieldValue(names: string[], values: string[], name: string): string | null {
  const n = name.toLowerCase();
  for (let i = 0; i < names.length; i++) if (names[i] === n) return values[i]!;
  return null;
}

/** Every value of field `name` (any case), in order. */
export function fieldValues(names: string[], values: string[], name: string): string[] {
  const n = name.toLowerCase();
  const out: string[] = [];
  for (let i = 0; i < names.length; i++) if (names[i] === n) out.push(values[i]!);
  return out;
}

export interface ParsedFields {
  firstLine: string;
  headers: Array<[string, string]>;
  lower: string[];
  values: string[];
}

/** Header lines (first line, then `Name: value` with obsolete line folding). */
export function parseFields(text: string): ParsedFields {
  const lines = text.split(lineBreakOf(text));
  const headers: Array<[string, string]> = [];
  const lower: string[] = [];
  const values: string[] = [];
  for (let i = 1; i < lines.length; i++) {
    const line = lines[i]!;
    if (line === "") continue;
    const c0 = line.charCodeAt(0);
    if ((c0 === 32 || c0 === 9) && headers.length > 0) {
      const last = headers.length - 1;
      const v = `${values[last]} ${line.trim()}`.trim();
      headers[last] = [headers[last]![0], v];
      values[last] = v;
      continue;
    }
    const colon = line.indexOf(":");
    if (colon <= 0) continue;
    const name = line.slice(0, colon).trim();
    const value = line.slice(colon + 1).trim();
    headers.push([name, value]);
    lower.push(name.toLowerCase());
    values.push(value);
  }
  return { firstLine: lines[0]!.trim(), headers, lower, values };
}

/** Lines end in CRLF when one does (a bare LF is then part of a line), else in LF. */
const lineBreakOf = (text: string): string => (text.includes("\r\n") ? "\r\n" : "\n");

/** The first line as parseFields gives it, without splitting the rest. */
export function firstLineOf(text: string): string {
  const end = text.indexOf(lineBreakOf(text));
  return (end < 0 ? text : text.slice(0, end)).trim();
}

/** Where a header section ends: its text ends at `end`, the blank line after it takes `sep` bytes. */
export interface HeadEnd {
  end: number;
  sep: number;
}

/**
 * findHeadEnd on text (latin1, one char per byte). The same answer: LF LF cannot start one
 * byte before a CRLF CRLF, so "before it" needs no subarray here.
 */
export function findHeadEndText(s: string): HeadEnd | null {
  const i = s.indexOf("\r\n\r\n");
  const j = s.indexOf("\n\n");
  if (j >= 0 && (i < 0 || j < i)) return { end: j, sep: 2 };
  return i >= 0 ? { end: i, sep: 4 } : null;
}

/** End of a header section: CRLF CRLF, or LF LF when that comes first (bare-LF writers). */
export function findHeadEnd(b: Buffer): HeadEnd | null {
  const i = b.indexOf(CRLF2);
  const j = (i >= 0 ? b.subarray(0, i) : b).indexOf(LF2);
  if (j >= 0) return { end: j, sep: 2 };
  return i >= 0 ? { end: i, sep: 4 } : null;
}
