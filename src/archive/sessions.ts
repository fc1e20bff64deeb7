/**
 * Recording sessions (decisions.md §4): a session records into one collection and is reached by
 * its own proxy port or by Basic `Proxy-Authorization` on the main port (username = session id,
 * password = a random token returned once). Sessions end at shutdown and are not restored.
 */
import { randomBytes, timingSafeEqual, createHash } from "node:crypto";
import type { SessionLog } from "./sessionLog.js";

export interface SessionCounters {
  captures: number;
  revisits: number;
  failed: number;
  skipped: number;
  /** WARC bytes written for this session's captures (on-disk record lengths). */
  bytes: number;
}

export interface Session {
  readonly id: string;
  readonly collection: string;
  readonly createdAt: Date;
  /** The dedicated proxy port, once listening. */
  port: number | null;
  host: string;
  readonly counters: SessionCounters;
  /** WARC files (final names) that hold this session's records. */
  readonly files: Set<string>;
  /** Exchanges in flight. */
  inflight: number;
  closed: boolean;
  readonly passwordHash: Buffer;
  readonly options: SessionOptions;
}

export interface SessionOptions {
  /** Manual sessions: show an error page instead of a site whose certificate is invalid. */
  rejectInvalidCerts?: boolean;
  /** Hosts (exact or `*.suffix`) refused before DNS for this session, e.g. a browser's own services. */
  denyHosts?: string[];
  /** A person browsing (`lathe record`): never held back by the collection's politeness (issue #27). */
  exemptFromPoliteness?: boolean;
}

export interface SessionSummary {
  id: string;
  collection: string;
  createdAt: string;
  closedAt: string | null;
  captures: number;
  revisits: number;
  failed: number;
  skipped: number;
  bytes: number;
  files: string[];
}

export function summaryOf(s: Session, closedAt: Date | null = null): SessionSummary {
  return {
    id: s.id,
    collection: s.collection,
    createdAt: s.createdAt.toISOString(),
    closedAt: closedAt ? closedAt.toISOString() : null,
    ...s.counters,
    files: [...s.files].sort(),
  };
}

const hash = (p: string) => createHash("sha256").update(p).digest();

export class SessionRegistry {
  readonly #byId = new Map<string, Session>();
  readonly #log: SessionLog | null;

  /** `log`: where summaries are kept once a session is gone (its WACZ needs its files). */
  constructor(log: SessionLog | null = null) {
    this.#log = log;
  }

  /** A new session; the password is returned here only. */
  create(collection: string, host: string, options: SessionOptions = {}): { session: Session; password: string } {
    const id = `s-${randomBytes(6).toString("hex")}`;
    const password = randomBytes(18).toString("base64url");
    const session: Session = {
      id,
      collection,
      createdAt: new Date(),
      port: null,
      host,
      counters: { captures: 0, revisits: 0, failed: 0, skipped: 0, bytes: 0 },
      files: new Set(),
      inflight: 0,
      closed: false,
      passwordHash: hash(password),
      options,
    };
    this.#byId.set(id, session);
    this.#remember(summaryOf(session));
    return { session, password };
  }

  get(id: string): Session | null {
    return this.#byId.get(id) ?? null;
  }

  list(): Session[] {
    return [...this.#byId.values()];
  }

  /** Forget a session; `closed`, its final summary, is kept in the log. */
  remove(id: string, closed?: SessionSummary): void {
    this.#byId.delete(id);
    if (closed) this.#remember(closed);
  }

  /** The last summary kept of a session no longer open (or of one still open: closedAt null). */
  logged(id: string): SessionSummary | null {
    return this.#log?.get(id) ?? null;
  }

  #remember(s: SessionSummary): void {
    try {
      this.#log?.record(s);
    } catch {
      // Best effort: recording goes on without it; only a later WACZ of this session is lost.
    }
  }

  /**
   * The session a `Proxy-Authorization` value selects: undefined when there is none, null when
   * it is invalid (the caller answers 407). Compared in constant time.
   */
  fromProxyAuthorization(value: string | undefined): Session | null | undefined {
    if (value === undefined) return undefined;
    const m = /^Basic\s+([A-Za-z0-9+/=]+)\s*$/i.exec(value);
    if (!m) return null;
    const decoded = Buffer.from(m[1]!, "base64").toString("utf8");
    const colon = decoded.indexOf(":");
    if (colon < 0) return null;
    const s = this.#byId.get(decoded.slice(0, colon));
    const given = hash(decoded.slice(colon + 1));
    // Compare even when the id is unknown, so timing says nothing about which part was wrong.
    const ok = timingSafeEqual(given, s ? s.passwordHash : hash("\0"));
    return s && ok && !s.closed ? s : null;
  }
}
