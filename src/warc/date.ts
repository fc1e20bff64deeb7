/**
 * WARC-Date strings from microseconds since the epoch. WARC/1.1: exactly 6 fraction digits;
 * WARC/1.0: whole seconds, fraction truncated (its grammar has none). See warc-records.md §1.
 */
export type WarcVersion = "1.0" | "1.1";

// The records of one capture share its instant: the last date made is kept (BigInt arithmetic
// and toISOString cost a few µs a record).
let last: { micros: bigint; version: WarcVersion; text: string } = { micros: -1n, version: "1.1", text: "" };

export function formatWarcDate(micros: bigint, version: WarcVersion = "1.1"): string {
  if (micros === last.micros && version === last.version) return last.text;
  const text = formatDate(micros, version);
  last = { micros, version, text };
  return text;
}

function formatDate(micros: bigint, version: WarcVersion): string {
  const seconds = wholeSeconds(Number(micros / 1000n));
  if (version === "1.0") return `${seconds}Z`;
  const frac = (((micros % 1_000_000n) + 1_000_000n) % 1_000_000n).toString().padStart(6, "0");
  return `${seconds}.${frac}Z`;
}

// Captures of one second share its `YYYY-MM-DDTHH:mm:ss`: the last one made is kept (Date's
// toISOString costs about 1 µs).
let lastSecond: { second: number; text: string } = { second: NaN, text: "" };
/** Date's range ends (±8.64e15 ms) inside a second: past it, toISOString throws, as it always did. */
const MAX_DATE_MS = 8.64e15;

/** `YYYY-MM-DDTHH:mm:ss` of the instant `ms` (UTC). */
function wholeSeconds(ms: number): string {
  const second = Math.floor(ms / 1000);
  if (second === lastSecond.second && Math.abs(ms) <= MAX_DATE_MS) return lastSecond.text;
  const text = new Date(ms).toISOString().slice(0, 19); // of YYYY-MM-DDTHH:mm:ss.sssZ
  lastSecond = { second, text };
  return text;
}

/** `yyyyMMddHHmmssSSS` (17 digits), UTC, as in file names and CDXJ timestamps. */
export function timestamp17(micros: bigint): string {
  const iso = new Date(Number(micros / 1000n)).toISOString();
  return iso.replace(/[-:T.Z]/g, "").slice(0, 17);
}

/** Truncate a 1.1 date string (with fraction) to the 1.0 form. */
export function toWarc10Date(date: string): string {
  return date.replace(/\.\d+Z$/, "Z");
}
