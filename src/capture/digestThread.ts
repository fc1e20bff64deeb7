/**
 * Digests of large spooled bodies, taken on a worker thread (digestWorker.ts) instead of the
 * proxy's. A capture hashes its body inline until the spool moves to its temp file (bodies over
 * `capture.spoolMemoryBytes`); from then on it tells the worker how far the file is written, and
 * the worker hashes the file from its first byte, overlapping the transfer. At the end the
 * capture waits for the two digests (block: head and body; payload: body).
 *
 * A response's block digest can be left out of the running job (`head` null) and asked for once a
 * record needs it (blockDigestOfFile): a response recorded as a revisit never does, so a large
 * body seen before is hashed once, not twice.
 *
 * When the worker cannot be had (no build, it failed, it died), `start` returns null or `finish`
 * resolves null, and the capture hashes the file itself: slower, never wrong.
 * The worker is one per process: `lathe serve` starts it at start-up (startDigestWorker), anything
 * else on first use. It is unref'd while idle, so it never keeps a process alive, and ref'd while
 * it owes an answer, so a process does not exit before a capture's digests arrive.
 */
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { Worker } from "node:worker_threads";
import type { DigestAlgorithm } from "../warc/digest.js";
import type { DigestJobAnswer, DigestJobMessage } from "./digestWorker.js";

const WORKER = new URL("../../dist/capture/digestWorker.js", import.meta.url);

export interface BodyDigests {
  /** null when the job was started without the head (the block digest is asked for later). */
  block: Buffer | null;
  payload: Buffer;
}

export interface DigestJob {
  /** The spool's file now holds at least `bytes` body bytes. */
  progress(bytes: number): void;
  /** The body is `bytes` long and all in the file: its digests, or null (hash it yourself). */
  finish(bytes: number): Promise<BodyDigests | null>;
  /** The capture is abandoned. */
  cancel(): void;
}

let worker: Worker | null = null;
let unavailable = false;
let nextId = 1;
let answered = 0;
let hashedBytes = 0;
const waiting = new Map<number, (a: DigestJobAnswer | null) => void>();

function theWorker(): Worker | null {
  if (worker || unavailable) return worker;
  if (!existsSync(fileURLToPath(WORKER))) {
    unavailable = true;
    return null;
  }
  // No inherited node flags: the worker needs none, and some (--input-type, --require) break or burden it.
  const w = new Worker(WORKER, { execArgv: [], resourceLimits: { maxYoungGenerationSizeMb: 4 } });
  w.on("message", (a: DigestJobAnswer) => {
    const resolve = waiting.get(a.id);
    waiting.delete(a.id);
    if (waiting.size === 0) w.unref();
    if (!("error" in a)) {
      answered++;
      hashedBytes += a.hashed;
    }
    resolve?.(a);
  });
  const gone = () => {
    if (worker === w) worker = null; // the next job starts another
    for (const resolve of waiting.values()) resolve(null);
    waiting.clear();
  };
  w.on("error", gone);
  w.on("exit", gone);
  // Unref'd after the listeners (adding a 'message' listener refs it again): an idle worker never
  // keeps lathe alive, and one that owes an answer does (ref'd in ask()), so a process ending
  // with a capture in flight does not exit before its digests arrive.
  w.unref();
  worker = w;
  return w;
}

/**
 * Start the worker ahead of the first large body (a serving lathe does this at start-up): its
 * isolate and modules cost ~75 ms of CPU, which would otherwise land on that body's exchange.
 */
export function startDigestWorker(): void {
  theWorker();
}

type Digests = Exclude<DigestJobAnswer, { error: string }>;

/** The worker's answer to `m` (a job's last message), or null when it failed or died. */
function ask(w: Worker, m: DigestJobMessage): Promise<Digests | null> {
  if (worker !== w) return Promise.resolve(null);
  return new Promise((resolve) => {
    waiting.set(m.id, (a) => resolve(a && !("error" in a) ? a : null));
    w.ref();
    w.postMessage(m);
  });
}

const toBuffer = (b: Uint8Array | null) => (b ? Buffer.from(b.buffer, b.byteOffset, b.byteLength) : null);

/**
 * Start hashing the body spooled at `path`: its payload digest, and its block digest after
 * `head` unless `head` is null.
 */
export function startDigestJob(path: string, alg: DigestAlgorithm, head: Uint8Array | null): DigestJob | null {
  const w = theWorker();
  if (!w) return null;
  const id = nextId++;
  const post = (m: DigestJobMessage) => w.postMessage(m);
  post({ kind: "start", id, path, alg, head });
  let over = false;
  return {
    progress: (bytes) => !over && post({ kind: "upTo", id, bytes }),
    async finish(bytes) {
      if (over) return null;
      over = true;
      const a = await ask(w, { kind: "end", id, bytes });
      return a?.payload ? { block: toBuffer(a.block), payload: toBuffer(a.payload)! } : null;
    },
    cancel() {
      if (over) return;
      over = true;
      if (worker === w) post({ kind: "cancel", id });
    },
  };
}

/**
 * The block digest of `head` followed by the first `bytes` of the finished file at `path`, taken
 * on the worker; null when the worker cannot (hash it yourself).
 */
export async function blockDigestOfFile(path: string, alg: DigestAlgorithm, head: Uint8Array, bytes: number): Promise<Buffer | null> {
  const w = theWorker();
  if (!w) return null;
  const a = await ask(w, { kind: "block", id: nextId++, path, alg, head, bytes });
  return a ? toBuffer(a.block) : null;
}

/** Answers the worker gave: bodies hashed, block digests taken (tests, diagnostics). */
export function digestsAnsweredOffThread(): number {
  return answered;
}

/** Body bytes the worker ran through its hashes, each digest counted (tests, diagnostics). */
export function bytesHashedOffThread(): number {
  return hashedBytes;
}

/** Stop the worker (tests: a worker that dies mid-job). */
export async function stopDigestWorker(): Promise<void> {
  const w = worker;
  if (w) await w.terminate();
}
