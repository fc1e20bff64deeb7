/**
 * Leaf TLS contexts by SAN (mitm-certificates.md §3 "Cache"), in memory only. Minting is
 * synchronous, so `get` is too: an SNICallback or a CONNECT handler gets its context in the same
 * tick, and concurrent first contacts for one name share one signature because the second
 * caller finds the first one's entry already there.
 */
import { randomBytes } from "node:crypto";
import { createSecureContext, type SecureContext } from "node:tls";
import { leafName, mintLeaf, sanKey, type CaMaterial, type LeafKey } from "./leaf.js";

const DAY_MS = 86_400_000;

export interface LeafCacheOptions {
  ca: CaMaterial;
  leafKey: LeafKey;
  /** Sent after the leaf, so SPKI pins and chain-building clients see the CA (§3). */
  caCertPem: string;
  /** Bound on cached leaves, least recently used evicted. Default 10,000. */
  maxEntries?: number;
  /** Epoch milliseconds; injectable for tests. */
  now?: () => number;
}

interface Entry {
  context: SecureContext;
  notAfterMs: number;
  certPem: string;
}

export type SniCallback = (servername: string, cb: (err: Error | null, ctx?: SecureContext) => void) => void;

export class LeafCache {
  readonly #ca: CaMaterial;
  readonly #leafKey: LeafKey;
  readonly #caCertPem: string;
  readonly #max: number;
  readonly #now: () => number;
  // One session ticket key for every leaf context, random per process and never stored (§3).
  readonly #ticketKeys = randomBytes(48);
  // A Map iterates in insertion order; re-inserting on use makes the first key the LRU one.
  readonly #entries = new Map<string, Entry>();
  #minted = 0;

  constructor(opts: LeafCacheOptions) {
    const max = opts.maxEntries ?? 10_000;
    if (!Number.isInteger(max) || max < 1) throw new RangeError(`maxEntries must be a positive integer, got ${max}`);
    this.#ca = opts.ca;
    this.#leafKey = opts.leafKey;
    this.#caCertPem = opts.caCertPem;
    this.#max = max;
    this.#now = opts.now ?? Date.now;
  }

  /** Leaves signed since construction (tests and metrics). */
  get minted(): number {
    return this.#minted;
  }

  get size(): number {
    return this.#entries.size;
  }

  /** The context for a server name or IP literal; throws ProxyError for a name no leaf can carry. */
  get(name: string): SecureContext {
    return this.#entry(name).context;
  }

  /** The same as get: satisfies proxy/leafSource.ts's LeafSource. */
  contextFor(name: string): SecureContext {
    return this.get(name);
  }

  /** The leaf PEM a context presents (tests, diagnostics). */
  certPem(name: string): string {
    return this.#entry(name).certPem;
  }

  /** For `new tls.TLSSocket(socket, { isServer: true, secureContext, SNICallback })`. */
  readonly sniCallback: SniCallback = (servername, cb) => {
    let ctx: SecureContext;
    try {
      ctx = this.get(servername);
    } catch (e) {
      cb(e as Error);
      return;
    }
    cb(null, ctx);
  };

  #entry(name: string): Entry {
    const n = leafName(name);
    const key = sanKey(n); // "Example.COM", "example.com." and "example.com" share one leaf
    const now = this.#now();
    const hit = this.#entries.get(key);
    if (hit) this.#entries.delete(key);
    // Re-mint with less than a day left, so no client sees a leaf expire mid-crawl.
    const entry = hit && hit.notAfterMs - now >= DAY_MS ? hit : this.#mint(n, now);
    this.#entries.set(key, entry);
    if (this.#entries.size > this.#max) this.#entries.delete(this.#entries.keys().next().value!);
    return entry;
  }

  #mint(n: ReturnType<typeof leafName>, now: number): Entry {
    const leaf = mintLeaf(this.#ca, this.#leafKey, n, now);
    this.#minted++;
    const context = createSecureContext({
      key: this.#leafKey.privateKeyPem,
      cert: leaf.certPem + this.#caCertPem,
      minVersion: "TLSv1.2",
      ticketKeys: this.#ticketKeys,
    });
    return { context, notAfterMs: leaf.notAfterMs, certPem: leaf.certPem };
  }
}
