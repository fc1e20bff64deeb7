/**
 * The worker half of digestThread.ts: hashes spooled bodies from their temp files, so the proxy's
 * thread does not run SHA over large bodies (issue #25: two digests cost ~1.4 ms per MB here,
 * about a third of what lathe's thread spends per MB of a large body). Each job reads its file
 * as the spool writes it, up to where the main thread says the file is written, in one reused
 * buffer; no body byte crosses between the threads.
 *
 * Two kinds of work: a running job ("start", "upTo", "end") hashes a body as it arrives, its
 * payload digest and, when given the head, its block digest too; a one-shot "block" job hashes a
 * head and a finished file, for a response whose block digest was left until a record needs it
 * (a revisit never does: its block is the head alone).
 */
import { closeSync, openSync, readSync } from "node:fs";
import { parentPort } from "node:worker_threads";
import { newHash, type DigestAlgorithm } from "../warc/digest.js";
import type { Hash } from "node:crypto";

export type DigestJobMessage =
  /** `head` null: the payload digest only. */
  | { kind: "start"; id: number; path: string; alg: DigestAlgorithm; head: Uint8Array | null }
  | { kind: "upTo"; id: number; bytes: number }
  | { kind: "end"; id: number; bytes: number }
  | { kind: "cancel"; id: number }
  | { kind: "block"; id: number; path: string; alg: DigestAlgorithm; head: Uint8Array; bytes: number };

/** `hashed`: the bytes the job ran through its hashes, each hash counted (diagnostics). */
export type DigestJobAnswer = { id: number; block: Uint8Array | null; payload: Uint8Array | null; hashed: number } | { id: number; error: string };

interface Job {
  path: string;
  fd: number | null;
  done: number;
  block: Hash | null;
  payload: Hash | null;
  hashed: number;
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
    job.block?.update(view);
    job.payload?.update(view);
    job.hashed += job.block && job.payload ? 2 * n : n;
    job.done += n;
  }
  return true;
}

function close(id: number): void {
  const job = jobs.get(id);
  jobs.delete(id);
  if (job?.fd != null) closeSync(job.fd);
}

/** The job's digests once its file holds `bytes`, then the job is gone. */
function finish(id: number, bytes: number): DigestJobAnswer {
  const job = jobs.get(id);
  if (!job) return { id, error: "unknown digest job" };
  try {
    if (!readTo(job, bytes)) return { id, error: `${job.path} holds ${job.done} of ${bytes} bytes` };
    return { id, block: job.block?.digest() ?? null, payload: job.payload?.digest() ?? null, hashed: job.hashed };
  } catch (e) {
    return { id, error: (e as Error).message };
  } finally {
    close(id);
  }
}

function handle(m: DigestJobMessage): DigestJobAnswer | null {
  switch (m.kind) {
    case "start":
      jobs.set(m.id, { path: m.path, fd: null, done: 0, block: m.head ? newHash(m.alg).update(m.head) : null, payload: newHash(m.alg), hashed: 0 });
      return null;
    case "block":
      jobs.set(m.id, { path: m.path, fd: null, done: 0, block: newHash(m.alg).update(m.head), payload: null, hashed: 0 });
      return finish(m.id, m.bytes);
    case "cancel":
      close(m.id);
      return null;
    case "end":
      return finish(m.id, m.bytes);
    case "upTo": {
      const job = jobs.get(m.id);
      try {
        if (job) readTo(job, m.bytes);
      } catch {
        // The same error comes back at "end", which answers it.
      }
      return null;
    }
  }
}

parentPort!.on("message", (m: DigestJobMessage) => {
  const answer = handle(m);
  if (answer) parentPort!.postMessage(answer);
});
