/**
 * A WACZ written to a file (`lathe wacz`, `lathe record --wacz`): under a temporary name beside
 * the target, renamed over it only when complete, so a failure at any point leaves nothing
 * half-written (and an existing file of that name untouched).
 */
import { stat, type FileHandle } from "node:fs/promises";
import { basename, dirname, resolve, sep } from "node:path";
import { errorMessage, systemCode } from "../core/errors.js";
import { writeFileAtomically } from "../index/build.js";
import { writeWacz, type OnWaczProgress, type WaczFacts, type WaczSpec } from "./packager.js";
import { WaczError } from "./waczError.js";
import type { ByteSink } from "./zipWriter.js";

export type WaczSummary = WaczFacts & { path: string };

const FLUSH_BYTES = 64 * 1024 * 1024;

/** Fails before any work when `output` cannot be written: a missing directory, a directory in its place. */
export async function checkWaczOutput(output: string): Promise<string> {
  const target = resolve(output);
  const dir = dirname(target);
  const d = await stat(dir).catch(() => null);
  if (!d || !d.isDirectory()) throw new WaczError("output", `cannot write ${output}: the directory ${dir} does not exist`);
  const t = await stat(target).catch(() => null);
  if (t && !t.isFile()) throw new WaczError("output", `cannot write ${output}: it is not a file`);
  return target;
}

export async function writeWaczFile(spec: WaczSpec, output: string, onProgress?: OnWaczProgress): Promise<WaczSummary> {
  const target = await checkWaczOutput(output);
  try {
    // The index pass's temporary files go beside the target too: the same disk, not a small /tmp.
    const facts = await writeFileAtomically(target, async (fh) => {
      let pos = 0;
      const flush = new EarlyFlush(fh);
      // Positional writes: chunks may be in flight together (entryCopy's ring), each lands at its place.
      const sink: ByteSink = async (chunk) => {
        let at = pos;
        pos += chunk.length;
        for (let off = 0; off < chunk.length; ) {
          const { bytesWritten } = await fh.write(chunk, off, chunk.length - off, at);
          off += bytesWritten;
          at += bytesWritten;
        }
        flush.wrote(chunk.length);
      };
      const f = await writeWacz({ ...spec, tmpDir: spec.tmpDir ?? dirname(target) }, sink, onProgress);
      await flush.settled();
      await fh.sync();
      return f;
    });
    return { ...facts, path: target };
  } catch (e) {
    throw asWaczError(e, output, target);
  }
}

/**
 * The package goes to disk while it is written, not all at the end: a `datasync` in the background
 * after every FLUSH_BYTES (one at a time), so the final fsync waits for the last stretch only and
 * the disk works while the WARCs are still being read (a 600 MB package: the final fsync alone
 * took ~2 s here). The data written is the same; only when it reaches the disk changes.
 */
class EarlyFlush {
  #since = 0;
  #running: Promise<void> | null = null;
  /** Kept and thrown at the end: Linux reports a failed writeback to one fsync only, not to the next. */
  #failure: unknown = null;
  constructor(readonly fh: FileHandle) {}
  wrote(n: number): void {
    this.#since += n;
    if (this.#since < FLUSH_BYTES || this.#running) return;
    this.#since = 0;
    this.#running = this.fh.datasync().then(
      () => {
        this.#running = null;
      },
      (e: unknown) => {
        this.#failure ??= e;
        this.#running = null;
      },
    );
  }
  async settled(): Promise<void> {
    await this.#running;
    if (this.#failure) throw this.#failure;
  }
}

/** A system error (ENOSPC, EACCES, ENOENT…) said as a problem of the output or of an input, by the path it names. */
function asWaczError(e: unknown, output: string, target: string): unknown {
  if (e instanceof WaczError || systemCode(e) === undefined) return e;
  const path = (e as { path?: unknown }).path;
  // Ours: writeFileAtomically's `.<name>.tmp-…` and the index pass's `.lathe-wacz-…/`, beside the target.
  const ours = typeof path !== "string" || resolve(path) === target || basename(path).startsWith(`.${basename(target)}.tmp-`) || path.includes(`${sep}.lathe-wacz-`);
  if (!ours) return new WaczError("not-found", `cannot read ${path}: ${errorMessage(e)}`);
  return new WaczError("output", `cannot write ${output}: ${errorMessage(e)}`);
}
