/**
 * The WARC directory, made ready before anything records: created, the dedup store opened (the
 * SQLite file in it, or the shared PostgreSQL), and the `.open` files a crash left behind
 * recovered (torn tails cut, indexes read again).
 */
import { mkdir } from "node:fs/promises";
import { join, resolve } from "node:path";
import type { Config } from "../config/schema.js";
import { ProxyError } from "../core/errors.js";
import type { Logger } from "../core/log.js";
import type { DedupIndex } from "../dedup/types.js";
import type { SharedDatabase } from "../postgres/database.js";
import { regenerateIndex } from "../index/live.js";
import { recoverOpenFiles } from "../warc/recovery.js";
import { openSharedState } from "./sharedState.js";

export interface WarcDirectory {
  /** The absolute WARC directory. */
  warcDir: string;
  dedupIndex: DedupIndex;
  /** The shared PostgreSQL, or null when standalone. */
  shared: SharedDatabase | null;
}

export async function openWarcDirectory(config: Config, log: Logger): Promise<WarcDirectory> {
  const warcDir = resolve(config.warc.dir);
  try {
    await mkdir(warcDir, { recursive: true });
  } catch (e) {
    throw new ProxyError("ERR_CONFIG", `cannot create the WARC directory ${warcDir} (warc.dir / --dir): ${(e as Error).message}`, e);
  }
  const { dedupIndex, shared } = await openSharedState(config, warcDir, log);
  // Recovery cuts torn tails off `.open` files; no dedup entry may point into what was cut.
  for (const r of await recoverOpenFiles(warcDir, log)) {
    const removed = await dedupIndex.removeFileTail(r.file, r.keptBytes);
    if (removed) log.warn("dedup-entries-removed", { file: r.file, removed });
    // Its CDXJ index is read again from what recovery kept (decisions.md §6).
    await regenerateIndex(join(warcDir, r.file), r.deleted === true).catch((e: unknown) => log.error("cdx-index-regeneration-failed", { file: r.file, error: (e as Error).message }));
  }
  return { warcDir, dedupIndex, shared };
}
