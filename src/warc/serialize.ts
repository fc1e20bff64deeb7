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
const CR_OR_LF = /[\r\n]/;

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
  // Each name lower-cased once: where the type and id are, and where WARC-Warcinfo-ID goes.
  let typeAt = -1;
  let idAt = -1;
  let infoAt = 0;
  for (const [name, value] of draft.fields) {
    if (!TOKEN.test(name)) throw invalid(draft, `field name ${JSON.stringify(name)} is not a token`);
    // A CR or LF in a value would end the field early and let content forge headers.
    if (CR_OR_LF.test(value)) throw invalid(draft, `field ${name} has a CR or LF in its value`);
    const lower = name.toLowerCase();
    if (OWNED.has(lower)) throw invalid(draft, `field ${name} is added by the writer`);
    if (lower === "warc-type" && typeAt < 0) typeAt = fields.length;
    if (lower === "warc-record-id" && idAt < 0) idAt = fields.length;
    fields.push([name, value]);
    if (BEFORE_WARCINFO_ID.has(lower)) infoAt = fields.length;
  }
  // Builders normally list WARC-Type and WARC-Record-ID; supply them when they do not, and
  // refuse a draft whose fields contradict its own type or id.
  if (ensure(fields, draft, "WARC-Type", draft.type, typeAt, 0)) {
    infoAt++;
    if (idAt >= 0) idAt++;
  }
  if (ensure(fields, draft, "WARC-Record-ID", draft.id, idAt, 1)) infoAt++;
  if (draft.type !== "warcinfo") {
    if (!opts.warcinfoId) throw invalid(draft, "no WARC-Warcinfo-ID for a non-warcinfo record");
    fields.splice(infoAt, 0, ["WARC-Warcinfo-ID", opts.warcinfoId]);
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

/** The field `name` (found at `at`, or -1) holds `value`, else it is inserted at `pos`: true if inserted. */
function ensure(fields: Array<[string, string]>, draft: RecordDraft, name: string, value: string, at: number, pos: number): boolean {
  if (at < 0) {
    fields.splice(Math.min(pos, fields.length), 0, [name, value]);
    return true;
  }
  const found = fields[at]![1];
  if (found !== value) throw invalid(draft, `${name} ${found} contradicts the draft's ${value}`);
  return false;
}

function invalid(draft: RecordDraft, why: string): ProxyError {
  return new ProxyError("ERR_INTERNAL", `invalid WARC record draft ${draft.id} (${draft.type}): ${why}`);
}
