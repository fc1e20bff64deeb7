/**
 * A WACZ written to a file (`lathe wacz`, `lathe record --wacz`): under a temporary name beside
 * the target, renamed over it only when complete, so a failure at any point leaves nothing
 * half-written (and an existing file of that name untouched).
 */
import { stat } from "node:fs/promises";
import { basename, dirname, resolve, sep } from "node:path";
import { errorMessage, systemCode } from "../core/errors.js";
import { writeFileAtomically } from "../index/build.js";
import { writeWacz, type OnWaczProgress, type WaczFacts, type WaczSpec } from "./packager.js";
import { WaczError } from "./waczError.js";
import type { ByteSink } from "./zipWriter.js";

export type WaczSummary = WaczFacts & { path: string };

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
      // Positional writes: chunks may be in flight together (entryCopy's ring), each lands at its place.
      const sink: ByteSink = async (chunk) => {
        let at = pos;
        pos += chunk.length;
        for (let off = 0; off < chunk.length; ) {
          const { bytesWritten } = await fh.write(chunk, off, chunk.length - off, at);
          off += bytesWritten;
          at += bytesWritten;
        }
      };
      const f = await writeWacz({ ...spec, tmpDir: spec.tmpDir ?? dirname(target) }, sink, onProgress);
      await fh.sync();
      return f;
    });
    return { ...facts, path: target };
  } catch (e) {
    throw asWaczError(e, output, target);
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
