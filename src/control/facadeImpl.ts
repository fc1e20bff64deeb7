/**
 * The ControlFacade over a running lathe: collections, sessions (each with its own proxy port),
 * associated resources, status and metrics. The REST layer (api.ts) only translates HTTP.
 */
import type { Readable } from "node:stream";
import { Spool } from "../capture/spool.js";
import { ProxyError } from "../core/errors.js";
import { recordId } from "../core/ids.js";
import type { Collection, CollectionInput, CollectionRegistry } from "../archive/collections.js";
import { InputError } from "../archive/collections.js";
import type { Archiver } from "../archive/pipeline.js";
import { type Session, type SessionRegistry, summaryOf } from "../archive/sessions.js";
import type { WriterRegistry } from "../archive/writers.js";
import type { ProxyServer } from "../proxy/server.js";
import type { Config } from "../config/schema.js";
import type { Clock } from "../core/clock.js";
import type { IdSource } from "../core/ids.js";
import { formatWarcDate } from "../warc/date.js";
import { formatDigest, newHash } from "../warc/digest.js";
import { buildResource, type ResourceContext } from "../warc/records.js";
import type { ControlFacade, FleetAnswer, ResourceInput, SessionInfo, WrittenResource } from "./facade.js";
import { waczFacade } from "./facadeWacz.js";
import type { PolitenessReport } from "../politeness/politeness.js";

export interface FacadeDeps {
  version: string;
  config: Config;
  /** The WARC directory (absolute): WACZ downloads read its files. */
  warcDir: string;
  collections: CollectionRegistry;
  sessions: SessionRegistry;
  writers: WriterRegistry;
  archiver: Archiver;
  clock: Clock;
  ids: IdSource;
  caPem: string;
  /** Start a proxy server bound to a session on `port` (0 = ephemeral) of the proxy host. */
  startSessionServer(s: Session, port: number): Promise<{ server: ProxyServer; port: number }>;
  status(): Record<string, unknown> | Promise<Record<string, unknown>>;
  fleet(): Promise<FleetAnswer>;
  metrics(): string;
  politeness(): PolitenessReport;
}

const URN_KINDS = /^(view|thumbnail|fullPage|fullPageFinal|text|textFinal|pageinfo|video:\d{5}|annotation:[A-Za-z0-9._~-]{1,64}|[A-Za-z][A-Za-z0-9-]{0,31})$/;
const CONTEXT_KEYS = new Set(["kind", "variant", "mode", "capturedAt", "browser", "viewport", "page", "tool", "extra"]);
const LINK_WINDOW_MS = 600_000;

