/**
 * Leaf TLS contexts by SAN (mitm-certificates.md §3 "Cache"), in memory only. Minting is
 * synchronous, so `get` is too: an SNICallback or a CONNECT handler gets its context in the same
 * tick, and concurrent first contacts for one name share one signature because the second
 * caller finds the first one's entry already there.
 */
import { randomBytes } from "node:crypto";
import { createSecureContext, type SecureContext } from "node:tls";
import { RecentMap } from "../core/recentMap.js";
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
  /**
   * Contexts kept ready with the leaf key loaded, so a first contact pays only for its
   * certificate (see #refill). Default 2; 0 turns the pool off.
   */
  spareContexts?: number;
}

/** The native half of a SecureContext: what createSecureContext itself calls (Node 12 to 22). */
interface NativeContext {
  setCert(pem: string): void;
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
  readonly #now: () => number;
  // One session ticket key for every leaf context, random per process and never stored (§3).
  readonly #ticketKeys = randomBytes(48);
  // Setting an entry again on use makes it the most recent; the least recent goes past the bound.
  readonly #entries: RecentMap<string, Entry>;
  #minted = 0;
  #spareTarget: number;
  readonly #spares: SecureContext[] = [];
  #refilling = false;

  constructor(opts: LeafCacheOptions) {
    const max = opts.maxEntries ?? 10_000;
    if (!Number.isInteger(max) || max < 1) throw new RangeError(`maxEntries must be a positive integer, got ${max}`);
    this.#entries = new RecentMap(max);
    this.#ca = opts.ca;
    this.#leafKey = opts.leafKey;
    this.#caCertPem = opts.caCertPem;
    this.#now = opts.now ?? Date.now;
    this.#spareTarget = Math.max(0, Math.floor(opts.spareContexts ?? 2));
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
    // Re-mint with less than a day left, so no client sees a leaf expire mid-crawl.
    const entry = hit && hit.notAfterMs - now >= DAY_MS ? hit : this.#mint(n, now);
    this.#entries.set(key, entry);
    return entry;
  }

  #mint(n: ReturnType<typeof leafName>, now: number): Entry {
    const leaf = mintLeaf(this.#ca, this.#leafKey, n, now);
    this.#minted++;
    const cert = leaf.certPem + this.#caCertPem;
    const spare = this.#spares.pop();
    let context: SecureContext;
    if (spare) {
      (spare.context as NativeContext).setCert(cert);
      context = spare;
    } else {
      context = createSecureContext({ ...this.#contextOptions(), cert });
    }
    this.#refill();
    return { context, notAfterMs: leaf.notAfterMs, certPem: leaf.certPem };
  }

  #contextOptions() {
    return { key: this.#leafKey.privateKeyPem, minVersion: "TLSv1.2" as const, ticketKeys: this.#ticketKeys };
  }

  /**
   * Half of a leaf context's cost is not the leaf: OpenSSL building the SSL_CTX and decoding the
   * PEM key (~0.6 ms of ~1.2 ms on the reference machine), identical for every leaf. It is done
   * ahead, after the handshake that used the last spare has been answered, so a first contact
   * waits only for its certificate. Setting the certificate after the key is what OpenSSL
   * allows when they match (SSL_CTX_use_certificate keeps a matching key); they always do here.
   */
  #refill(): void {
    if (this.#refilling || this.#spares.length >= this.#spareTarget) return;
    this.#refilling = true;
    setImmediate(() => {
      this.#refilling = false;
      let spare: SecureContext;
      try {
        spare = createSecureContext(this.#contextOptions());
      } catch {
        return; // the same options fail again in #mint, which reports it
      }
      // A Node without the native setCert gets no spares (and builds none again), and #mint
      // builds whole contexts.
      if (typeof (spare.context as Partial<NativeContext> | undefined)?.setCert !== "function") {
        this.#spareTarget = 0;
        return;
      }
      this.#spares.push(spare);
      this.#refill();
    }).unref();
  }
}

