/** The file-system calls the WARC writer makes, and the real ones. */
import * as fs from "node:fs";
import * as fsp from "node:fs/promises";
import { systemCode } from "../core/errors.js";
import type { PositionalWriter } from "./gzipMember.js";
import { syncDir } from "./syncDir.js";

export interface WarcFileHandle extends PositionalWriter {
  sync(): Promise<void>;
  truncate(len?: number): Promise<void>;
  close(): Promise<void>;
}

/** The file-system calls the writer makes: a seam so tests can inject ENOSPC and friends. */
export interface WriterFs {
  open(path: string, flags: string, mode: number): Promise<WarcFileHandle>;
  rename(from: string, to: string): Promise<void>;
  unlink(path: string): Promise<void>;
  exists(path: string): Promise<boolean>;
  mkdir(dir: string): Promise<void>;
  syncDir(dir: string): Promise<void>;
}

export const nodeWriterFs: WriterFs = {
  open: async (p, flags, mode) => callbackWrites(await fsp.open(p, flags, mode)),
  rename: (a, b) => fsp.rename(a, b),
  unlink: (p) => fsp.unlink(p),
  exists: (p) =>
    fsp.lstat(p).then(
      () => true,
      (e) => (systemCode(e) === "ENOENT" ? false : Promise.reject(e)),
    ),
  mkdir: async (d) => {
    await fsp.mkdir(d, { recursive: true });
  },
  syncDir,
};

/**
 * A FileHandle whose writes go through the callback API: the promise API's layers cost several
 * µs of main-thread CPU a call, and every append of a capture is one. A closed handle's writes
 * go to the handle itself, which refuses them as it always did.
 */
function callbackWrites(fh: fsp.FileHandle): WarcFileHandle {
  const done = (resolve: (r: { bytesWritten: number }) => void, reject: (e: unknown) => void) => (err: Error | null, bytesWritten: number) =>
    err ? reject(err) : resolve({ bytesWritten });
  return {
    write: (buffer, offset, length, position) =>
      fh.fd < 0 ? fh.write(buffer, offset, length, position) : new Promise((resolve, reject) => fs.write(fh.fd, buffer, offset, length, position, done(resolve, reject))),
    writev: (buffers, position) =>
      fh.fd < 0 ? fh.writev(buffers, position) : new Promise((resolve, reject) => fs.writev(fh.fd, buffers, position, done(resolve, reject))),
    sync: () => fh.sync(),
    truncate: (len) => fh.truncate(len),
    close: () => fh.close(),
  };
}
