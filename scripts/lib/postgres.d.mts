// Types of postgres.mjs (the private PostgreSQL server the tests and benchmarks start).
import type pg from "pg";

export declare const ADMIN_USER: string;
export declare const ADMIN_PASSWORD: string;

export interface PostgresServer {
  readonly port: number;
  readonly dataDir: string;
  /** `postgresql://lathe_admin:…@127.0.0.1:port/<db>` */
  url(db?: string, user?: string, password?: string): string;
  /** Run SQL as the admin in `db` (default `postgres`); returns the rows. */
  query<T extends pg.QueryResultRow = pg.QueryResultRow>(sql: string, params?: unknown[], db?: string): Promise<T[]>;
  /** A new empty database; returns its URL (admin credentials). */
  createDatabase(name?: string): Promise<string>;
  /** Stop the server (fast shutdown: clients are disconnected). */
  stop(): void;
  /** Start it again on the same port with the same data. */
  start(): void;
  /** Stop it and remove its files. */
  destroy(): void;
}

export interface StartOptions {
  /** More server settings (name → value), e.g. { shared_buffers: "1GB" }. */
  settings?: Record<string, string | number>;
}

/** The directory holding initdb and pg_ctl: the newest /usr/lib/postgresql/<version>/bin. */
export declare function postgresBinDir(): string;
export declare function freePort(): Promise<number>;
export declare function startPostgres(options?: StartOptions): Promise<PostgresServer>;
