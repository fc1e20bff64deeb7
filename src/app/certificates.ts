/** The CA lathe signs with (loaded, or made on first start) and the cache of leaf certificates it issues per host. */
import { resolve } from "node:path";
import type { Config } from "../config/schema.js";
import type { Logger } from "../core/log.js";
import type { LeafSource } from "../proxy/leafSource.js";
import { LeafCache } from "../tls/leafCache.js";
import { type CaStore, loadOrCreateCa } from "../tls/store.js";

export interface Certificates {
  ca: CaStore;
  leaves: LeafCache;
  /** What the proxy's CONNECT handler asks for a host's TLS context. */
  leafSource: LeafSource;
}

export async function loadCertificates(config: Config, log: Logger): Promise<Certificates> {
  const ca = await loadOrCreateCa(resolve(config.certs.dir), log);
  const leaves = new LeafCache({ ca: ca.ca, leafKey: ca.leafKey, caCertPem: ca.caCertPem, maxEntries: config.certs.leafCacheSize });
  return { ca, leaves, leafSource: leaves };
}