function resourceUri(input: ResourceInput): { uri: string; page: string | null } {
  if (input.uri !== undefined) {
    if (/^https?:/i.test(input.uri)) throw new InputError("uri", "a resource never gets an http(s) URI (that would claim a server sent these bytes): use urn:<kind>:<page-url>");
    if (!/^[A-Za-z][A-Za-z0-9+.-]*:\S+$/.test(input.uri)) throw new InputError("uri", `must be an absolute URI such as urn:view:https://example.com/, got ${JSON.stringify(input.uri)}`);
    const m = /^urn:(?:video:\d{5}|annotation:[^:]+|[A-Za-z][A-Za-z0-9-]*):(https?:.*)$/.exec(input.uri) ?? /^(?:screenshot|thumbnail):(https?:.*)$/.exec(input.uri);
    return { uri: input.uri, page: m ? m[1]! : null };
  }
  if (!input.kind || !URN_KINDS.test(input.kind)) throw new InputError("kind", `must be view, thumbnail, fullPage, fullPageFinal, text, textFinal, pageinfo, video:NNNNN, annotation:<id> or a word of letters, digits and '-', got ${JSON.stringify(input.kind)}`);
  if (!input.page || !/^https?:\/\/\S+$/.test(input.page)) throw new InputError("page", `must be the page's http(s) URL, got ${JSON.stringify(input.page)}`);
  const page = input.page.replace(/#.*$/, "");
  return { uri: `urn:${input.kind}:${page}`, page };
}

function checkContext(c: unknown): ResourceContext {
  if (c === undefined) return { mode: "parallel" };
  if (!c || typeof c !== "object" || Array.isArray(c)) throw new InputError("Lathe-Context", "must be a JSON object");
  for (const k of Object.keys(c)) if (!CONTEXT_KEYS.has(k)) throw new InputError("Lathe-Context", `unknown key ${JSON.stringify(k)} (put your own fields under "extra")`);
  const ctx = c as ResourceContext;
  if (!["same-transaction", "parallel", "replay"].includes(ctx.mode)) throw new InputError("Lathe-Context", 'mode must be "same-transaction", "parallel" or "replay"');
  if (JSON.stringify(ctx).length > 8192) throw new InputError("Lathe-Context", "must be at most 8192 bytes of JSON");
  return ctx;
}

const noCollection = (name: string) => new ProxyError("ERR_DENIED", `no collection ${JSON.stringify(name)}`);

/** An associated resource (tls-and-resources.md B.2): spooled, hashed, linked to its page, written. */
async function writeResource(d: FacadeDeps, input: ResourceInput): Promise<WrittenResource> {
  const coll = d.collections.get(input.collection);
  if (!coll) throw noCollection(input.collection);
  const { uri, page } = resourceUri(input);
  const context = checkContext(input.context);
  if (!input.contentType || /[\r\n]/.test(input.contentType)) throw new InputError("Content-Type", "the resource's Content-Type header is required");
  const received = d.clock.nowMicros();
  const alg = d.config.warc.digest;
  const hash = newHash(alg);
  const spool = new Spool({ memoryBytes: d.config.capture.spoolMemoryBytes, dir: d.config.capture.spoolDir });
  try {
    for await (const chunk of input.body as Readable) {
      hash.update(chunk as Buffer);
      if (!spool.write(chunk as Buffer)) await spool.drained();
    }
    await spool.finish();
    if (input.length !== undefined && spool.size !== input.length) throw new InputError("Content-Length", `body was ${spool.size} bytes, not ${input.length}`);
    let link: { id: string; date: string } | null = null;
    if (context.mode !== "replay") {
      if (context.page?.recordId) link = null;
      else if (page) link = await d.archiver.awaitPageRecord(coll.prefix, page, LINK_WINDOW_MS);
    }
    const explicit = context.page?.recordId ?? null;
    const concurrentTo = explicit ?? link?.id ?? null;
    const meta: ResourceContext = {
      ...context,
      ...(concurrentTo && !context.capturedAt ? { capturedAt: formatWarcDate(received, "1.1") } : {}),
      ...(concurrentTo && page ? { page: { url: page, recordId: concurrentTo, ...(context.page ?? {}) } } : {}),
    };
    const draft = buildResource(
      recordId(d.ids.uuid()),
      {
        type: "resource",
        targetUri: uri,
        dateMicros: received,
        ...(link && !explicit ? { pageDate: link.date } : {}),
        ...(concurrentTo && context.mode !== "replay" ? { concurrentTo } : {}),
        contentType: input.contentType,
        body: spool,
        blockDigest: formatDigest(alg, hash.digest()),
        context: meta,
      },
      coll.warcVersion,
    );
    const w = await d.archiver.writeAlone(coll.prefix, draft, coll);
    return { recordId: w.id, filename: w.filename, offset: w.offset, length: w.length, uri };
  } finally {
    await spool.dispose();
  }
}

export function createFacade(d: FacadeDeps): ControlFacade {
  const servers = new Map<string, ProxyServer>();
  const info = (s: Session, password?: string): SessionInfo => ({
    ...summaryOf(s),
    proxy: { host: s.host, port: s.port ?? 0 },
    proxyUrl: `http://${s.host.includes(":") ? `[${s.host}]` : s.host}:${s.port ?? 0}`,
    username: s.id,
    ...(password ? { password } : {}),
  });

  return {
    version: d.version,
    collections: d.collections,
    createCollection: (input: CollectionInput) => d.collections.create(input),
    async updateCollection(name: string, input: CollectionInput): Promise<Collection> {
      const before = d.collections.get(name);
      const after = d.collections.update(name, input);
      await d.writers.onCollectionChange({ kind: "updated", before, after });
      return after;
    },
    async deleteCollection(name: string): Promise<void> {
      if (d.sessions.list().some((s) => s.collection === name && !s.closed)) throw new InputError("name", `collection ${JSON.stringify(name)} has open sessions; close them first`);
      const before = d.collections.get(name);
      if (!before) throw noCollection(name);
      d.collections.delete(name);
      await d.writers.onCollectionChange({ kind: "deleted", before, after: null });
    },
    async openSession(input) {
      const name = input.collection ?? "default";
      if (!d.collections.get(name)) throw noCollection(name);
      if (input.port !== undefined && (!Number.isInteger(input.port) || input.port < 0 || input.port > 65535)) throw new InputError("port", `must be a port number, got ${JSON.stringify(input.port)}`);
      const { session, password } = d.sessions.create(name, d.config.proxy.host, {
        ...(input.rejectInvalidCerts ? { rejectInvalidCerts: true } : {}),
        ...(input.denyHosts ? { denyHosts: input.denyHosts } : {}),
        ...(input.exemptFromPoliteness ? { exemptFromPoliteness: true } : {}),
      });
      try {
        const { server, port } = await d.startSessionServer(session, input.port ?? 0);
        session.port = port;
        servers.set(session.id, server);
      } catch (e) {
        d.sessions.remove(session.id);
        throw e instanceof ProxyError ? new InputError("port", e.message) : e;
      }
      return info(session, password);
    },
    listSessions: () => d.sessions.list().map((s) => info(s)),
    getSession: (id) => {
      const s = d.sessions.get(id);
      return s ? info(s) : null;
    },
    async closeSession(id) {
      const s = d.sessions.get(id);
      if (!s) throw new ProxyError("ERR_DENIED", `no session ${JSON.stringify(id)}`);
      s.closed = true;
      // Its captures finish (bounded), its port closes, its collection's files are closed.
      const deadline = Date.now() + 30_000;
      while (s.inflight > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      await servers.get(id)?.close(2000);
      servers.delete(id);
      await d.writers.rolloverCollection(s.collection);
      const summary = summaryOf(s, new Date());
      d.sessions.remove(id, summary);
      return summary;
    },
    ...waczFacade(d),
    writeResource: (input: ResourceInput) => writeResource(d, input),
    status: d.status,
    fleet: d.fleet,
    metrics: d.metrics,
    politeness: () => ({ ...d.politeness(), policies: Object.fromEntries(d.collections.list().map((c) => [c.name, c.politeness])) }),
    caPem: () => d.caPem,
  };
}
