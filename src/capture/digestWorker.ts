/**
 * The worker half of digestThread.ts: hashes spooled bodies from their temp files, so the proxy's
 * thread does not run SHA over large bodies (issue #25: two digests cost ~1.4 ms per MB here,
 * about a third of what lathe's thread spends per MB of a large body). Each job reads its file
 * as the spool writes it, up to where the main thread says the file is written, in one reused
 * buffer; no body byte crosses between the threads.
 */
import { closeSync, openSync, readSync } from "node:fs";
import { parentPort } from "node:worker_threads";
import { newHash, type DigestAlgorithm } from "../warc/digest.js";
import type { Hash } from "node:crypto";

export type DigestJobMessage =
  | { kind: "start"; id: number; path: string; alg: DigestAlgorithm; head: Uint8Array }
  | { kind: "upTo"; id: number; bytes: number }
  | { kind: "end"; id: number; bytes: number }
  | { kind: "cancel"; id: number };

export type DigestJobAnswer = { id: number; block: Uint8Array; payload: Uint8Array } | { id: number; error: string };

interface Job {
  path: string;
  fd: number | null;
  done: number;
  block: Hash;
  payload: Hash;
}

const READ_BYTES = 1024 * 1024;
const buffer = Buffer.allocUnsafe(READ_BYTES);
const jobs = new Map<number, Job>();

/** Hash the file's bytes from where the job is up to `bytes`; false when the file holds fewer. */
function readTo(job: Job, bytes: number): boolean {
  if (job.done >= bytes) return true;
  job.fd ??= openSync(job.path, "r"); // opened late: the spool creates its file asynchronously
  while (job.done < bytes) {
    const n = readSync(job.fd, buffer, 0, Math.min(READ_BYTES, bytes - job.done), job.done);
    if (n === 0) return false;
    const view = buffer.subarray(0, n);
    job.block.update(view);
    job.payload.update(view);
    job.done += n;
  }
  return true;
}

function close(id: number): void {
  const job = jobs.get(id);
  jobs.delete(id);
  if (job?.fd != null) closeSync(job.fd);
}

function handle(m: DigestJobMessage): DigestJobAnswer | null {
  if (m.kind === "start") {
    jobs.set(m.id, { path: m.path, fd: null, done: 0, block: newHash(m.alg).update(m.head), payload: newHash(m.alg) });
    return null;
  }
  if (m.kind === "cancel") {
    close(m.id);
    return null;
  }
  const job = jobs.get(m.id);
  if (!job) return m.kind === "end" ? { id: m.id, error: "unknown digest job" } : null;
  try {
    if (m.kind === "upTo") {
      readTo(job, m.bytes);
      return null;
    }
    if (!readTo(job, m.bytes)) return { id: m.id, error: `${job.path} holds ${job.done} of ${m.bytes} bytes` };
    return { id: m.id, block: job.block.digest(), payload: job.payload.digest() };
  } catch (e) {
    return { id: m.id, error: (e as Error).message };
  } finally {
    if (m.kind === "end") close(m.id);
  }
}

parentPort!.on("message", (m: DigestJobMessage) => {
  const answer = handle(m);
  if (answer) parentPort!.postMessage(answer);
});
