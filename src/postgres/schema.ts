/**
 * The shared schema, created on first start and versioned (issue "A fleet… sharing PostgreSQL").
 *
 * One row in `lathe_schema` holds the version. Instances starting together take a transaction-
 * scoped advisory lock, so exactly one creates the tables and the others find them. A database
 * whose version is newer than this lathe understands is refused, never altered; a role that can
 * read but not write the tables is refused before it records anything.
 *
 * Tables:
 * - `dedup_entries`: one row per (bucket, original record), looked up by digest or by URL (the
 *   URL index holds md5(url), so URLs longer than a B-tree entry allows are fine).
 * - `dedup_claims`: digests being written as originals right now (in-flight dedup across
 *   instances); a claim ends with its capture or expires.
 * - `stats_buckets` / `stats_reservations`: Warcprox-Meta stats, and the admitted in-flight
 *   captures that make limits exact across the fleet.
 * - `applied_batches`: ids of batches queued while the server was away and applied since, so a
 *   batch replayed after a crash is applied once.
 * - `instances`: the registry. `run` is random per start, so an instance that comes back after
 *   its row was dropped recognises its own row and never overwrites another run's with its id;
 *   `heartbeat_ms` is kept per row, so instances with different intervals agree on who is live.
 */
import type pg from "pg";
import { ProxyError } from "../core/errors.js";
import { VERSION } from "../core/version.js";

export const SCHEMA_VERSION = 1;

/** The sequences behind the bigserial columns: inserting needs USAGE on them. */
const SEQUENCES = ["dedup_entries_seq_seq", "stats_buckets_ord_seq"];

/** pg_advisory_xact_lock key: "lathe" in ASCII. */
const LOCK_KEY = 0x6c61746865;

const TABLES = ["lathe_schema", "dedup_entries", "dedup_claims", "stats_buckets", "stats_reservations", "applied_batches", "instances"] as const;

const CREATE = `
CREATE TABLE lathe_schema (
  id integer PRIMARY KEY CHECK (id = 1),
  version integer NOT NULL,
  created_by text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE dedup_entries (
  seq bigserial PRIMARY KEY,
  bucket text NOT NULL,
  alg smallint NOT NULL,
  digest bytea NOT NULL,
  url text NOT NULL,
  warc_date text NOT NULL,
  record_id text,
  filename text,
  file_offset bigint,
  record_length bigint,
  status integer,
  etag text,
  last_modified text,
  instance text
);
CREATE INDEX dedup_entries_by_digest ON dedup_entries (bucket, alg, digest, seq DESC);
CREATE INDEX dedup_entries_by_url ON dedup_entries (bucket, md5(url), seq DESC);
CREATE INDEX dedup_entries_by_file ON dedup_entries (filename, file_offset);
CREATE TABLE dedup_claims (
  alg smallint NOT NULL,
  digest bytea NOT NULL,
  instance text NOT NULL,
  expires_at timestamptz NOT NULL,
  PRIMARY KEY (alg, digest)
);
CREATE TABLE stats_buckets (
  bucket text PRIMARY KEY,
  ord bigserial NOT NULL,
  total_urls bigint NOT NULL DEFAULT 0,
  total_bytes bigint NOT NULL DEFAULT 0,
  new_urls bigint NOT NULL DEFAULT 0,
  new_bytes bigint NOT NULL DEFAULT 0,
  revisit_urls bigint NOT NULL DEFAULT 0,
  revisit_bytes bigint NOT NULL DEFAULT 0
);
CREATE TABLE stats_reservations (
  id text PRIMARY KEY,
  instance text NOT NULL,
  buckets text[] NOT NULL,
  may_new boolean NOT NULL,
  may_revisit boolean NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE applied_batches (
  id text PRIMARY KEY,
  applied_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE instances (
  id text PRIMARY KEY,
  run text NOT NULL,
  hostname text NOT NULL,
  pid integer NOT NULL,
  proxy text NOT NULL,
  control text,
  version text NOT NULL,
  started_at timestamptz NOT NULL,
  heartbeat_ms integer NOT NULL,
  heartbeat_at timestamptz NOT NULL,
  in_flight integer NOT NULL DEFAULT 0,
  captures_per_sec double precision NOT NULL DEFAULT 0
);
`;

