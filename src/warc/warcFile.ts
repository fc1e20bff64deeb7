/**
 * One file of a series, on disk: created exclusively as `NAME.open`, its warcinfo first, groups
 * appended at its end. (Which file is current, and when it closes, is fileSeries.ts.)
 */
import { join } from "node:path";
import { systemCode } from "../core/errors.js";
import type { WarcVersion } from "./date.js";
import { encodeRecord, writevFully, type EncodeOptions } from "./gzipMember.js";
import type { EncodedGroup } from "./groupEncoder.js";
import { warcFileName } from "./naming.js";
import { RECORD_TRAILER, serializeHeader } from "./serialize.js";
import type { RecordDraft, WrittenRecord } from "./types.js";
import type { WriterFailure } from "./writerFailure.js";
import type { WarcFileHandle, WriterFs } from "./writerFs.js";
import type { LandedRecord } from "./writerIndexHook.js";

export interface OpenWarcFile {
  name: string;
  finalPath: string;
  openPath: string;
  fh: WarcFileHandle;
  warcinfoId: string;
  size: number;
  /** Records besides the warcinfo. */
  records: number;
}

export interface NamerOptions {
  template: string;
  prefix: string;
  port?: number;
  hostname: string;
  /** The `{randomtoken}` of this writer. */
  token: string;
  gzip: boolean;
}

/** The names of a series' files, from the template: each name drawn takes the next serial. */
export function fileNamer(o: NamerOptions): (openedMicros: bigint) => string {
  let serial = 0;
  return (openedMicros) => {
    const parts = { prefix: o.prefix, openedMicros, serial: serial++, hostname: o.hostname, pid: process.pid, randomtoken: o.token };
    return warcFileName(o.template, o.port === undefined ? parts : { ...parts, port: o.port }, o.gzip);
  };
}

/** Create `NAME.open` in `dir` under the first name from `nextName` that is free. */
export async function createExclusive(fs: WriterFs, dir: string, nextName: () => string, failure: WriterFailure): Promise<Pick<OpenWarcFile, "name" | "finalPath" | "openPath" | "fh">> {
  let openPath = "";
  try {
    await fs.mkdir(dir);
    for (;;) {
      const name = nextName();
      const finalPath = join(dir, name);
      openPath = finalPath + ".open";
      // Exclusive create, and never a name whose final form exists: no file is overwritten.
      if (await fs.exists(finalPath)) continue;
      try {
        return { name, finalPath, openPath, fh: await fs.open(openPath, "wx", 0o644) };
      } catch (e) {
        if (systemCode(e) !== "EEXIST") throw e;
      }
    }
  } catch (e) {
    throw failure.wrap(e, openPath || dir, "create");
  }
}

/** Write a new file's warcinfo record at its start; its size on disk. */
export async function writeWarcinfo(fh: WarcFileHandle, draft: RecordDraft, version: WarcVersion, enc: EncodeOptions): Promise<number> {
  const rec = await encodeRecord(serializeHeader(draft, { version }), draft.block, enc);
  try {
    await rec.writeTo(fh, 0);
  } finally {
    await rec.dispose();
  }
  return rec.size;
}

/**
 * Write consecutive groups at the end of `f` (several only when all are in memory): where each
 * record landed, and the file's new end. `f` itself is left as it was.
 */
export async function writeGroups(f: OpenWarcFile, groups: EncodedGroup[], gzip: boolean): Promise<{ outs: WrittenRecord[][]; end: number }> {
  let pos = f.size;
  // Groups held in memory go to the file in one pwritev(2); large members stream.
  const whole = inMemoryParts(groups);
  if (whole) await writevFully(f.fh, whole, pos);
  const outs: WrittenRecord[][] = [];
  for (const g of groups) {
    const out: WrittenRecord[] = [];
    for (let i = 0; i < g.records.length; i++) {
      const r = g.records[i]!;
      if (!whole) await r.writeTo(f.fh, pos);
      out.push(writtenRecord(g.drafts[i]!, f.name, pos, gzip ? r.size : r.size - RECORD_TRAILER.byteLength));
      pos += r.size;
    }
    outs.push(out);
  }
  return { outs, end: pos };
}

/** The parts of every member of the groups, in file order, when all are in memory; else null. */
function inMemoryParts(groups: EncodedGroup[]): Uint8Array[] | null {
  const parts: Uint8Array[] = [];
  for (const g of groups) {
    for (const r of g.records) {
      if (r.parts === null) return null;
      for (const p of r.parts) parts.push(p);
    }
  }
  return parts;
}

/** The groups' records as the index hears of them. */
export function landedRecords(groups: EncodedGroup[], outs: WrittenRecord[][]): LandedRecord[] {
  const landed: LandedRecord[] = [];
  for (let k = 0; k < groups.length; k++) {
    const { drafts } = groups[k]!;
    const out = outs[k]!;
    for (let i = 0; i < out.length; i++) landed.push({ draft: drafts[i]!, offset: out[i]!.offset, length: out[i]!.length });
  }
  return landed;
}

function writtenRecord(d: RecordDraft, filename: string, offset: number, length: number): WrittenRecord {
  const w: WrittenRecord = { id: d.id, type: d.type, filename, offset, length };
  const uri = field(d, "WARC-Target-URI", "warc-target-uri");
  const date = field(d, "WARC-Date", "warc-date");
  if (uri !== undefined) w.targetUri = uri;
  if (date !== undefined) w.date = date;
  return w;
}

/**
 * The value of the first field named `name` in any case (`lower`): names as builders spell them
 * match without lower-casing every name of the record.
 */
function field(d: RecordDraft, name: string, lower: string): string | undefined {
  for (const [k, v] of d.fields) {
    if (k === name || (k.length === name.length && k.toLowerCase() === lower)) return v;
  }
  return undefined;
}
