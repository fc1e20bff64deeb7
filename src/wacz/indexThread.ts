/**
 * The index pass (indexPass.ts) in a worker thread: the WARCs are inflated and indexed on a
 * second core while this one copies them into the ZIP, and a `lathe serve` answering a WACZ
 * download keeps its event loop for the proxy. The worker's young generation is small, so the
 * reader's short-lived inflate buffers are freed at once rather than piling up to V8's external
 * memory limit. (Capping its old generation too kept the peak lower but doubled the CPU the
 * pass takes, in garbage collections: not done.)
 *
 * The worker runs the compiled file (dist/wacz/indexWorker.js, found from here in src/ or dist/
 * alike); without a build the pass runs in this thread.
 */
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { Worker } from "node:worker_threads";
import { runIndexPass, type IndexPassRequest, type IndexPassResult, type OnIndexProgress } from "./indexPass.js";
import type { WorkerMessage } from "./indexWorker.js";
import { WaczError } from "./waczError.js";

const WORKER = new URL("../../dist/wacz/indexWorker.js", import.meta.url);
const YOUNG_GENERATION_MB = 4;

/** The pass; `signal` stops the worker (the package is abandoned). */
export function startIndexPass(req: IndexPassRequest, onProgress?: OnIndexProgress, signal?: AbortSignal): Promise<IndexPassResult> {
  if (!existsSync(fileURLToPath(WORKER))) return runIndexPass(req, onProgress);
  return new Promise((resolve, reject) => {
    const w = new Worker(WORKER, { workerData: req, resourceLimits: { maxYoungGenerationSizeMb: YOUNG_GENERATION_MB } });
    let settled = false;
    const settle = (f: () => void) => {
      if (settled) return;
      settled = true;
      signal?.removeEventListener("abort", abort);
      f();
      void w.terminate();
    };
    const abort = () => settle(() => reject(new Error("the index pass was stopped: the package was abandoned")));
    signal?.addEventListener("abort", abort);
    w.on("message", (m: WorkerMessage) => {
      if (m.kind === "progress") onProgress?.(m.done, m.total);
      else if (m.kind === "result") settle(() => resolve(revive(m.result)));
      else settle(() => reject(m.problem ? new WaczError(m.problem, m.message) : new Error(`the index pass failed: ${m.message}`)));
    });
    w.on("error", (e) => settle(() => reject(e)));
    w.on("exit", (code) => settle(() => reject(new Error(`the index pass's worker stopped (exit code ${code})`))));
  });
}

/** A Buffer posted from a worker arrives as a Uint8Array. */
function revive(r: IndexPassResult): IndexPassResult {
  return { ...r, index: { ...r.index, idx: Buffer.from(r.index.idx.buffer, r.index.idx.byteOffset, r.index.idx.byteLength) } };
}
