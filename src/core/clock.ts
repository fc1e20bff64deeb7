/**
 * Time, injected so WARC output is deterministic in tests. `nowMicros` is microseconds since the
 * Unix epoch with real sub-millisecond precision (hrtime-based), as WARC 1.1 dates want.
 */
export interface Clock {
  nowMicros(): bigint;
}

const originMicros = BigInt(Math.round(performance.timeOrigin * 1000));

export const systemClock: Clock = {
  nowMicros(): bigint {
    return originMicros + BigInt(Math.round(performance.now() * 1000));
  },
};

/** A clock for tests: starts at `startMicros` and advances by `stepMicros` on every read. */
export function fixedClock(startMicros: bigint, stepMicros = 1n): Clock {
  let t = startMicros;
  return {
    nowMicros() {
      const v = t;
      t += stepMicros;
      return v;
    },
  };
}

export function microsToDate(us: bigint): Date {
  return new Date(Number(us / 1000n));
}
