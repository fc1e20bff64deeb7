/**
 * The WARC writer's failure state (warc-files.md §6): set by a write, create, fsync, close or
 * rename that failed, shown in state().failed (the proxy answers 503 meanwhile), cleared by the
 * next write that lands or by a recovery probe that can write and fsync in the directory again.
 */
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import { ProxyError, errorMessage, isProxyError, systemCode } from "../core/errors.js";
import type { Logger } from "../core/log.js";
import { writeFully } from "./gzipMember.js";
import { randomToken } from "./naming.js";
import type { WriterFs } from "./writerFs.js";

/** Bytes a recovery probe must be able to write and fsync before captures are accepted again. */
const PROBE_BYTES = 256 * 1024;

const HINTS: Record<string, string> = {
  ENOSPC: "disk full",
  EDQUOT: "disk quota exceeded",
  EROFS: "read-only file system",
  EACCES: "permission denied",
  EPERM: "operation not permitted",
  EIO: "I/O error",
  ENOTDIR: "a path component is not a directory",
  ENOENT: "no such file or directory",
};

export class WriterFailure {
  readonly #fs: WriterFs;
  readonly #dir: string;
  readonly #log: Logger;
  #failed: ProxyError | null = null;

  constructor(fs: WriterFs, dir: string, log: Logger) {
    this.#fs = fs;
    this.#dir = dir;
    this.#log = log;
  }

  /** The last failure, until a write lands or a probe succeeds. */
  get current(): ProxyError | null {
    return this.#failed;
  }

  /** A system error on `file` becomes the writer's failure: ERR_WARC_WRITE, logged, with a hint. */
  fail(file: string, e: unknown, op = "write"): ProxyError {
    const code = systemCode(e);
    const hint = code && HINTS[code] ? `${HINTS[code]} (${errorMessage(e)})` : errorMessage(e);
    this.#failed = new ProxyError("ERR_WARC_WRITE", `cannot ${op} WARC file ${file}: ${hint}`, e);
    this.#log.error("warc-write-failed", { file, op, code, error: this.#failed.message });
    return this.#failed;
  }

  /** A ProxyError as it is (it already says what failed); anything else becomes the failure. */
  wrap(e: unknown, file: string, op = "write"): ProxyError {
    return isProxyError(e) ? e : this.fail(file, e, op);
  }

  /** A write landed: the writer is healthy again. */
  clear(): void {
    this.#failed = null;
  }

  /**
   * While failed: write and fsync a probe file in the directory. Success clears the failure: the
   * next capture is written again (disk space came back, the directory is writable again).
   */
  async probe(): Promise<boolean> {
    if (!this.#failed) return true;
    const fs = this.#fs;
    const path = join(this.#dir, `.lathe-probe-${process.pid}-${randomToken(randomBytes(8))}`);
    try {
      await fs.mkdir(this.#dir);
      const fh = await fs.open(path, "wx", 0o600);
      try {
        await writeFully(fh, Buffer.alloc(PROBE_BYTES), 0);
        await fh.sync();
      } finally {
        await fh.close().catch(() => {});
        await fs.unlink(path).catch(() => {});
      }
    } catch {
      await fs.unlink(path).catch(() => {});
      return false;
    }
    this.#log.info("warc-writer-recovered", { dir: this.#dir, after: this.#failed.message });
    this.#failed = null;
    return true;
  }
}
