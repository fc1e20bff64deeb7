/**
 * Append a whole buffer at a file handle's position, resumed after a short write, through fs's
 * callback API on the handle's fd: ~5 µs less CPU a write than FileHandle's promise path, which
 * the crawl log and the live index's journal pay on every batch (#25). The callers chain their
 * writes and wait for the last one before closing the handle: FileHandle does not see these.
 */
import { write as writeFd } from "node:fs";
import type { FileHandle } from "node:fs/promises";

export function appendWhole(fh: FileHandle, buf: Buffer): Promise<void> {
  return new Promise((resolve, reject) => {
    const from = (offset: number) => {
      try {
        writeFd(fh.fd, buf, offset, buf.length - offset, null, (err, written) => {
          if (err) reject(err);
          else if (offset + written < buf.length) from(offset + written);
          else resolve();
        });
      } catch (e) {
        reject(e); // a closed handle's fd (-1) is refused at once
      }
    };
    from(0);
  });
}
