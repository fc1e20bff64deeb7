/**
 * The on-disk format of the SQLite dedup store, schema version 1 (`PRAGMA user_version`;
 * `PRAGMA application_id` = "ltdd"), and the check that a database is one of ours:
 *
 *   entries(seq INTEGER PRIMARY KEY, bucket, alg, digest, url, date, record_id, file, offset,
 *           length, status, etag, last_modified)
 *     one row per entry, appended in `seq` order ("most recent" = highest seq). bucket and file
 *     are ids into buckets(id, name) / files(id, name), so a name is stored once, not per entry;
 *     alg is 1 = sha1, 2 = sha256; record_id holds lathe's own `<urn:uuid:…>` ids as 16 bytes,
 *     any other id verbatim (sqliteKeys.ts). Partial index entries_file(file, offset) serves
 *     removeFileTail.
 *   by_digest(key, seq), by_url(key, seq, tag): the two lookup paths, WITHOUT ROWID B-trees on
 *     47-bit integer keys (digestKey(bucket, alg, digest), urlKey(bucket, url); tag = two more
 *     digest bytes), about 16 bytes an entry where indexes over (bucket, alg, digest, seq) and
 *     (bucket, url, seq) take about 40 and 110. A key only narrows the search: every lookup
 *     checks bucket, alg, digest and url on the entry itself.
 *   by_digest_new, by_url_new: the same, for recent entries (a small log-structured level).
 *     Random keys make every B-tree insert land on a different page, so with 10 million entries
 *     a batch of 100,000 would rewrite nearly all of by_digest and by_url (hundreds of MB of WAL).
 *     New entries go to the small *_new trees instead (sorted, which keeps them cache-hot), and
 *     each add() moves the entries of one key range — the next slice of key space after a
 *     persistent cursor, about as many as it added — into the big trees, in key order, touching
 *     only that slice of their pages (sqliteStaging.ts). For any one key every entry in *_new is
 *     newer than every entry in the big tree, so lookups read *_new first, then the big tree.
 *   state(entries, staged_digest, staged_url, cursor_digest, cursor_url): one row, counters and
 *     cursors, updated in the same transaction as the entries.
 *   meta(key, value): created_by, and `requires` (the lathe a newer schema needs).
 */
import type Database from "better-sqlite3";
import { ProxyError } from "../core/errors.js";
import { VERSION } from "../core/version.js";

export const SCHEMA_VERSION = 1;
/** `PRAGMA application_id`: "ltdd" (lathe dedup), so a stray SQLite file is never taken for ours. */
export const APPLICATION_ID = 0x6c746464;

const SCHEMA = `
CREATE TABLE meta(key TEXT PRIMARY KEY, value) WITHOUT ROWID;
CREATE TABLE state(
  id INTEGER PRIMARY KEY CHECK (id = 1),
  entries INTEGER NOT NULL,
  staged_digest INTEGER NOT NULL,
  staged_url INTEGER NOT NULL,
  cursor_digest INTEGER NOT NULL,
  cursor_url INTEGER NOT NULL
);
INSERT INTO state VALUES (1, 0, 0, 0, 0, 0);
CREATE TABLE buckets(id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);
CREATE TABLE files(id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);
CREATE TABLE entries(
  seq INTEGER PRIMARY KEY,
  bucket INTEGER NOT NULL,
  alg INTEGER NOT NULL,
  digest BLOB NOT NULL,
  url TEXT NOT NULL,
  date TEXT NOT NULL,
  record_id,
  file INTEGER,
  offset INTEGER,
  length INTEGER,
  status INTEGER,
  etag TEXT,
  last_modified TEXT
);
CREATE INDEX entries_file ON entries(file, offset) WHERE file IS NOT NULL;
CREATE TABLE by_digest(key INTEGER NOT NULL, seq INTEGER NOT NULL, PRIMARY KEY(key, seq)) WITHOUT ROWID;
CREATE TABLE by_digest_new(key INTEGER NOT NULL, seq INTEGER NOT NULL, PRIMARY KEY(key, seq)) WITHOUT ROWID;
CREATE TABLE by_url(key INTEGER NOT NULL, seq INTEGER NOT NULL, tag INTEGER NOT NULL, PRIMARY KEY(key, seq)) WITHOUT ROWID;
CREATE TABLE by_url_new(key INTEGER NOT NULL, seq INTEGER NOT NULL, tag INTEGER NOT NULL, PRIMARY KEY(key, seq)) WITHOUT ROWID;
`;
const TABLES = ["meta", "state", "buckets", "files", "entries", "by_digest", "by_digest_new", "by_url", "by_url_new"];

