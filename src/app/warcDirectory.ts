/**
 * The WARC directory, made ready before anything records: created, its dedup store opened, and
 * the `.open` files a crash left behind recovered (torn tails cut, indexes read again).
 */
import { mkdir } from "node:fs/promises";
import { join, resolve } from "node:path";
import type { Config } from "../config/schema.js";
import { ProxyError } from "../core/errors.js";
import type { Logger } from "../core/log.js";
import { openSqliteDedupStore } from "../dedup/sqliteStore.js";
import type { DedupStore } from "../dedup/types.js";
import { regenerateIndex } from "../index/live.js";
import { recoverOpenFiles } from "../warc/recovery.js";

export interface WarcDirectory {
  /** The absolute WARC directory. */
  warcDir: string;
  dedupStore: DedupStore;
}

export async function openWarcDirectory(config: Config, log: Logger): Promise<WarcDirectory> {
  const warcDir = resolve(config.warc.dir);
  try {
    await mkdir(warcDir, { recursive: true });
  } catch (e) {
    throw new ProxyError("ERR_CONFIG", `cannot create the WARC directory ${warcDir} (warc.dir / --dir): ${(e as Error).message}`, e);
  }
  const dedupStore = openSqliteDedupStore(config.dedup.dbPath ? resolve(config.dedup.dbPath) : join(warcDir, "lathe-dedup.sqlite3"), { log });
  // Recovery cuts torn tails off `.open` files; no dedup entry may point into what was cut.
  for (const r of await recoverOpenFiles(warcDir, log)) {
    const removed = dedupStore.removeFileTail(r.file, r.keptBytes);
    if (removed) log.warn("dedup-entries-removed", { file: r.file, removed });
    // Its CDXJ index is read again from what recovery kept (decisions.md §6).
    await regenerateIndex(join(warcDir, r.file), r.deleted === true).catch((e: unknown) => log.error("cdx-index-regeneration-failed", { file: r.file, error: (e as Error).message }));
  }
  return { warcDir, dedupStore };
}
