import type { Config } from "../config/schema.js";
import type { DedupPolicy } from "../archive/dedup.js";
import { type MimeTypeFilter, type WarcproxMeta, parseWarcproxMeta } from "../control/warcproxMeta.js";

/** What one request asks of the archive: where it goes, how it is deduplicated, what is kept. */
export interface RequestPolicy {
  series: string;
  noArchive: boolean;
  dedupPolicy: DedupPolicy;
  dedupOk: boolean;
  mimeTypeFilters: MimeTypeFilter[];
  acceptCaptureMetadata: boolean;
  meta: WarcproxMeta | null;
}

export function headerValues(raw: string[], name: string): string[] {
  const out: string[] = [];
  for (let i = 0; i < raw.length; i += 2) if (raw[i]!.toLowerCase() === name) out.push(raw[i + 1]!);
  return out;
}

/** From the configuration and the request's `Warcprox-Meta`; throws WarcproxMetaError (→ 400). */
export function requestPolicy(config: Config, rawHeaders: string[]): RequestPolicy {
  const meta = parseWarcproxMeta(headerValues(rawHeaders, "warcprox-meta"));
  const dedupPolicy: DedupPolicy = {
    ...config.dedup,
    ...(meta?.dedupBuckets ? { buckets: meta.dedupBuckets } : {}),
    ...(meta?.lathe.dedupPolicy ? { policy: meta.lathe.dedupPolicy } : {}),
  };
  return {
    series: meta?.warcPrefix ?? config.warc.prefix,
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
