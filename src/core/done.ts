/**
 * One promise, already fulfilled, shared by everything that has nothing to wait for (a dispose
 * of bytes held in memory, a spool that never went to disk). Whoever gets it back may skip the
 * await: per exchange those awaits, their Promise.all and their microtask hops add up.
 */
export const DONE: Promise<void> = Promise.resolve();

/**
 * Like Promise.all (and rejecting as it does), for promises whose values nobody reads; DONE
 * itself when every one of them is DONE.
 */
export function allDone(ps: ReadonlyArray<Promise<unknown>>): Promise<unknown> {
  for (const p of ps) if (p !== DONE) return Promise.all(ps);
  return DONE;
}
