/**
 * WARC-Date strings from microseconds since the epoch. WARC/1.1: exactly 6 fraction digits;
 * WARC/1.0: whole seconds, fraction truncated (its grammar has none). See warc-records.md §1.
 */
import { SecondText } from "../core/secondText.js";

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

/** `YYYY-MM-DDTHH:mm:ss` (UTC) of a second, kept for the captures of that second. */
const isoSeconds = new SecondText((d) => d.toISOString().slice(0, 19)); // of YYYY-MM-DDTHH:mm:ss.sssZ

/** `YYYY-MM-DDTHH:mm:ss` of the instant `ms` (UTC); past Date's range, toISOString throws as it always did. */
function wholeSeconds(ms: number): string {
  return isoSeconds.of(new Date(ms));
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
