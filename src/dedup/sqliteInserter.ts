import type Database from "better-sqlite3";

/**
 * Inserts rows `rows` at a time with one multi-row INSERT (one call into SQLite instead of
 * `rows`), the rest one by one. Callers write a row's values into `p` from the offset `slot()`
 * returns, then call `finish()`.
 */
export class Inserter {
  readonly p: unknown[];
  readonly #cols: number;
  readonly #one: Database.Statement<unknown[]>;
  readonly #many: Database.Statement<unknown[]>;
  #pos = 0;

  constructor(db: Database.Database, table: string, columns: string[], rows: number) {
    this.#cols = columns.length;
    const tuple = `(${columns.map(() => "?").join(",")})`;
    const head = `INSERT INTO ${table}(${columns.join(", ")}) VALUES `;
    this.#one = db.prepare(head + tuple);
    this.#many = db.prepare(head + Array.from({ length: rows }, () => tuple).join(","));
    this.p = new Array(rows * this.#cols).fill(null);
  }

  reset(): void {
    this.#pos = 0;
  }

  slot(): number {
    if (this.#pos === this.p.length) {
      this.#many.run(...this.p);
      this.#pos = 0;
    }
    const at = this.#pos;
    this.#pos += this.#cols;
    return at;
  }

  finish(): void {
    if (this.#pos === this.p.length) this.#many.run(...this.p);
    else for (let at = 0; at < this.#pos; at += this.#cols) this.#one.run(...this.p.slice(at, at + this.#cols));
    this.#pos = 0;
  }
}
