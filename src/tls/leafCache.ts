/**
 * Leaf certificates by SAN (mitm-certificates.md §3 "Cache"), in memory only, and the TLS contexts
 * that present them. Minting is synchronous, so `get` is too: an SNICallback or a CONNECT handler
 * gets its context in the same tick, and concurrent first contacts for one name share one
 * signature because the second caller finds the first one's entry already there.
 *
 * Contexts (#25, first contact). Building an OpenSSL context costs ~0.9 ms here (SSL_CTX_new and
 * decoding the PEM key), setting a certificate on one ~0.45 ms, and a first contact used to pay
 * both, ~2.2 ms of CPU with the mint. Now one shared context, holding the leaf key and the CA as
 * the chain, serves every name's first contacts: `get` sets the name's leaf on it just before the
 * caller makes its TLS socket, and OpenSSL copies a context's certificate into each connection
 * when the connection is made (SSL_new; SSL_CTX_use_certificate(3): "changes applied to ctx do not
 * propagate to already existing SSL objects"), so the next name's leaf cannot reach an earlier
 * connection. Setting the leaf alone keeps the chain the context was built with (a leaf plus the
 * CA would add the CA again each time). A name contacted again gets a context of its own, built
 * after that handshake, so hosts a client keeps reconnecting to cost nothing more per connection.
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
}

/** The native half of a SecureContext: what createSecureContext itself calls (Node 12 to 22). */
interface NativeContext {
  setCert(pem: string): void;
}

interface Entry {
  /** The leaf alone (PEM). */
  certPem: string;
  notAfterMs: number;
  /** Connections made with this leaf (TLS sockets asked for; SNI for the CONNECT host not counted). */
  contacts: number;
  /** The leaf's own context, once the name was contacted again; until then the shared one. */
  context: SecureContext | null;
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
  /** The context first contacts share, and the leaf it presents now (see the header). */
  #shared: { context: SecureContext; holds: Entry } | null = null;
  /** False on a Node without the native setCert: every leaf gets its own context then. */
  #canShare = true;

  constructor(opts: LeafCacheOptions) {
    const max = opts.maxEntries ?? 10_000;
    if (!Number.isInteger(max) || max < 1) throw new RangeError(`maxEntries must be a positive integer, got ${max}`);
    this.#entries = new RecentMap(max);
    this.#ca = opts.ca;
    this.#leafKey = opts.leafKey;
    this.#caCertPem = opts.caCertPem;
    this.#now = opts.now ?? Date.now;
  }

  /** Leaves signed since construction (tests and metrics). */
  get minted(): number {
    return this.#minted;
  }

  get size(): number {
    return this.#entries.size;
  }

  /**
   * The context for a server name or IP literal, to be given to a TLS socket made at once (in
   * this tick: the shared context presents this name's leaf only until the next call). Throws
   * ProxyError for a name no leaf can carry.
   */
  get(name: string): SecureContext {
    const e = this.#entry(name);
    if (e.context) return e.context;
    e.contacts++;
    if (e.contacts === 2 || !this.#canShare) this.#buildOwn(e);
    return e.context ?? this.#sharedFor(e);
  }

  /** The same as get: satisfies proxy/leafSource.ts's LeafSource. */
  contextFor(name: string): SecureContext {
    return this.get(name);
  }

  /** Mint (or touch) a name's leaf ahead of its handshake, without making a connection's context. */
  prepare(name: string): void {
    this.#entry(name);
  }

  /** The leaf PEM a context presents (tests, diagnostics). */
  certPem(name: string): string {
    return this.#entry(name).certPem;
  }

  /** For `new tls.TLSSocket(socket, { isServer: true, secureContext, SNICallback })`. */
  readonly sniCallback: SniCallback = this.sniCallbackFor(null);

  /**
   * An SNICallback for a socket made with `get(connectHost)`: an SNI naming that host keeps the
   * leaf the socket already has (Node then switches no context), any other name gets its own.
   */
  sniCallbackFor(connectHost: string | null): SniCallback {
    let connectKey: string | null = null;
    return (servername, cb) => {
      let ctx: SecureContext | undefined;
      try {
        const n = leafName(servername);
        connectKey ??= connectHost === null ? "" : sanKey(leafName(connectHost));
        if (sanKey(n) !== connectKey) ctx = this.get(servername);
      } catch (e) {
        cb(e as Error);
        return;
      }
      cb(null, ctx);
    };
  }

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
    return { certPem: leaf.certPem, notAfterMs: leaf.notAfterMs, contacts: 0, context: null };
  }

  /** A new context presenting `e`'s leaf, with the CA after it as the chain. */
  #contextPresenting(e: Entry): SecureContext {
    return createSecureContext({ key: this.#leafKey.privateKeyPem, cert: e.certPem + this.#caCertPem, minVersion: "TLSv1.2", ticketKeys: this.#ticketKeys });
  }

  /** The shared context, presenting `e`'s leaf (set only when it presents another). */
  #sharedFor(e: Entry): SecureContext {
    if (!this.#shared) {
      const context = this.#contextPresenting(e);
      if (typeof (context.context as Partial<NativeContext> | undefined)?.setCert !== "function") {
        this.#canShare = false;
        return (e.context = context);
      }
      this.#shared = { context, holds: e };
    } else if (this.#shared.holds !== e) {
      (this.#shared.context.context as NativeContext).setCert(e.certPem);
      this.#shared.holds = e;
    }
    return this.#shared.context;
  }

  /**
   * A context of the leaf's own for a name contacted again. Built after the handshake that asked
   * (that one still uses the shared context), except where there is no shared context.
   */
  #buildOwn(e: Entry): void {
    const build = () => {
      e.context ??= this.#contextPresenting(e);
    };
    if (!this.#canShare) build();
    else
      setImmediate(() => {
        try {
          build();
        } catch {
          // the same options fail in #sharedFor, which reports it on the next contact
        }
      }).unref();
  }
}
