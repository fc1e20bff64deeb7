/** Whether captures can be written right now, and the probe that finds out when they can again. */
import type { Config } from "../config/schema.js";
import { ProxyError } from "../core/errors.js";
import type { WriterRegistry } from "../archive/writers.js";
import type { WarcWriter, WriterState } from "../warc/types.js";

/** Captures waiting for writers that cannot write, over all writers; and the first failure. */
export interface WaitingTotals {
  captures: number;
  bytes: number;
  /** When the oldest began to wait (ms since the epoch), or null. */
  since: number | null;
  failure: ProxyError | null;
}

export function waitingTotals(states: WriterState[]): WaitingTotals {
  const t: WaitingTotals = { captures: 0, bytes: 0, since: null, failure: null };
  for (const st of states) {
    t.captures += st.waiting.captures;
    t.bytes += st.waiting.bytes;
    if (st.waiting.since !== null && (t.since === null || st.waiting.since < t.since)) t.since = st.waiting.since;
    t.failure ??= st.failed;
  }
  return t;
}

/**
 * Why new exchanges must be refused (503) now, or null. A writer that rejects failed writes
 * (strict durability) refuses while it is failed. Writers that hold them (rollover, issue #26)
 * keep taking captures, which wait behind the held ones, until the captures waiting reach
 * `capture.retryMaxBytes` or the oldest has waited `capture.retryMaxMs`: then new exchanges are
 * refused rather than anything dropped.
 */
export function refusalFor(states: WriterState[], bounds: Config["capture"], now = Date.now()): ProxyError | null {
  for (const st of states) if (st.failed && !st.holdsFailedWrites) return st.failed;
  const t = waitingTotals(states);
  if (t.captures === 0) return null;
  const why = t.failure ? `: ${t.failure.message}` : "";
  const held = `${t.captures} capture${t.captures === 1 ? "" : "s"} (${t.bytes} bytes) wait to be written`;
  if (t.bytes >= bounds.retryMaxBytes) {
    return new ProxyError("ERR_WARC_WRITE", `${held}, as many bytes as capture.retryMaxBytes (${bounds.retryMaxBytes}) allows${why}`, t.failure ?? undefined);
  }
  const waited = now - (t.since ?? now);
  if (waited >= bounds.retryMaxMs) {
    return new ProxyError("ERR_WARC_WRITE", `${held}, the oldest for ${Math.round(waited / 1000)} s, as long as capture.retryMaxMs (${bounds.retryMaxMs}) allows${why}`, t.failure ?? undefined);
  }
  return null;
}

/**
 * The refusal (see refusalFor), probing failed writers on the way: a probe at most every second
 * finds out when writing works again, so recording resumes without a restart.
 */
export function writerFailureProbe(writers: WriterRegistry, bounds: Config["capture"]): () => ProxyError | null {
  let probing = false;
  let lastProbe = 0;
  const probeSoon = (w: WarcWriter) => {
    if (probing || Date.now() - lastProbe < 1000) return;
    probing = true;
    lastProbe = Date.now();
    w.probe().finally(() => {
      probing = false;
    });
  };
  return () => {
    const all = writers.all();
    const states = all.map((w) => w.state());
    const failed = states.findIndex((st) => st.failed);
    if (failed >= 0) probeSoon(all[failed]!);
    return refusalFor(states, bounds);
  };
}
