import type { SecureContext } from "node:tls";

/** What the CONNECT handler needs from tls/ (tls/leafCache.ts's LeafCache is one). */
export interface LeafSource {
  /** A context presenting a leaf for the name, for a TLS socket made in the same tick. */
  contextFor(name: string): SecureContext;
  /** Mint (or touch) the name's leaf ahead of the handshake. */
  prepare(name: string): void;
  /** The SNICallback of a socket made with `contextFor(connectHost)`. */
  sniCallbackFor(connectHost: string): (servername: string, cb: (err: Error | null, ctx?: SecureContext) => void) => void;
}
