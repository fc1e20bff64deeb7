/** The file-system calls the WARC writer makes, and the real ones. */
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
  open: (p, flags, mode) => fsp.open(p, flags, mode),
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
