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
  return fieldsInOrder(draft, opts, placesOf(draft));
}

/** Where WARC-Type and WARC-Record-ID are in a draft's fields (-1: absent), and where WARC-Warcinfo-ID goes. */
interface FieldPlaces {
  typeAt: number;
  idAt: number;
  infoAt: number;
}

/** Every field of the draft checked (checkedField), and the places found on the way. */
function placesOf(draft: RecordDraft): FieldPlaces {
  const fields = draft.fields;
  let typeAt = -1;
  let idAt = -1;
  let infoAt = 0;
  for (let i = 0; i < fields.length; i++) {
    const f = fields[i]!;
    const kind = checkedField(draft, f[0], f[1]);
    if (kind === KIND_TYPE && typeAt < 0) typeAt = i;
    if (kind === KIND_ID && idAt < 0) idAt = i;
    if (kind !== KIND_OTHER) infoAt = i + 1;
  }
  return { typeAt, idAt, infoAt };
}

/** headerFields, given the draft's places (its fields already checked). */
function fieldsInOrder(draft: RecordDraft, opts: SerializeOptions, places: FieldPlaces): Array<[string, string]> {
  const fields = draft.fields.map(([name, value]): [string, string] => [name, value]);
  let { idAt, infoAt } = places;
  // Builders normally list WARC-Type and WARC-Record-ID; supply them when they do not, and
  // refuse a draft whose fields contradict its own type or id.
  if (ensure(fields, draft, "WARC-Type", draft.type, places.typeAt, 0)) {
    infoAt++;
    if (idAt >= 0) idAt++;
  }
  if (ensure(fields, draft, "WARC-Record-ID", draft.id, idAt, 1)) infoAt++;
  if (draft.type !== "warcinfo") fields.splice(infoAt, 0, ["WARC-Warcinfo-ID", warcinfoIdOf(draft, opts)]);
  fields.push(["Content-Length", String(blockSize(draft.block))]);
  return fields;
}

/** `WARC/1.x` CRLF, `Name: value` CRLF per field, CRLF. */
export function serializeHeader(draft: RecordDraft, opts: SerializeOptions): Buffer {
  return Buffer.from(headerText(draft, opts), "utf8");
}

/**
 * The header as text, the fields written straight from the draft (no array of the fields in
 * file order) when it lists its WARC-Type and WARC-Record-ID, as every builder does; else as
 * headerFields orders them. Same text either way.
 */
function headerText(draft: RecordDraft, opts: SerializeOptions): string {
  const places = placesOf(draft);
  let s = `WARC/${opts.version}${CRLF}`;
  if (places.typeAt < 0 || places.idAt < 0) {
    for (const [n, v] of fieldsInOrder(draft, opts, places)) s += `${n}: ${v}${CRLF}`;
    return s + CRLF;
  }
  const fields = draft.fields;
  // Both present: ensure only checks them against the draft's type and id (nothing is inserted).
  ensure(fields, draft, "WARC-Type", draft.type, places.typeAt, 0);
  ensure(fields, draft, "WARC-Record-ID", draft.id, places.idAt, 1);
  const warcinfoId = draft.type === "warcinfo" ? null : warcinfoIdOf(draft, opts);
  for (let i = 0; i < fields.length; i++) {
    if (i === places.infoAt && warcinfoId !== null) s += `WARC-Warcinfo-ID: ${warcinfoId}${CRLF}`;
    s += `${fields[i]![0]}: ${fields[i]![1]}${CRLF}`;
  }
  if (places.infoAt === fields.length && warcinfoId !== null) s += `WARC-Warcinfo-ID: ${warcinfoId}${CRLF}`;
  return `${s}Content-Length: ${blockSize(draft.block)}${CRLF}${CRLF}`;
}

/** What a field name means to the serializer. */
const KIND_OTHER = 0;
/** Precedes WARC-Warcinfo-ID (warc-records.md §1). */
const KIND_BEFORE_INFO = 1;
const KIND_TYPE = 2;
const KIND_ID = 3;

/**
 * The kinds of the names seen, valid ones only: the few names builders use are checked (token,
 * lower-cased, looked up) once, not on every record. Bounded, should drafts bring many names.
 */
const knownNames = new Map<string, number>();
const MAX_KNOWN_NAMES = 256;

/** The field's kind, once its name and value are checked: a draft that fails is a builder bug. */
function checkedField(draft: RecordDraft, name: string, value: string): number {
  // A CR or LF in a value would end the field early and let content forge headers.
  const known = knownNames.get(name);
  if (known !== undefined) {
    if (value.indexOf("\r") >= 0 || value.indexOf("\n") >= 0) throw invalid(draft, `field ${name} has a CR or LF in its value`);
    return known;
  }
  if (!TOKEN.test(name)) throw invalid(draft, `field name ${JSON.stringify(name)} is not a token`);
  if (CR_OR_LF.test(value)) throw invalid(draft, `field ${name} has a CR or LF in its value`);
  const lower = name.toLowerCase();
  if (OWNED.has(lower)) throw invalid(draft, `field ${name} is added by the writer`);
  const kind = lower === "warc-type" ? KIND_TYPE : lower === "warc-record-id" ? KIND_ID : BEFORE_WARCINFO_ID.has(lower) ? KIND_BEFORE_INFO : KIND_OTHER;
  if (knownNames.size < MAX_KNOWN_NAMES) knownNames.set(name, kind);
  return kind;
}

function warcinfoIdOf(draft: RecordDraft, opts: SerializeOptions): string {
  if (!opts.warcinfoId) throw invalid(draft, "no WARC-Warcinfo-ID for a non-warcinfo record");
  return opts.warcinfoId;
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
