/**
 * How long a host is left alone after it answered 5xx or 429: what its `Retry-After` asks (RFC
 * 9110 §10.2.3, seconds or an HTTP date), else a back-off that doubles with each consecutive
 * failure; both bounded by `maxBackoffMs`. Pure.
 */

/** A status that asks the client to back off: 429 Too Many Requests and every 5xx. */
export function asksForBackoff(status: number): boolean {
  return status === 429 || (status >= 500 && status <= 599);
}

/** `Retry-After` in ms from `nowMs`, or null when absent or not understood. */
export function retryAfterMs(value: string | undefined, nowMs: number): number | null {
  if (value === undefined) return null;
  const v = value.trim();
  if (/^\d+$/.test(v)) return Number(v) * 1000;
  const at = Date.parse(v);
  return Number.isFinite(at) ? Math.max(0, at - nowMs) : null;
}

/** The wait after the `failures`-th consecutive failure (1 = the first). */
export function backoffWaitMs(o: { failures: number; retryAfterMs: number | null; backoffMs: number; maxBackoffMs: number }): number {
  if (o.retryAfterMs !== null) return Math.min(o.retryAfterMs, o.maxBackoffMs);
  const growing = o.backoffMs * 2 ** Math.min(o.failures - 1, 30);
  return Math.min(growing, o.maxBackoffMs);
}
