/** FIFO counting semaphore: holders are always the earliest writes, so the queue never starves. */
export function semaphore(n: number) {
  let free = n;
  const waiting: Array<() => void> = [];
  return {
    acquire(): Promise<void> {
      if (free > 0) {
        free--;
        return Promise.resolve();
      }
      return new Promise<void>((r) => waiting.push(r));
    },
    release(): void {
      const next = waiting.shift();
      if (next) next();
      else free++;
    },
  };
}
