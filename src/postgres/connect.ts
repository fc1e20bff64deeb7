/**
 * Connecting to the shared PostgreSQL: a pool with short timeouts (a lathe that cannot reach its
 * database must notice within seconds, not hang its exchanges), and the errors a user can act on
 * turned into messages that say what to do. The password never appears in them.
 */
import type pg from "pg";
import { pgModule } from "./pgModule.js";
import { ProxyError, systemCode } from "../core/errors.js";
import type { PostgresUrl } from "./url.js";

export interface PoolOptions {
  /** Connections this instance keeps at most (default 12). */
  max?: number;
  /** How long a new connection may take (default 5000 ms). */
  connectTimeoutMs?: number;
  /** How long one statement may run before the server cancels it (default 10000 ms). */
  statementTimeoutMs?: number;
  /** Name shown in pg_stat_activity. */
  applicationName?: string;
}

export function createPool(u: PostgresUrl, o: PoolOptions = {}): pg.Pool {
  const pool = new (pgModule().Pool)({
    connectionString: u.url,
    max: o.max ?? 12,
    connectionTimeoutMillis: o.connectTimeoutMs ?? 5000,
    statement_timeout: o.statementTimeoutMs ?? 10_000,
    idleTimeoutMillis: 30_000,
    application_name: o.applicationName ?? "lathe",
    keepAlive: true,
  });
  // An idle connection that the server drops (restart, network) emits here; without a listener
  // the process would exit. The next query gets a fresh connection or a clear error.
  pool.on("error", () => undefined);
  return pool;
}

/** PostgreSQL's SQLSTATE of a driver error, if any. */
export function sqlState(e: unknown): string | undefined {
  const c = systemCode(e);
  return c && /^[0-9A-Z]{5}$/.test(c) ? c : undefined;
}

/** Errors that mean "the server is not there right now" (as opposed to a bad statement). */
export function isConnectionError(e: unknown): boolean {
  const code = systemCode(e);
  if (code && /^(ECONNREFUSED|ECONNRESET|EPIPE|ETIMEDOUT|EHOSTUNREACH|ENETUNREACH|ENOTFOUND|EAI_AGAIN|ENOENT)$/.test(code)) return true;
  const state = sqlState(e);
  // 08: connection exception; 57P01-57P03: admin shutdown, crash shutdown, cannot connect now
  if (state && (state.startsWith("08") || /^57P0[123]$/.test(state))) return true;
  const msg = e instanceof Error ? e.message : String(e);
  return /Connection terminated|timeout exceeded when trying to connect|Client has encountered a connection error|Connection ended unexpectedly/i.test(msg);
}

/** A start-up failure as a ProxyError("ERR_CONFIG") that says what to do. */
/** `from` names where the URL was set (a setting, a variable, a flag), for the message. */
export function describeStartupError(u: PostgresUrl, e: unknown, from = "shared.postgresql / LATHE_POSTGRESQL / --postgresql"): ProxyError {
  if (e instanceof ProxyError) return e;
  const where = `PostgreSQL at ${u.redacted}`;
  const state = sqlState(e);
  const msg = (e instanceof Error ? e.message : String(e)).split(u.url).join(u.redacted);
  let what: string;
  if (state === "28P01" || state === "28000") what = `authentication failed for user ${JSON.stringify(u.user)} (${msg}): check the user and password in ${from}`;
  else if (state === "3D000") what = `database ${JSON.stringify(u.database)} does not exist: create it first (createdb ${u.database}, or CREATE DATABASE "${u.database}"), owned by the user lathe connects as`;
  else if (state === "42501") what = `user ${JSON.stringify(u.user)} may not create or write lathe's tables (${msg}): grant it CREATE on the database's public schema, or let the owner start lathe once to create them and GRANT SELECT, INSERT, UPDATE, DELETE on them`;
  else if (state === "53300") what = `the server has no connection left (${msg}): raise max_connections or run fewer instances`;
  else if (isConnectionError(e)) what = `is unreachable (${msg}): start the server, or fix the host and port`;
  else what = `cannot be used: ${msg}`;
  return new ProxyError("ERR_CONFIG", `${where} ${what}`, e);
}
