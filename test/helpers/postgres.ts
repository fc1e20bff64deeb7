/**
 * A private PostgreSQL server for one test file: `startPostgres()` (initdb + pg_ctl into a temp
 * dir, 127.0.0.1 on a free port, durability off), `destroy()` in afterAll. The harness itself is
 * scripts/lib/postgres.mjs, shared with scripts/bench-postgres.mjs; this is the tests' typed door.
 */
export { ADMIN_PASSWORD, ADMIN_USER, freePort, postgresBinDir, startPostgres, type PostgresServer, type StartOptions } from "../../scripts/lib/postgres.mjs";
