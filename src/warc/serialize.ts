/**
 * The WARC header block of a record (warc-records.md §1): version line, the draft's fields with
 * WARC-Warcinfo-ID inserted at its spec position, Content-Length last, CRLF line ends, a blank
 * line. Pure: the block itself and the record's CRLF CRLF trailer are appended by the caller.
 */
import { ProxyError } from "../core/errors.js";
import type { WarcVersion } from "./date.js";
import type { BlockPart, RecordDraft } from "./types.js";

export const CRLF = "\r\n";
/** Ends every record; not counted in Content-Length. */
export const RECORD_TRAILER: Uint8Array = Buffer.from("\r\n\r\n", "latin1");

/** Fields that precede WARC-Warcinfo-ID in the spec order (warc-records.md §1). */
const BEFORE_WARCINFO_ID = new Set(["warc-type", "warc-record-id", "warc-date", "warc-filename", "warc-target-uri"]);
/** Fields the serializer owns; a draft carrying them is a builder bug. */
const OWNED = new Set(["warc-warcinfo-id", "content-length"]);
const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

export interface SerializeOptions {
  version: WarcVersion;
  /** WARC-Record-ID of the file's warcinfo; ignored for warcinfo records, which get none. */
  warcinfoId?: string;
}

export function partSize(p: BlockPart): number {
  return p instanceof Uint8Array ? p.byteLength : p.size;
}

export function blockSize(block: BlockPart[]): number {
  let n = 0;
  for (const p of block) n += partSize(p);
  return n;
}

/** The fields in file order, WARC-Warcinfo-ID inserted, Content-Length appended. */
export function headerFields(draft: RecordDraft, opts: SerializeOptions): Array<[string, string]> {
  const fields: Array<[string, string]> = [];
  for (const [name, value] of draft.fields) {
    if (!TOKEN.test(name)) throw invalid(draft, `field name ${JSON.stringify(name)} is not a token`);
    // A CR or LF in a value would end the field early and let content forge headers.
    if (/[\r\n]/.test(value)) throw invalid(draft, `field ${name} has a CR or LF in its value`);
    if (OWNED.has(name.toLowerCase())) throw invalid(draft, `field ${name} is added by the writer`);
    fields.push([name, value]);
  }
  // Builders normally list WARC-Type and WARC-Record-ID; supply them when they do not, and
  // refuse a draft whose fields contradict its own type or id.
  ensure(fields, draft, "WARC-Type", draft.type, 0);
  ensure(fields, draft, "WARC-Record-ID", draft.id, 1);
  if (draft.type !== "warcinfo") {
    if (!opts.warcinfoId) throw invalid(draft, "no WARC-Warcinfo-ID for a non-warcinfo record");
    let at = 0;
    fields.forEach(([n], i) => {
      if (BEFORE_WARCINFO_ID.has(n.toLowerCase())) at = i + 1;
    });
    fields.splice(at, 0, ["WARC-Warcinfo-ID", opts.warcinfoId]);
  }
  fields.push(["Content-Length", String(blockSize(draft.block))]);
  return fields;
}

/** `WARC/1.x` CRLF, `Name: value` CRLF per field, CRLF. */
export function serializeHeader(draft: RecordDraft, opts: SerializeOptions): Buffer {
  let s = `WARC/${opts.version}${CRLF}`;
  for (const [n, v] of headerFields(draft, opts)) s += `${n}: ${v}${CRLF}`;
  return Buffer.from(s + CRLF, "utf8");
}

function ensure(fields: Array<[string, string]>, draft: RecordDraft, name: string, value: string, pos: number): void {
  const found = fields.find(([n]) => n.toLowerCase() === name.toLowerCase());
  if (!found) fields.splice(Math.min(pos, fields.length), 0, [name, value]);
  else if (found[1] !== value) throw invalid(draft, `${name} ${found[1]} contradicts the draft's ${value}`);
}

function invalid(draft: RecordDraft, why: string): ProxyError {
  return new ProxyError("ERR_INTERNAL", `invalid WARC record draft ${draft.id} (${draft.type}): ${why}`);
}
