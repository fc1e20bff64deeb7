/**
 * The WACZ's index in its compressed form (WACZ 1.1.1 "indexes"; pywb's ZipNum as py-wacz and
 * wabac.js use it): the sorted CDXJ lines in gzip members of BLOCK_LINES lines each
 * (`indexes/index.cdx.gz`, stored), and `indexes/index.idx`: a `!meta` line, then one line per
 * member — the first line's key and timestamp, the member's offset and length.
 *
 * Why this form and not a plain `index.cdxj`: ReplayWeb.page reads a plain index whole into the
 * browser's database before it shows anything; with the .idx it reads one line per block and
 * fetches only the blocks a lookup needs, so a 10 GB collection opens as fast as a small one.
 */
import { open } from "node:fs/promises";
import { gzipSync } from "node:zlib";

/** py-wacz's and ArchiveWeb.page's block size. */
export const BLOCK_LINES = 1024;
export const CDX_GZ_NAME = "index.cdx.gz";

export interface CompressedIndex {
  /** CDXJ lines written. */
  lines: number;
  /** Bytes of index.cdx.gz (on disk at the path given). */
  cdxBytes: number;
  /** The whole index.idx (one short line per block: small). */
  idx: Buffer;
}

/** Write sorted CDXJ `lines` (each with its LF) to `cdxPath` as gzip blocks; returns the .idx. */
export async function writeCompressedIndex(lines: AsyncIterable<string>, cdxPath: string): Promise<CompressedIndex> {
  const fh = await open(cdxPath, "w");
  const idx: string[] = [`!meta 0 {"format": "cdxj-gzip-1.0", "filename": "${CDX_GZ_NAME}"}\n`];
  let block: string[] = [];
  let offset = 0;
  let count = 0;
  const flush = async () => {
    if (block.length === 0) return;
    const first = block[0]!;
    const prefix = first.slice(0, indexOfSecondSpace(first));
    const member = gzipSync(block.join(""), { level: 6 });
    await fh.write(member, 0, member.length, offset);
    idx.push(`${prefix} {"offset": ${offset}, "length": ${member.length}}\n`);
    offset += member.length;
    block = [];
  };
  try {
    for await (const line of lines) {
      block.push(line);
      count++;
      if (block.length === BLOCK_LINES) await flush();
    }
    await flush();
  } finally {
    await fh.close();
  }
  return { lines: count, cdxBytes: offset, idx: Buffer.from(idx.join(""), "utf8") };
}

/** `KEY TIMESTAMP {…}`: where the JSON starts (the key and timestamp hold no spaces). */
function indexOfSecondSpace(line: string): number {
  const a = line.indexOf(" ");
  const b = a < 0 ? -1 : line.indexOf(" ", a + 1);
  return b < 0 ? line.length - 1 : b;
}
