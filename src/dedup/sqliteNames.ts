/**
 * Bucket and file names, stored once each in buckets(id, name) / files(id, name) and referred to
 * by id from every entry; this keeps name → id for names known to exist (ids are never reused or
 * changed), so a lookup or a batch seldom asks SQLite for them.
 */
import type Database from "better-sqlite3";

const CACHE_LIMIT = 10_000;

export class NameIds {
  readonly #ids = new Map<string, number>();
  readonly #select: Database.Statement<[string], number>;
  readonly #insert: Database.Statement<[string]>;

  constructor(db: Database.Database, table: "buckets" | "files") {
    this.#select = db.prepare<[string], number>(`SELECT id FROM ${table} WHERE name = ?`).pluck();
    this.#insert = db.prepare(`INSERT INTO ${table}(name) VALUES (?)`);
  }

  /** The id of `name`, or undefined when it has none. */
  find(name: string): number | undefined {
    let id = this.#ids.get(name);
    if (id === undefined) {
      id = this.#select.get(name);
      if (id !== undefined) this.#remember(name, id);
    }
    return id;
  }

  /** The id of `name`, given one when it has none (inside a write transaction). */
  idFor(name: string): number {
    let id = this.find(name);
    if (id === undefined) {
      id = Number(this.#insert.run(name).lastInsertRowid);
      this.#remember(name, id);
    }
    return id;
  }

  /** After a rolled-back transaction: ids cached during it do not exist. */
  forget(): void {
    this.#ids.clear();
  }

  #remember(name: string, id: number): void {
    if (this.#ids.size >= CACHE_LIMIT) this.#ids.clear();
    this.#ids.set(name, id);
  }
}
