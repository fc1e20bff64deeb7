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
 *
 * The callback writes name the fd, which FileHandle does not see: its close() would not wait
 * for them, and a number closed under a write in flight may already name another file when the
 * write runs. So close, truncate and sync wait here until no write is in flight.
 */
function callbackWrites(fh: fsp.FileHandle): WarcFileHandle {
  let inFlight = 0;
  let whenIdle: Array<() => void> = [];
  const settled = () => {
    if (--inFlight > 0) return;
    const waiting = whenIdle;
    whenIdle = [];
    for (const w of waiting) w();
  };
  const idle = (): Promise<void> => (inFlight === 0 ? Promise.resolve() : new Promise((r) => whenIdle.push(r)));
  const done = (resolve: (r: { bytesWritten: number }) => void, reject: (e: unknown) => void) => (err: Error | null, bytesWritten: number) => {
    settled();
    if (err) reject(err);
    else resolve({ bytesWritten });
  };
  // `call` hands its callback to fs; if it throws instead (bad arguments), nothing is in flight.
  const started = (call: (fd: number, cb: (err: Error | null, n: number) => void) => void): Promise<{ bytesWritten: number }> =>
    new Promise((resolve, reject) => {
      inFlight++;
      try {
        call(fh.fd, done(resolve, reject));
      } catch (e) {
        settled();
        reject(e);
      }
    });
  return {
    write: (buffer, offset, length, position) =>
      fh.fd < 0 ? fh.write(buffer, offset, length, position) : started((fd, cb) => fs.write(fd, buffer, offset, length, position, cb)),
    writev: (buffers, position) => (fh.fd < 0 ? fh.writev(buffers, position) : started((fd, cb) => fs.writev(fd, buffers, position, cb))),
    sync: () => idle().then(() => fh.sync()),
    truncate: (len) => idle().then(() => fh.truncate(len)),
    close: () => idle().then(() => fh.close()),
  };
}
