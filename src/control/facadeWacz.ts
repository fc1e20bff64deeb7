/**
 * The WACZ downloads of the control API (issue #23): a collection's closed WARC files, or a
 * closed session's, packaged on request. The package is prepared (inputs checked, indexed, its
 * size known) before the answer starts, so an unknown name, a session still open or a damaged
 * file is an error answer, and a good package goes out with its Content-Length.
 */
import { ProxyError } from "../core/errors.js";
import type { CollectionRegistry } from "../archive/collections.js";
import type { SessionRegistry } from "../archive/sessions.js";
import { prepareWacz } from "../wacz/packager.js";
import { collectionSource, sessionSource, type PackageSource } from "../wacz/sources.js";
import { WaczError } from "../wacz/waczError.js";
import type { WaczDownload } from "./facade.js";

export interface WaczFacadeDeps {
  warcDir: string;
  collections: CollectionRegistry;
  sessions: SessionRegistry;
}

async function download(src: PackageSource, filename: string, signal?: AbortSignal): Promise<WaczDownload> {
  const prepared = await prepareWacz({ files: src.files, pages: src.pages, title: src.title, ownIndexes: src.ownIndexes }, undefined, signal);
  return { prepared, filename, leftOut: src.leftOut };
}

export function waczFacade(d: WaczFacadeDeps) {
  return {
    async collectionWacz(name: string, signal?: AbortSignal): Promise<WaczDownload> {
      if (!d.collections.get(name)) throw new ProxyError("ERR_DENIED", `no collection ${JSON.stringify(name)}`);
      return download(collectionSource(d.warcDir, name), `${name}.wacz`, signal);
    },
    async sessionWacz(id: string, signal?: AbortSignal): Promise<WaczDownload> {
      if (d.sessions.get(id)) throw new WaczError("conflict", `session ${id} is still open: close it first (POST /api/v1/sessions/${encodeURIComponent(id)}/close)`);
      const s = d.sessions.logged(id);
      if (!s) throw new ProxyError("ERR_DENIED", `no session ${JSON.stringify(id)}`);
      return download(sessionSource(d.warcDir, s), `${id}.wacz`, signal);
    },
  };
}
