/**
 * Where a capture goes that a closing writer gives up on (issue #26): a WARC file of its own in
 * `lost/` beside the series' files, complete (its warcinfo, then the capture's records with their
 * original WARC-Date and record ids), so a person can move it next to the others once the disk
 * is mended. Written as `NAME.open`, fsynced, then renamed, like every other WARC file.
 */
import { join } from "node:path";
import type { Clock } from "../core/clock.js";
import { ProxyError, errorMessage } from "../core/errors.js";
import { recordId, type IdSource } from "../core/ids.js";
import type { WarcVersion } from "./date.js";
import { timestamp17 } from "./date.js";
import { encodeRecord, type EncodeOptions } from "./gzipMember.js";
import { serializeHeader } from "./serialize.js";
import type { RecordDraft } from "./types.js";
import { writeWarcinfo } from "./warcFile.js";
import type { WriterFs } from "./writerFs.js";

export interface LostFileOptions {
  /** The WARC directory: lost files go to its `lost/` subdirectory. */
  dir: string;
  prefix: string;
  gzip: boolean;
  version: WarcVersion;
  enc: EncodeOptions;
  clock: Clock;
  ids: IdSource;
  fs: WriterFs;
  /** The warcinfo record that opens a lost file. */
  warcinfo: (id: string, openedMicros: bigint, filename: string) => RecordDraft;
}

/** A capture the writer gave up on: where it went (`file`, under `lost/`), or null if even that failed. */
export class LostCapture extends ProxyError {
  readonly file: string | null;
  constructor(file: string | null, why: unknown, lostError?: unknown) {
    const where = file ? `written to ${file} instead` : `and it could not be written to lost/ either (${errorMessage(lostError)})`;
    super("ERR_WARC_WRITE", `the WARC writer closed before it could write this capture (${errorMessage(why)}); ${where}`, why);
    this.file = file;
  }
}

export const LOST_DIR = "lost";

/** Write `group` as a WARC file of its own in `<dir>/lost/`; its path. */
export async function writeLostFile(o: LostFileOptions, group: RecordDraft[]): Promise<string> {
  const micros = o.clock.nowMicros();
  const uuid = /urn:uuid:([^>]+)/.exec(group[0]?.id ?? "")?.[1] ?? o.ids.uuid();
  const name = `${o.prefix}-${timestamp17(micros)}-lost-${uuid}.warc${o.gzip ? ".gz" : ""}`;
  const dir = join(o.dir, LOST_DIR);
  const finalPath = join(dir, name);
  const openPath = `${finalPath}.open`;
  await o.fs.mkdir(dir);
  const fh = await o.fs.open(openPath, "wx", 0o644);
  try {
    const warcinfoId = recordId(o.ids.uuid());
    let pos = await writeWarcinfo(fh, o.warcinfo(warcinfoId, micros, name), o.version, o.enc);
    for (const d of group) {
      const rec = await encodeRecord(serializeHeader(d, { version: o.version, warcinfoId }), d.block, o.enc);
      try {
        await rec.writeTo(fh, pos);
      } finally {
        await rec.dispose();
      }
      pos += rec.size;
    }
    await fh.sync();
    await fh.close();
  } catch (e) {
    await fh.close().catch(() => {});
    await o.fs.unlink(openPath).catch(() => {});
    throw e;
  }
  await o.fs.rename(openPath, finalPath);
  await o.fs.syncDir(dir).catch(() => {});
  return finalPath;
}
