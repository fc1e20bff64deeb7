/**
 * The shared PostgreSQL as the rest of lathe sees it: a pool, whether the server is reachable
 * right now, and a way to be told when it is back.
 *
 * Recording never waits on a server that is away: after a connection error `run` fails at once
 * (ProxyError "ERR_SHARED_UNAVAILABLE" naming the store) instead of each exchange waiting out a
 * connect timeout, while one probe per second looks for the server. When a probe succeeds, the
 * `onUp` listeners run (the outbox drains, stats catch up) before `up` turns true again, so
 * what was queued lands before new writes.
 */
import type pg from "pg";
import { ProxyError } from "../core/errors.js";
import type { Logger } from "../core/log.js";
import { createPool, describeStartupError, isConnectionError, type PoolOptions } from "./connect.js";
import { ensureSchema } from "./schema.js";
import { parsePostgresUrl, type PostgresUrl } from "./url.js";

export interface SharedDatabaseOptions extends PoolOptions {
  /** This instance's id (registry, claims, reservations). */
  instanceId: string;
  log: Logger;
  /** How often to look for a server that went away (default 1000 ms). */
  probeMs?: number;
}

export class SharedDatabase {
  readonly pool: pg.Pool;
  readonly url: PostgresUrl;
  /** Set once the proxy port is known (main.ts), before any traffic. */
  instanceId: string;
  readonly #log: Logger;
  readonly #probeMs: number;
  readonly #listeners: Array<() => Promise<void>> = [];
  #up = true;
  #downReason: string | null = null;
  #downSince: number | null = null;
  #probe: NodeJS.Timeout | null = null;
  #closed = false;

  constructor(url: PostgresUrl, pool: pg.Pool, o: SharedDatabaseOptions) {
    this.url = url;
    this.pool = pool;
    this.instanceId = o.instanceId;
    this.#log = o.log;
    this.#probeMs = o.probeMs ?? 1000;
  }

  /** The server answered the last time we asked (or no failure since start). */
  get up(): boolean {
    return this.#up;
  }

  /** Why the server is considered away, or null. */
  get downReason(): string | null {
    return this.#downReason;
  }

  /** Since when (ms since the epoch), or null. */
  get downSince(): number | null {
    return this.#downSince;
  }

  /** How the store names itself in answers and logs (no password). */
  get name(): string {
    return `PostgreSQL ${this.url.host}:${this.url.port}/${this.url.database}`;
  }

  /** Run `fn` with the pool. Fails at once while the server is away; a connection error marks it away. */
  async run<T>(fn: (pool: pg.Pool) => Promise<T>): Promise<T> {
    if (!this.#up) throw this.unavailable();
    try {
      return await fn(this.pool);
    } catch (e) {
      if (isConnectionError(e) && !this.#poolExhausted(e)) {
        this.markDown(e);
        throw this.unavailable(e);
      }
      throw e;
    }
  }

  /**
   * The pool's "timeout exceeded when trying to connect" also means that every connection was
   * busy for the whole timeout: the server is there, only slow; that must not count as away.
   */
  #poolExhausted(e: unknown): boolean {
    return /timeout exceeded when trying to connect/i.test(e instanceof Error ? e.message : "") && this.pool.totalCount >= (this.pool.options.max ?? 10) && this.pool.idleCount === 0;
  }

  /** Run `fn` in one transaction on one connection (BEGIN … COMMIT, ROLLBACK on error). */
  transaction<T>(fn: (c: pg.PoolClient) => Promise<T>): Promise<T> {
    return this.run(async (pool) => {
      const c = await pool.connect();
      let broken = false;
      try {
        await c.query("BEGIN");
        const out = await fn(c);
        await c.query("COMMIT");
        return out;
      } catch (e) {
        broken = isConnectionError(e);
        if (!broken) await c.query("ROLLBACK").catch(() => (broken = true));
        throw e;
      } finally {
        c.release(broken);
      }
    });
  }

  /** The error callers get while the server is away. */
  unavailable(cause?: unknown): ProxyError {
    return new ProxyError("ERR_SHARED_UNAVAILABLE", `the shared store (${this.name}) is unreachable: ${this.#downReason ?? "connection lost"}`, cause);
  }

  /** Run `listener` each time the server comes back, before new work reaches it. */
  onUp(listener: () => Promise<void>): void {
    this.#listeners.push(listener);
  }

  markDown(e: unknown): void {
    if (this.#closed) return;
    const reason = (e instanceof Error ? e.message : String(e)).split(this.url.url).join(this.url.redacted);
    if (this.#up) {
      this.#log.error("shared-store-unreachable", { store: this.name, error: reason });
      this.#downSince = Date.now();
    }
    this.#up = false;
    this.#downReason = reason;
    this.#scheduleProbe();
  }

  #scheduleProbe(): void {
    if (this.#probe || this.#closed) return;
    this.#probe = setTimeout(() => {
      this.#probe = null;
      void this.#tryUp();
    }, this.#probeMs);
    this.#probe.unref();
  }

  async #tryUp(): Promise<void> {
    try {
      await this.pool.query("SELECT 1");
      for (const l of this.#listeners) await l();
    } catch (e) {
      this.#downReason = (e instanceof Error ? e.message : String(e)).split(this.url.url).join(this.url.redacted);
      this.#scheduleProbe();
      return;
    }
    this.#log.info("shared-store-back", { store: this.name, downMs: this.#downSince ? Date.now() - this.#downSince : 0 });
    this.#up = true;
    this.#downReason = null;
    this.#downSince = null;
  }

  async close(): Promise<void> {
    this.#closed = true;
    if (this.#probe) clearTimeout(this.#probe);
    await this.pool.end().catch(() => undefined);
  }
}

/**
 * Connect, check (or create) the schema, and return the shared database. Throws
 * ProxyError("ERR_CONFIG") saying what to do when the server is unreachable, the login fails,
 * the database is missing or not lathe's, the schema is newer, or the role cannot write.
 */
export async function openSharedDatabase(rawUrl: string, from: string, o: SharedDatabaseOptions): Promise<SharedDatabase> {
  const url = parsePostgresUrl(rawUrl, from);
  const pool = createPool(url, o);
  try {
    const created = await ensureSchema(pool, `PostgreSQL at ${url.redacted}`);
    o.log.info("shared-store-open", { store: url.redacted, created, instance: o.instanceId });
  } catch (e) {
    await pool.end().catch(() => undefined);
    throw describeStartupError(url, e, from);
  }
  return new SharedDatabase(url, pool, o);
}
