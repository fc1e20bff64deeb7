/**
 * Recording sessions on disk (issue #23): the registry (sessions.ts) forgets a session when it
 * closes, and forgets them all when lathe stops; a WACZ of a session (`GET
 * /api/v1/sessions/{id}/wacz`, `lathe wacz --session ID`) needs its files afterwards. Each
 * session's summary is written to the `sessions` table of `lathe-state.sqlite3` when it opens
 * (closedAt null: still open) and again when it closes (with the files holding its records).
 *
 * The database is opened for each write or read and closed again: sessions open and close
 * rarely, and so no handle outlives the lathe that wrote it (or the command that reads it).
 */
import { existsSync } from "node:fs";
import Database from "better-sqlite3";
import type { SessionSummary } from "./sessions.js";

const TABLE = "CREATE TABLE IF NOT EXISTS sessions(id TEXT PRIMARY KEY, json TEXT NOT NULL) WITHOUT ROWID";

export class SessionLog {
  constructor(readonly path: string) {}

  /** Insert or replace the session's summary. */
  record(s: SessionSummary): void {
    const db = new Database(this.path);
    try {
      db.pragma("journal_mode = WAL");
      db.exec(TABLE);
      db.prepare("INSERT INTO sessions(id, json) VALUES (?, ?) ON CONFLICT(id) DO UPDATE SET json = excluded.json").run(s.id, JSON.stringify(s));
    } finally {
      db.close();
    }
  }

  /** The session's last summary written, or null (unknown, or no database yet). */
  get(id: string): SessionSummary | null {
    if (!existsSync(this.path)) return null;
    const db = new Database(this.path, { readonly: true, fileMustExist: true });
    try {
      const has = db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'sessions'").get();
      if (!has) return null;
      const row = db.prepare("SELECT json FROM sessions WHERE id = ?").get(id) as { json: string } | undefined;
      return row ? (JSON.parse(row.json) as SessionSummary) : null;
    } finally {
      db.close();
    }
  }
}
