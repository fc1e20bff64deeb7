/** The exchanges in flight: counted for /status and metrics, awaited by a graceful stop. */
export class InFlightExchanges {
  readonly #startedAt = new Map<number, number>(); // exchange id → start (ms)
  #next = 0;
  #idleWaiters: Array<() => void> = [];

  /** Mark an exchange as in flight; the returned function ends it (a second call does nothing). */
  begin(): () => void {
    const id = this.#next++;
    this.#startedAt.set(id, Date.now());
    return () => {
      if (!this.#startedAt.delete(id)) return;
      if (this.#startedAt.size === 0) {
        const w = this.#idleWaiters;
        this.#idleWaiters = [];
        for (const f of w) f();
      }
    };
  }

  /** Resolves when no exchange is in flight. */
  idle(): Promise<void> {
    return this.#startedAt.size === 0 ? Promise.resolve() : new Promise<void>((r) => this.#idleWaiters.push(r));
  }

  /** Start times (ms) of the exchanges in flight. */
  starts(): number[] {
    return [...this.#startedAt.values()];
  }

  get size(): number {
    return this.#startedAt.size;
  }
}
