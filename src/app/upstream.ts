/** The connector to origins, guarded so lathe never connects to a denied address or to itself. */
import type { LookupFunction } from "node:net";
import type { Config } from "../config/schema.js";
import { type Connector, createConnector } from "../upstream/connector.js";
import { type Endpoint, createDestinationGuard } from "../upstream/destinations.js";

/** lathe's own listening sockets, for loop detection (README "Security"). */
export class OwnEndpoints {
  readonly #byName = new Map<string, Endpoint>();

  /** `name`: "proxy", "control" or `session:<id>`. */
  set(name: string, a: { address: string; port: number }): void {
    this.#byName.set(name, { address: a.address, port: a.port });
  }

  delete(name: string): void {
    this.#byName.delete(name);
  }

  list(): Endpoint[] {
    return [...this.#byName.values()];
  }
}

export function buildConnector(config: Config, own: OwnEndpoints, lookup?: LookupFunction): Connector {
  const guard = createDestinationGuard({
    denyAddresses: config.upstream.denyAddresses,
    ownEndpoints: () => own.list(),
    ...(lookup ? { lookup: lookup as unknown as typeof import("node:dns").lookup } : {}),
  });
  return createConnector({ ...config.upstream, guard });
}