/** The columns of `entries` in the order the schema lists them (add() fills them all). */
export const ENTRY_COLUMNS = ["seq", "bucket", "alg", "digest", "url", "date", "record_id", "file", "offset", "length", "status", "etag", "last_modified"];

/** Why a SQLite database cannot be used, "fresh" for an empty one, null when it is ours. */
export function checkExisting(path: string, db: Database.Database): ProxyError | "fresh" | null {
  const appId = Number(db.pragma("application_id", { simple: true }));
  const version = Number(db.pragma("user_version", { simple: true }));
  const tables = db.prepare<[], string>("SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name").pluck().all();
  if (appId === 0 && version === 0 && tables.length === 0) return "fresh";
  if (appId !== APPLICATION_ID) {
    return new ProxyError(
      "ERR_CONFIG",
      `${path} is a SQLite database but not a lathe dedup database (application_id ${appId}, tables: ${tables.join(", ") || "none"}); lathe leaves it untouched: set dedup.dbPath to another file`,
    );
  }
  if (version > SCHEMA_VERSION) return newerSchema(path, db, version);
  const missing = TABLES.filter((t) => !tables.includes(t));
  if (version < 1 || missing.length) {
    return new ProxyError(
      "ERR_CONFIG",
      `dedup database ${path} is damaged (schema version ${version}, missing tables: ${missing.join(", ") || "none"}); lathe does not repair or replace it: move it away or set dedup.dbPath to another file`,
    );
  }
  return null;
}

/** A database written by a newer lathe: say which lathe it needs, when it says. */
function newerSchema(path: string, db: Database.Database, version: number): ProxyError {
  let by = "";
  try {
    const meta = new Map(db.prepare<[], { key: string; value: unknown }>("SELECT key, value FROM meta").all().map((r) => [r.key, String(r.value)]));
    by = meta.get("requires") ? `; it needs ${meta.get("requires")} or newer` : meta.get("created_by") ? `; it was written by ${meta.get("created_by")}` : "";
  } catch {
    // a newer schema may not have meta; the version number says enough
  }
  return new ProxyError(
    "ERR_CONFIG",
    `dedup database ${path} has schema version ${version}, newer than lathe ${VERSION} understands (version ${SCHEMA_VERSION})${by}: run a newer lathe, or set dedup.dbPath to another file`,
  );
}

/**
 * Give a fresh database the schema; returns false when another process created it meanwhile
 * (the caller checks it again then).
 */
export function createSchema(file: string, db: Database.Database): boolean {
  // Page size and WAL before the first table; then the schema in one transaction, re-checked
  // inside it in case another process created it meanwhile. 8 KiB pages: bulk loads ~25%
  // faster than 4 KiB (less per-page work for the same bytes), lookups as fast, while a
  // one-entry add() still writes only ~7 pages (56 KB) of WAL; 16 KiB is no faster.
  db.pragma("page_size = 8192");
  db.pragma("journal_mode = WAL");
  let created = false;
  db.transaction(() => {
    if (checkExisting(file, db) !== "fresh") return;
    db.exec(SCHEMA);
    db.prepare("INSERT INTO meta(key, value) VALUES ('created_by', ?)").run(`lathe ${VERSION}`);
    db.pragma(`application_id = ${APPLICATION_ID}`);
    db.pragma(`user_version = ${SCHEMA_VERSION}`);
    created = true;
  }).immediate();
  return created;
}
