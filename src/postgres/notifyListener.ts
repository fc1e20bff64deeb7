/**
 * LISTEN on one channel of the shared PostgreSQL, on a connection of its own (a pooled connection
 * would lose the subscription when handed back). The connection is opened again after it breaks
 * (`ensure`, called periodically), never while the server is known to be away; each time it is
 * (re)established the listener is called once, as notifications sent meanwhile were missed.
 */
import type pg from "pg";
import { pgModule } from "./pgModule.js";
import type { SharedDatabase } from "./database.js";

export class NotifyListener {
  readonly #db: SharedDatabase;
  readonly #channel: string;
  readonly #onNotify: () => void;
  #client: pg.Client | null = null;
  #connecting = false;
  #closed = false;

  /** `channel` must be a plain identifier (LISTEN takes no parameter). */
  constructor(db: SharedDatabase, channel: string, onNotify: () => void) {
    if (!/^[a-z_][a-z0-9_]*$/.test(channel)) throw new Error(`NotifyListener: channel ${JSON.stringify(channel)} is not a plain identifier`);
    this.#db = db;
    this.#channel = channel;
    this.#onNotify = onNotify;
  }

  /** True while subscribed. */
  get listening(): boolean {
    return this.#client !== null;
  }

  /** Subscribe unless subscribed, subscribing, closed, or the server is away. */
  ensure(): void {
    if (this.#client || this.#connecting || this.#closed || !this.#db.up) return;
    this.#connecting = true;
    void this.#connect().finally(() => (this.#connecting = false));
  }

  async #connect(): Promise<void> {
    const client = new (pgModule().Client)({ connectionString: this.#db.url.url, connectionTimeoutMillis: 5000, application_name: "lathe-listen", keepAlive: true });
    const drop = () => {
      if (this.#client === client) this.#client = null;
      void client.end().catch(() => undefined);
    };
    client.on("error", drop);
    client.on("end", drop);
    client.on("notification", () => this.#onNotify());
    try {
      await client.connect();
      await client.query(`LISTEN ${this.#channel}`);
    } catch {
      drop();
      return;
    }
    if (this.#closed) return drop();
    this.#client = client;
    this.#onNotify();
  }

  async close(): Promise<void> {
    this.#closed = true;
    const c = this.#client;
    this.#client = null;
    await c?.end().catch(() => undefined);
  }
}
