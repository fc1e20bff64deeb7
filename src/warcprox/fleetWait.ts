/**
 * The wait of an admission whose limit is undecided (C < N ≤ C + R, warcprox-compat.md §2) when
 * the counts live in the shared store: decide again each time something may have settled, until
 * the verdict is no longer "wait"; when the wait times out, decide pessimistically (as limits.ts
 * does); leave when the client goes away.
 */
import type { AdmitResult } from "./limits.js";

/** The verdict "not yet: wait for a settle". */
export const WAIT = Symbol("wait");

export type Decision = AdmitResult | typeof WAIT;

export interface VerdictWait {
  /** One atomic decision; `pessimistic` (the wait timed out) never returns WAIT. Must not throw. */
  decide(pessimistic: boolean): Promise<Decision>;
  /** Call `kick` whenever a reservation may have settled; returns a function that unsubscribes. */
  subscribe(kick: () => void): () => void;
  timeoutMs: number;
  signal?: AbortSignal;
}

/**
 * Decide now and again on every kick, one decision at a time (kicks during a decision run it once
 * more afterwards, so none is lost). Subscribed before the first decision, so a settle between
 * that decision and the wait is not missed. An admission decided after the client left is
 * released at once.
 */
export function awaitVerdict(w: VerdictWait): Promise<AdmitResult> {
  if (w.signal?.aborted) return Promise.reject(w.signal.reason);
  return new Promise<AdmitResult>((resolve, reject) => {
    let over = false;
    let running = false;
    let again = false;
    let pessimistic = false;
    const end = () => {
      over = true;
      clearTimeout(timer);
      unsubscribe();
      w.signal?.removeEventListener("abort", onAbort);
    };
    const run = async () => {
      if (over) return;
      if (running) {
        again = true;
        return;
      }
      running = true;
      try {
        do {
          again = false;
          const d = await w.decide(pessimistic);
          if (over) {
            if (d !== WAIT && d.ok) d.release(null);
            return;
          }
          if (d !== WAIT) {
            end();
            resolve(d);
            return;
          }
        } while (again);
      } catch (e) {
        if (!over) {
          end();
          reject(e);
        }
      } finally {
        running = false;
      }
    };
    const unsubscribe = w.subscribe(() => void run());
    const timer = setTimeout(() => {
      pessimistic = true;
      void run();
    }, w.timeoutMs);
    timer.unref?.();
    const onAbort = () => {
      if (over) return;
      end();
      reject(w.signal!.reason);
    };
    w.signal?.addEventListener("abort", onAbort, { once: true });
    void run();
  });
}
