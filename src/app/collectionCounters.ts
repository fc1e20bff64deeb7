/** Capture counters per collection, created on a collection's first capture. */
import type { SessionCounters } from "../archive/sessions.js";

const zero = (): SessionCounters => ({ captures: 0, revisits: 0, failed: 0, skipped: 0, bytes: 0 });

export class CollectionCounters {
  readonly #byName = new Map<string, SessionCounters>();

  /** The live counters of a collection (created on first use), for the proxy to count into. */
  forCollection = (name: string): SessionCounters => {
    let c = this.#byName.get(name);
    if (!c) this.#byName.set(name, (c = zero()));
    return c;
  };

  /** The counters to report: zeros for a collection that has had no capture yet (not created). */
  report(name: string): SessionCounters {
    return this.#byName.get(name) ?? zero();
  }
}
