/**
 * Tasks with the same key run one after another, in the order they were queued; tasks with
 * different keys run side by side. For work that would only queue elsewhere anyway (transactions
 * waiting for the same row lock), queued here without holding a connection meanwhile.
 */
export class KeyedQueue {
  readonly #tails = new Map<string, Promise<void>>();

  run<T>(key: string, task: () => Promise<T>): Promise<T> {
    const before = this.#tails.get(key) ?? Promise.resolve();
    const result = before.then(task);
    const tail = result.then(
      () => undefined,
      () => undefined,
    );
    this.#tails.set(key, tail);
    void tail.then(() => {
      if (this.#tails.get(key) === tail) this.#tails.delete(key);
    });
    return result;
  }
}
