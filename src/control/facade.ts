/**
 * What the REST control API can ask of a running lathe. main.ts implements it; the HTTP layer
 * (src/control/api.ts) only translates requests and answers, so it can be tested on its own.
 */
import type { Readable } from "node:stream";
import type { Collection, CollectionInput, CollectionRegistry } from "../archive/collections.js";
import type { SessionSummary } from "../archive/sessions.js";
import type { PolitenessPolicy } from "../config/politeness.js";
import type { PolitenessReport } from "../politeness/politeness.js";
import type { FleetInstance } from "../postgres/registry.js";
import type { PreparedWacz } from "../wacz/packager.js";

export interface SessionInfo extends SessionSummary {
  proxy: { host: string; port: number };
  proxyUrl: string;
  username: string;
  /** Only in the answer to the creation. */
  password?: string;
}

export interface ResourceInput {
  collection: string;
  /** Either the full URI (`urn:view:https://…`, `screenshot:…`, any non-http(s) scheme) … */
  uri?: string;
  /** … or a kind (`view`, `thumbnail`, `fullPage`, `text`, `pageinfo`, `video:00001`, `annotation:<id>`, or any `[A-Za-z][A-Za-z0-9-]{0,31}`) and the page URL. */
  kind?: string;
  page?: string;
  contentType: string;
  body: Readable;
  /** Declared length when known (Content-Length). */
  length?: number;
  /** The parsed `Lathe-Context` JSON (tls-and-resources.md B.2 keys), or undefined. */
  context?: unknown;
}

export interface WrittenResource {
  recordId: string;
  filename: string;
  offset: number;
  length: number;
  uri: string;
}

/** `GET /api/v1/fleet`: the live instances sharing this one's store, least loaded first. */
export interface FleetAnswer {
  /** Whether instances share state through PostgreSQL; false = this instance alone. */
  shared: boolean;
  /** `PostgreSQL host:port/db` (never a password), when shared. */
  store?: string;
  instances: FleetInstance[];
}

/** A WACZ ready to go out: its size is known; `prepared.dispose()` after sending (or not). */
export interface WaczDownload {
  prepared: PreparedWacz;
  /** Suggested file name (Content-Disposition). */
  filename: string;
  /** Files still being written, not in the package. */
  leftOut: string[];
}

export interface ControlFacade {
  readonly version: string;
  collections: CollectionRegistry;
  createCollection(input: CollectionInput): Collection;
  updateCollection(name: string, input: CollectionInput): Promise<Collection>;
  deleteCollection(name: string): Promise<void>;
  openSession(input: { collection?: string; port?: number; rejectInvalidCerts?: boolean; denyHosts?: string[]; exemptFromPoliteness?: boolean }): Promise<SessionInfo>;
  listSessions(): SessionInfo[];
  getSession(id: string): SessionInfo | null;
  closeSession(id: string): Promise<SessionSummary>;
  /** A collection's closed WARC files as a WACZ; `signal`: no longer wanted (the client left). */
  collectionWacz(name: string, signal?: AbortSignal): Promise<WaczDownload>;
  /** A closed session's WARC files as a WACZ (a session still open is refused). */
  sessionWacz(id: string, signal?: AbortSignal): Promise<WaczDownload>;
  writeResource(input: ResourceInput): Promise<WrittenResource>;
  status(): Record<string, unknown> | Promise<Record<string, unknown>>;
  /** Throws ProxyError("ERR_SHARED_UNAVAILABLE") while the shared store is unreachable. */
  fleet(): Promise<FleetAnswer>;
  /** Prometheus text exposition format. */
  metrics(): string;
  /** Per-host politeness state (busiest hosts first) and each collection's policy (issue #27). */
  politeness(): PolitenessReport & { policies: Record<string, PolitenessPolicy> };
  caPem(): string;
}
