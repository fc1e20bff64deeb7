import type { SecureContext } from "node:tls";

/** What the CONNECT handler needs from tls/: a ready context presenting a leaf for a name. */
export interface LeafSource {
  contextFor(name: string): SecureContext;
}
