import type { Config } from "../config/schema.js";
import type { DedupPolicy } from "../archive/dedup.js";
import type { Collection, CollectionRegistry } from "../archive/collections.js";
import type { Session } from "../archive/sessions.js";
import { headerValues } from "./headers.js";
import { type MimeTypeFilter, type WarcproxMeta, WarcproxMetaError, parseWarcproxMeta } from "../warcprox/warcproxMeta.js";

/** What one request asks of the archive: where it goes, how it is deduplicated, what is kept. */
export interface RequestPolicy {
  collection: Collection;
  session: Session | null;
  series: string;
  noArchive: boolean;
  dedupPolicy: DedupPolicy;
  dedupOk: boolean;
  mimeTypeFilters: MimeTypeFilter[];
  acceptCaptureMetadata: boolean;
  meta: WarcproxMeta | null;
}

/**
 * The collection of a request: its session (port or credentials) > Warcprox-Meta
 * `lathe.collection` > `default`; its series: `warc-prefix` if given, else the collection's
 * prefix (decisions.md §4). Throws WarcproxMetaError (→ 400).
 */
export function requestPolicy(config: Config, collections: CollectionRegistry, rawHeaders: string[], session: Session | null): RequestPolicy {
  const meta = parseWarcproxMeta(headerValues(rawHeaders, "warcprox-meta"));
  const name = session?.collection ?? meta?.lathe.collection ?? "default";
  const collection = collections.get(name);
  if (!collection) throw new WarcproxMetaError("lathe", `lathe.collection: no collection ${JSON.stringify(name)}; create it with POST /api/v1/collections`);
  const dedupMode = meta?.lathe.dedupPolicy ? meta.lathe.dedupPolicy : collection.dedup.policy;
  const dedupPolicy = dedupPolicyOf(config.dedup, dedupMode, meta?.dedupBuckets ? meta.dedupBuckets : collection.dedup.buckets);
  return {
    collection,
    session,
    series: meta?.warcPrefix ?? collection.prefix,
    noArchive: meta?.noArchive ?? false,
    dedupPolicy,
    dedupOk: meta?.dedupOk ?? true,
    mimeTypeFilters: meta?.mimeTypeFilters ?? [],
    acceptCaptureMetadata: meta?.acceptCaptureMetadata ?? false,
    meta,
  };
}

/** mime-type-filters (warcprox MimeTypeFilter): REJECT drops matches; LIMIT keeps only matches. */
export function filteredOut(filters: MimeTypeFilter[], contentType: string | undefined): boolean {
  if (filters.length === 0) return false;
  if (filters.some((f) => f.type === "REJECT" && contentType !== undefined && f.regex.test(contentType))) return true;
  const limits = filters.filter((f) => f.type === "LIMIT");
  return limits.length > 0 && (contentType === undefined || !limits.some((f) => f.regex.test(contentType)));
}

/** The settings with this request's policy and buckets, as one literal (test/structure.test.ts: no properties after a spread here). */
function dedupPolicyOf(d: DedupPolicy, policy: DedupPolicy["policy"], buckets: DedupPolicy["buckets"]): DedupPolicy {
  return { policy, dbPath: d.dbPath, buckets, minBytes: d.minBytes, statuses: d.statuses, inflightWaitMs: d.inflightWaitMs, serverNotModified: d.serverNotModified };
}
