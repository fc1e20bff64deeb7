/**
 * Rates over the last 1, 5 and 15 minutes, in warcprox's shape (stats.py RunningStats):
 * a snapshot of the counters every 10 s; a rate is the difference to the oldest snapshot
 * inside the window.
 */
export interface Rates {
  actual_elapsed: number;
  urls_per_sec: number;
  warc_bytes_per_sec: number;
}

interface Snap {
  t: number;
  urls: number;
  bytes: number;
}

export class RunningStats {
  #snaps: Snap[] = [];
  readonly #read: () => { urls: number; bytes: number };
  readonly #timer: NodeJS.Timeout;

  constructor(read: () => { urls: number; bytes: number }, now = () => Date.now()) {
    this.#read = read;
    const snap = () => {
      const c = read();
      this.#snaps.push({ t: now(), ...c });
      const cutoff = now() - 16 * 60_000;
      while (this.#snaps.length > 1 && this.#snaps[0]!.t < cutoff) this.#snaps.shift();
    };
    snap();
    this.#timer = setInterval(snap, 10_000);
    this.#timer.unref();
  }

  rates(minutes: number, nowMs = Date.now()): Rates {
    const cur = this.#read();
    const from = nowMs - minutes * 60_000;
    const base = this.#snaps.find((s) => s.t >= from) ?? this.#snaps[this.#snaps.length - 1]!;
    const elapsed = Math.max(0.001, (nowMs - base.t) / 1000);
    return {
      actual_elapsed: elapsed,
      urls_per_sec: (cur.urls - base.urls) / elapsed,
      warc_bytes_per_sec: (cur.bytes - base.bytes) / elapsed,
    };
  }

  stop(): void {
    clearInterval(this.#timer);
  }
}
