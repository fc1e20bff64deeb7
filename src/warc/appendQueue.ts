/**
 * The writer's serial queue: writes land in call order, other tasks (rollover, close, probe, …)
 * run between them, never at once. When a write's turn comes, the ones right behind it that are
 * already compressed may join its append (one write(2) per batch, not per group: under load the
 * queue otherwise falls behind the proxy and holds every capture).
 */

/** A write's payload as it arrives: ready at once, or later. */
export interface Pending<G> {
  ready: G | null;
  /** Resolves with the payload (with `ready` itself when that is set). */
  result: Promise<G>;
  /** Called once the write's turn is over (landed, joined another's, or failed). */
  release(): void;
}

/** Writes taken into another write's append, in queue order. */
export interface Followers<G, R> {
  readonly payloads: G[];
  /** Their groups landed: each of their writes resolves with its own result. */
  landed(results: R[]): void;
  /** Their groups did not land: each of their writes rejects with `e`. */
  failed(e: unknown): void;
  /** Their groups did not land: each of their writes rejects with its own error, in order. */
  failedEach(errors: unknown[]): void;
}

/**
 * Hands over the writes right behind the one whose turn it is that are ready, queued before any
 * other task, and accepted by `joins`, in order, up to the first it refuses: they leave the queue.
 */
export type TakeFollowers<G, R> = (joins: (next: G) => boolean) => Followers<G, R>;

/** Append `first`, the write whose turn it is, and any followers it takes. */
export type Append<G, R> = (first: G, takeFollowers: TakeFollowers<G, R>) => Promise<R>;

/** A write not yet appended, in call order. */
interface Waiting<G, R> {
  /** Its payload, once ready (and while not yet appended). */
  ready: G | null;
  /** Writes of one epoch have no other queue task (rollover, close, …) between them. */
  epoch: number;
  /** Set when an earlier write appended this one together with its own. */
  batched: Promise<R> | null;
}

export class AppendQueue<G, R> {
  #tail: Promise<unknown> = Promise.resolve();
  #epoch = 0;
  // Writes waiting for their append, in call order.
  readonly #waiting: Array<Waiting<G, R>> = [];
  readonly #asError: (e: unknown) => unknown;

  /** `asError`: what a failed write rejects with, given what it failed with. */
  constructor(asError: (e: unknown) => unknown = (e) => e) {
    this.#asError = asError;
  }

  /** Queue a task other than a write: no batch of writes spans it. */
  task<T>(run: () => Promise<T>): Promise<T> {
    this.#epoch++;
    return this.#chain(run);
  }

  /**
   * Queue a write: its place is taken now, so writes land in call order (and a task queued
   * later waits for it); its payload may still be on its way.
   */
  write(payload: Pending<G>, append: Append<G, R>): Promise<R> {
    const w: Waiting<G, R> = { ready: payload.ready, epoch: this.#epoch, batched: null };
    this.#waiting.push(w);
    if (!payload.ready) {
      payload.result.then(
        (g) => {
          if (!w.batched) w.ready = g;
        },
        () => {}, // awaited in the queue; this only silences an early rejection
      );
    }
    return this.#chain(async () => {
      try {
        if (w.batched) return await w.batched; // appended with an earlier write
        const g = payload.ready ?? (await payload.result); // a ready payload is its result: no hop
        w.ready = null;
        this.#remove(w);
        return await append(g, (joins) => this.#takeFollowers(w.epoch, joins));
      } catch (e) {
        throw this.#asError(e);
      } finally {
        this.#remove(w);
        payload.release();
      }
    });
  }

  #chain<T>(task: () => Promise<T>): Promise<T> {
    const run = this.#tail.then(task);
    this.#tail = run.catch(() => {});
    return run;
  }

  #takeFollowers(epoch: number, joins: (next: G) => boolean): Followers<G, R> {
    const taken: Array<Waiting<G, R>> = [];
    const payloads: G[] = [];
    const settle: Array<{ resolve: (r: R) => void; reject: (e: unknown) => void }> = [];
    for (const x of this.#waiting) {
      const g = x.ready;
      if (!g || x.epoch !== epoch || !joins(g)) break;
      x.batched = new Promise<R>((resolve, reject) => settle.push({ resolve, reject }));
      x.batched.catch(() => {}); // awaited by its own queue task
      x.ready = null;
      taken.push(x);
      payloads.push(g);
    }
    for (const x of taken) this.#remove(x);
    return {
      payloads,
      landed: (results) => settle.forEach((s, i) => s.resolve(results[i]!)),
      failed: (e) => settle.forEach((s) => s.reject(e)),
      failedEach: (errors) => settle.forEach((s, i) => s.reject(errors[i])),
    };
  }

  #remove(w: Waiting<G, R>): void {
    const i = this.#waiting.indexOf(w);
    if (i >= 0) this.#waiting.splice(i, 1);
  }
}
