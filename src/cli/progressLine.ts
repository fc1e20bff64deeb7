/**
 * A one-line progress display on a terminal's stderr: `label [#####-----]  42%  1.2 GB of 2.9 GB
 * 85 MB/s`, redrawn at most every 100 ms and cleared before anything else is written there.
 * (`lathe index` has its own bar in index.ts; both could share this one.)
 */
export class ProgressLine {
  #last = 0;
  #drawn = false;
  #label = "";
  #since = 0;

  constructor(
    readonly write: (s: string) => void,
    readonly columns: number,
  ) {}

  /** `label` starts a phase (its rate counts from here); `final` draws past the throttle. */
  show(label: string, done: number, total: number, final = false): void {
    const now = Date.now();
    if (label !== this.#label) {
      this.#label = label;
      this.#since = now;
    } else if (now - this.#last < 100 && !final) return;
    this.#last = now;
    const frac = total > 0 ? Math.min(1, done / total) : 1;
    const width = this.columns >= 100 ? 30 : this.columns >= 70 ? 20 : 10;
    const full = Math.round(frac * width);
    const secs = (now - this.#since) / 1000;
    const parts = [`${label} [${"#".repeat(full)}${"-".repeat(width - full)}] ${String(Math.floor(frac * 100)).padStart(3)}%`, `${bytes(done)} of ${bytes(total)}`];
    if (secs >= 1) parts.push(`${bytes(done / secs)}/s`);
    let line = parts[0]!;
    for (const p of parts.slice(1)) if (line.length + 2 + p.length < this.columns) line += `  ${p}`;
    this.write(`\r${line}\x1b[K`);
    this.#drawn = true;
  }

  clear(): void {
    if (this.#drawn) this.write("\r\x1b[K");
    this.#drawn = false;
  }
}

/** 1.2 GB, 85.0 MB, 12.3 kB, 512 B. */
export function bytes(n: number): string {
  if (n < 1e3) return `${Math.round(n)} B`;
  if (n < 1e6) return `${(n / 1e3).toFixed(1)} kB`;
  if (n < 1e9) return `${(n / 1e6).toFixed(1)} MB`;
  return `${(n / 1e9).toFixed(2)} GB`;
}