async function tablesPresent(c: pg.ClientBase): Promise<string[]> {
  const r = await c.query<{ name: string }>(
    "SELECT table_name AS name FROM information_schema.tables WHERE table_schema = current_schema() AND table_name = ANY($1)",
    [TABLES],
  );
  return r.rows.map((x) => x.name);
}

/** The tables this role may not write, by name. */
async function unwritable(c: pg.ClientBase): Promise<string[]> {
  const r = await c.query<{ name: string; ok: boolean }>(
    // has_table_privilege with a list is true when ANY of them is held: ask for each.
    `SELECT t AS name, bool_and(has_table_privilege(current_user, quote_ident(current_schema()) || '.' || t, p)) AS ok
     FROM unnest($1::text[]) AS t, unnest(ARRAY['SELECT', 'INSERT', 'UPDATE', 'DELETE']) AS p GROUP BY t`,
    [TABLES.filter((t) => t !== "lathe_schema")],
  );
  const seqs = await c.query<{ name: string; ok: boolean }>(
    `SELECT s AS name, has_sequence_privilege(current_user, quote_ident(current_schema()) || '.' || s, 'USAGE') AS ok FROM unnest($1::text[]) AS s`,
    [SEQUENCES],
  );
  return [...r.rows, ...seqs.rows].filter((x) => !x.ok).map((x) => x.name);
}

/**
 * Make sure the database holds lathe's schema at a version this lathe understands; create it in a
 * fresh database. Returns whether this call created it. Throws ProxyError("ERR_CONFIG") naming
 * the problem; `where` names the database (password masked).
 */
export async function ensureSchema(pool: pg.Pool, where: string): Promise<boolean> {
  const c = await pool.connect();
  try {
    await c.query("BEGIN");
    await c.query("SELECT pg_advisory_xact_lock($1)", [LOCK_KEY]);
    const present = await tablesPresent(c);
    let created = false;
    if (present.length === 0) {
      await c.query(CREATE);
      await c.query("INSERT INTO lathe_schema (id, version, created_by) VALUES (1, $1, $2)", [SCHEMA_VERSION, `lathe ${VERSION}`]);
      created = true;
    } else if (!present.includes("lathe_schema")) {
      throw new ProxyError("ERR_CONFIG", `${where} holds tables named like lathe's (${present.join(", ")}) but no lathe_schema table: it is not a lathe database; lathe leaves it untouched: point shared.postgresql at another database`);
    } else {
      const row = (await c.query<{ version: number; created_by: string }>("SELECT version, created_by FROM lathe_schema WHERE id = 1")).rows[0];
      if (!row) throw new ProxyError("ERR_CONFIG", `${where}: lathe_schema is empty; lathe does not repair it: point shared.postgresql at another database`);
      if (row.version > SCHEMA_VERSION) {
        throw new ProxyError("ERR_CONFIG", `${where} has lathe schema version ${row.version} (created by ${row.created_by}), newer than lathe ${VERSION} understands (version ${SCHEMA_VERSION}): run a newer lathe on every instance`);
      }
      const missing = TABLES.filter((t) => !present.includes(t));
      if (missing.length) throw new ProxyError("ERR_CONFIG", `${where} has lathe schema version ${row.version} but lacks tables ${missing.join(", ")}; lathe does not repair it: restore them or point shared.postgresql at another database`);
    }
    const denied = await unwritable(c);
    if (denied.length) {
      throw new ProxyError("ERR_CONFIG", `${where}: the role lathe connects as may not write ${denied.join(", ")} (a read-only role?): GRANT SELECT, INSERT, UPDATE, DELETE on the tables and USAGE on the sequences to it`);
    }
    await c.query("COMMIT");
    return created;
  } catch (e) {
    await c.query("ROLLBACK").catch(() => undefined);
    throw e;
  } finally {
    c.release();
  }
}
