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
    get(name: string): string | null {
      const n = name.toLowerCase();
      for (let i = 0; i < names.length; i++) if (names[i] === n) return values[i]!;
      return null;
    },
    getAll(name: string): string[] {
      const n = name.toLowerCase();
      const out: string[] = [];
      for (let i = 0; i < names.length; i++) if (names[i] === n) out.push(values[i]!);
      return out;
    },
  };
}

export interface ParsedFields {
  firstLine: string;
  headers: Array<[string, string]>;
  lower: string[];
  values: string[];
}

/** Header lines (first line, then `Name: value` with obsolete line folding). */
export function parseFields(text: string): ParsedFields {
  const lines = text.includes("\r\n") ? text.split("\r\n") : text.split("\n");
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

/** Where a header section ends: its text ends at `end`, the blank line after it takes `sep` bytes. */
export interface HeadEnd {
  end: number;
  sep: number;
}

/** End of a header section: CRLF CRLF, or LF LF when that comes first (bare-LF writers). */
export function findHeadEnd(b: Buffer): HeadEnd | null {
  const i = b.indexOf(CRLF2);
  const j = (i >= 0 ? b.subarray(0, i) : b).indexOf(LF2);
  if (j >= 0) return { end: j, sep: 2 };
  return i >= 0 ? { end: i, sep: 4 } : null;
}
