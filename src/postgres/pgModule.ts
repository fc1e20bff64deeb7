import { createRequire } from "node:module";
import type pg from "pg";

/**
 * The `pg` driver, loaded on first use: most instances have no shared PostgreSQL, and loading the
 * driver costs every `lathe serve` a few MB of resident memory for nothing (#25). `pg` is
 * CommonJS, so a synchronous require keeps createPool and its callers synchronous.
 */
let loaded: typeof pg | undefined;

export function pgModule(): typeof pg {
  loaded ??= createRequire(import.meta.url)("pg") as typeof pg;
  return loaded;
}
