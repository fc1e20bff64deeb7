/**
 * The worker thread of a WACZ's index pass (indexThread.ts starts it): one request in, progress
 * and then the result (or the failure) out.
 */
import { parentPort, workerData } from "node:worker_threads";
import { errorMessage } from "../core/errors.js";
import { runIndexPass, type IndexPassRequest } from "./indexPass.js";
import { WaczError } from "./waczError.js";

export type WorkerMessage =
  | { kind: "progress"; done: number; total: number }
  | { kind: "result"; result: Awaited<ReturnType<typeof runIndexPass>> }
  | { kind: "failure"; problem: WaczError["problem"] | null; message: string };

const port = parentPort!;
let last = 0;
runIndexPass(workerData as IndexPassRequest, (done, total) => {
  // Progress at most every 100 ms: a message per record would cost more than the record.
  const now = Date.now();
  if (now - last < 100 && done < total) return;
  last = now;
  port.postMessage({ kind: "progress", done, total } satisfies WorkerMessage);
}).then(
  (result) => port.postMessage({ kind: "result", result } satisfies WorkerMessage),
  (e: unknown) => port.postMessage({ kind: "failure", problem: e instanceof WaczError ? e.problem : null, message: e instanceof WaczError ? e.message : (e as Error)?.stack ?? errorMessage(e) } satisfies WorkerMessage),
);
