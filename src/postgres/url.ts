/**
 * The PostgreSQL connection URL of `shared.postgresql` (`postgresql://user:password@host:port/db`):
 * checked before anything connects, so a typo is named at start-up, and printed only with its
 * password masked (logs, `/status`, the live page and error messages never show it).
 */
import { ProxyError } from "../core/errors.js";

export interface PostgresUrl {
  /** As given; hand it to the driver, never to a log. */
  readonly url: string;
  /** The same URL with the password replaced by `***`. */
  readonly redacted: string;
  readonly host: string;
  readonly port: number;
  readonly database: string;
  readonly user: string;
}

/** `url` with any password masked; for strings that may not even parse. */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = "***";
    return u.toString();
  } catch {
    return url.replace(/(\/\/[^:/@]*):[^@/]*@/, "$1:***@");
  }
}

/** Parse and check a connection URL; ProxyError("ERR_CONFIG") saying what is wrong and where it came from. */
export function parsePostgresUrl(url: string, from: string): PostgresUrl {
  const bad = (why: string) =>
    new ProxyError("ERR_CONFIG", `${from} ${JSON.stringify(redactUrl(url))} is not a PostgreSQL connection URL: ${why} (expected postgresql://user:password@host:port/database)`);
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw bad("it does not parse as a URL");
  }
  if (u.protocol !== "postgresql:" && u.protocol !== "postgres:") throw bad(`the scheme is ${u.protocol.replace(/:$/, "")}, not postgresql`);
  const socketHost = u.searchParams.get("host");
  if (!u.hostname && !socketHost) throw bad("it names no host");
  const database = decodeURIComponent(u.pathname.replace(/^\//, ""));
  if (!database) throw bad("it names no database (the path after the host)");
  if (database.includes("/")) throw bad("the database name contains a /");
  const port = u.port ? Number(u.port) : 5432;
  const user = decodeURIComponent(u.username);
  return { url, redacted: redactUrl(url), host: u.hostname || socketHost!, port, database, user };
}
