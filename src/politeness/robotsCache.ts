/**
 * robots.txt per origin (scheme, host, port: RFC 9309 §2.3 scopes a robots.txt to them), fetched
 * once however many requests ask at the same time, and kept as RFC 9309 §2.3.1 and §2.4 say:
 * - 2xx: its rules, for `cacheMs` (24 h: "SHOULD NOT use the cached version for more than 24 hours");
 * - 4xx but 429: no robots.txt, everything allowed, for `cacheMs`; also a 3xx still redirecting
 *   after the fetcher's five hops (§2.3.1.2: "MAY assume the robots.txt file is unavailable");
 * - 429, 5xx, unreachable: "the crawler MUST assume complete disallow" — unless an earlier copy
 *   is cached, which stays in use; either way it is asked again after `retryMs` (5 min), so a
 *   site that was down is not shut out for a day.
 * Only the first 500 KiB are parsed (RFC 9309 §2.5's minimum).
 */
import { RobotsRules } from "./robotsRules.js";

/** What fetching robots.txt gave (redirects already followed). */
export type RobotsResponse = { kind: "response"; status: number; body: string } | { kind: "unreachable"; error: string };

export type RobotsState =
  | { kind: "rules"; rules: RobotsRules }
  | { kind: "allow-all"; status: number }
  | { kind: "disallow-all"; why: string };

export interface RobotsEntry {
  url: string;
  state: RobotsState;
  fetchedAtMs: number;
  expiresAtMs: number;
}

export const ROBOTS_MAX_BYTES = 500 * 1024;
export const ROBOTS_CACHE_MS = 24 * 3600_000;
export const ROBOTS_RETRY_MS = 5 * 60_000;
/** Origins remembered at most (oldest forgotten first). */
const MAX_ORIGINS = 50_000;

export class RobotsCache {
  readonly #entries = new Map<string, RobotsEntry>();
  readonly #fetching = new Map<string, Promise<RobotsEntry>>();
  readonly #now: () => number;
  readonly #cacheMs: number;
  readonly #retryMs: number;

  constructor(o: { now?: () => number; cacheMs?: number; retryMs?: number } = {}) {
    this.#now = o.now ?? Date.now;
    this.#cacheMs = o.cacheMs ?? ROBOTS_CACHE_MS;
    this.#retryMs = o.retryMs ?? ROBOTS_RETRY_MS;
  }

  /**
   * The entry for `robotsUrl`, fetched with `fetch` when missing or expired. `fetch` reports an
   * unreachable site as a RobotsResponse; what it throws (the client's turn never came) is not
   * an answer of the site's, so it is passed on and not cached.
   */
  get(robotsUrl: string, fetch: () => Promise<RobotsResponse>): RobotsEntry | Promise<RobotsEntry> {
    const e = this.#entries.get(robotsUrl);
    if (e && e.expiresAtMs > this.#now()) return e;
    let p = this.#fetching.get(robotsUrl);
    if (!p) {
      p = fetch()
        .then((r) => this.#store(robotsUrl, r))
        .finally(() => this.#fetching.delete(robotsUrl));
      this.#fetching.set(robotsUrl, p);
    }
    return p;
  }

  /** The cached entries (for status pages), newest last. */
  entries(): RobotsEntry[] {
    return [...this.#entries.values()];
  }

  #store(url: string, r: RobotsResponse): RobotsEntry {
    const now = this.#now();
    const previous = this.#entries.get(url);
    const entry = this.#entryOf(url, r, now, previous);
    this.#entries.delete(url);
    this.#entries.set(url, entry);
    if (this.#entries.size > MAX_ORIGINS) this.#entries.delete(this.#entries.keys().next().value!);
    return entry;
  }

  #entryOf(url: string, r: RobotsResponse, now: number, previous: RobotsEntry | undefined): RobotsEntry {
    const keep = (state: RobotsState, ms: number): RobotsEntry => ({ url, state, fetchedAtMs: now, expiresAtMs: now + ms });
    if (r.kind === "response" && r.status >= 200 && r.status <= 299) return keep({ kind: "rules", rules: new RobotsRules(url, r.body.slice(0, ROBOTS_MAX_BYTES)) }, this.#cacheMs);
    if (r.kind === "response" && r.status >= 300 && r.status <= 499 && r.status !== 429) return keep({ kind: "allow-all", status: r.status }, this.#cacheMs);
    const why = r.kind === "unreachable" ? `robots.txt unreachable: ${r.error}` : `robots.txt answered ${r.status}`;
    // A copy that was good stays in use while the site has trouble (RFC 9309 §2.4).
    if (previous && previous.state.kind !== "disallow-all") return { ...previous, expiresAtMs: now + this.#retryMs };
    return keep({ kind: "disallow-all", why }, this.#retryMs);
  }
}
