/**
 * The text a format gives for the last whole second it was asked about: the timestamps of one
 * second (every capture and log line of it) share it, and formatting a Date costs more than
 * the rest of a timestamp (#25). Used by WARC-Date and the crawl log's timestamps.
 */
export class SecondText {
  #second = NaN;
  #text = "";
  readonly #format: (d: Date) => string;

  constructor(format: (d: Date) => string) {
    this.#format = format;
  }

  /**
   * An invalid Date (NaN, or past Date's range) has a NaN second, never the last one: it is
   * formatted every time, so a format that throws on it (toISOString) still throws.
   */
  of(d: Date): string {
    const second = Math.floor(d.getTime() / 1000);
    if (second !== this.#second) {
      this.#text = this.#format(d);
      this.#second = second;
    }
    return this.#text;
  }
}
