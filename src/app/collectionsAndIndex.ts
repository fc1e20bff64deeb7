/** The collections (persisted next to the WARCs), the open recording sessions, and the collections' CDXJ indexes. */
import { join } from "node:path";
import type { Config } from "../config/schema.js";
import type { Logger } from "../core/log.js";
import { CollectionRegistry, STATE_FILE } from "../archive/collections.js";
import { SessionLog } from "../archive/sessionLog.js";
import { SessionRegistry } from "../archive/sessions.js";
import { CdxService } from "../index/service.js";

export interface CollectionsAndIndex {
  collections: CollectionRegistry;
  sessions: SessionRegistry;
  /** The collections' CDXJ indexes (GET /cdx), started. */
  cdx: CdxService;
}

export async function openCollectionsAndIndex(config: Config, warcDir: string, log: Logger): Promise<CollectionsAndIndex> {
  const state = join(warcDir, STATE_FILE);
  const collections = new CollectionRegistry(state, config);
  const sessions = new SessionRegistry(new SessionLog(state));
  const cdx = new CdxService({ warcDir, log, collections: () => collections.list().map((c) => c.name) });
  await cdx.start();
  return { collections, sessions, cdx };
}
