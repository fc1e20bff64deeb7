import type { IdSource } from "../core/ids.js";
import { flatString, recordId } from "../core/ids.js";
import { RecentMap } from "../core/recentMap.js";
import { allDone, DONE } from "../core/done.js";
import type { Logger } from "../core/log.js";
import { ProxyError, errorMessage } from "../core/errors.js";
import type { CapturedMessage } from "../capture/messageCapture.js";
import type { SocketTap } from "../upstream/tap.js";
import { firstFieldValue, httpVersionToken } from "../capture/httpHead.js";
import type { WarcVersion } from "../warc/date.js";
import type { DigestAlgorithm } from "../warc/digest.js";
import { buildExchangeMetadata, buildRequest, buildResponse, buildRevisit, buildTlsMetadata, type CaptureMeta, type RevisitOf } from "../warc/records.js";
import { digestOf } from "../warc/digest.js";
import type { DedupPolicy, Deduplicator } from "./dedup.js";
import { CaptureTroubles } from "./troubles.js";
import { LostCapture } from "../warc/lostFile.js";
import type { RecordDraft, WarcWriter, WrittenRecord } from "../warc/types.js";

/** What proxy/ hands to archive/ once an exchange is over (DESIGN.md). */
export interface CompletedExchange {
  targetUri: string;
  method: string;
  /** µs; the instant the first byte of the request head was written upstream. */
  dateMicros: bigint;
  endedMicros: bigint;
  request: CapturedMessage;
  response: CapturedMessage;
  tap: SocketTap;
  /** Output series (WARC prefix). */
  series: string;
  /** WARC version of the collection (records are built for it). */
  version?: WarcVersion;
  /** The collection the capture belongs to (the writer of its series takes its warcinfo). */
  collection?: import("./collections.js").Collection;
  /** This request's dedup policy (Warcprox-Meta / collection), else the archiver's default. */
  dedupPolicy?: DedupPolicy;
  /** false (Warcprox-Meta `dedup-ok: false`): never remembered as a dedup original. */
  dedupOk?: boolean;
  /** Skip writing altogether (`warc-prefix: "-"`, a mime-type filter); the reason is logged. */
  skip?: string;
  /** The recording session the capture belongs to, if any (for observers such as the live page). */
  session?: string;
  /** What the client spoke to lathe ("http/1.1", "h2"), noted in the TLS metadata record. */
  clientProtocol?: string;
  /** "h2" when the origin was spoken to over HTTP/2; else the response's status line says. */
  upstreamProtocol?: "h2";
  /** What the HTTP/1.1-form records cannot hold: interim statuses and trailers (h2). */
  extras?: { interim: number[]; trailers: Array<[string, string]> };
}

export type CaptureOutcome =
  | { kind: "written"; records: WrittenRecord[]; revisit: boolean }
  | { kind: "skipped"; reason: string }
  | { kind: "failed"; error: ProxyError };

/**
 * What an observer hears, after the write (or its failure): one capture, or one record written
 * alone (a pushed resource). Observers must be quick and must not throw (a throw is ignored).
 */
export type ArchiveEvent =
  | {
      kind: "capture";
      uri: string;
      method: string;
      status: number;
      /** The response's Content-Type, if it had one. */
      contentType: string | null;
      series: string;
      collection: string | null;
      session: string | null;
      outcome: CaptureOutcome;
    }
  | { kind: "record"; series: string; collection: string | null; draft: RecordDraft; record: WrittenRecord };

export type ArchiveObserver = (e: ArchiveEvent) => void;

export interface ArchiverOptions {
  writerFor(series: string, collection?: import("./collections.js").Collection): WarcWriter;
  dedup: Deduplicator | null;
  dedupPolicy: DedupPolicy;
  ids: IdSource;
  version: WarcVersion;
  digest: DigestAlgorithm;
  log: Logger;
}

export interface ArchiveStats {
  captures: number;
  revisits: number;
  failed: number;
  records: number;
  bytesSaved: number;
}

/**
 * A capture of a page in progress. Its promise is made only when something waits for it (a
 * pushed resource of that page): most captures are never waited for.
 */
class PageCapture {
  done: Promise<void> | null = null;
  release: (() => void) | null = null;

  constructor(
    readonly series: string,
    readonly uri: string,
  ) {}
}

/** The promise that resolves once `w` is archived or abandoned. */
function captured(w: PageCapture): Promise<void> {
  return (w.done ??= new Promise<void>((r) => (w.release = r)));
}

/**
 * The one pipeline every capture takes: build the records, await the writer, and only then
 * report the capture as archived. Spools are released whatever happens.
 */
export class Archiver {
  readonly #o: ArchiverOptions;
  /** Recent page records per series (`series uri` → record), for linking associated resources. */
  readonly #pages = new RecentMap<string, { id: string; date: string; atMs: number }>(50_000);
  /**
   * Page captures in progress. A set rather than a map by page: marking and ending one (every
   * exchange) is then an add and a delete, with no `series uri` key built and hashed (#25); the
   * rare wait for a page looks through the captures in flight.
   */
  readonly #pending = new Set<PageCapture>();
  readonly stats: ArchiveStats = { captures: 0, revisits: 0, failed: 0, records: 0, bytesSaved: 0 };
  /** Captures given up at shutdown and captures cut short by their spool (for the log and status). */
  readonly troubles: CaptureTroubles;
  /** Told of every capture outcome and every record written alone (the live page listens here). */
  readonly observers = new Set<ArchiveObserver>();

  constructor(o: ArchiverOptions) {
    this.#o = o;
    this.troubles = new CaptureTroubles(o.log);
  }

  /**
   * `onWaiting`: called if the capture has to wait because its writer cannot write right now
   * (rollover durability keeps it and writes it later, in order; issue #26).
   */
  async archive(ex: CompletedExchange, o: { onWaiting?: () => void } = {}): Promise<CaptureOutcome> {
    const outcome = await this.#archive(ex, o.onWaiting);
    if (this.observers.size) {
      const contentType = firstFieldValue(ex.response.headFields, "content-type") ?? null;
      this.#tell({ kind: "capture", uri: ex.targetUri, method: ex.method, status: ex.response.status, contentType, series: ex.series, collection: ex.collection?.name ?? null, session: ex.session ?? null, outcome });
    }
    return outcome;
  }

  #tell(e: ArchiveEvent): void {
    for (const o of this.observers) {
      try {
        o(e);
      } catch (err) {
        this.#o.log.error("archive-observer-failed", { error: errorMessage(err) });
      }
    }
  }

  async #archive(ex: CompletedExchange, onWaiting?: () => void): Promise<CaptureOutcome> {
    if (ex.skip) {
      await Promise.all([ex.request.dispose(), ex.response.dispose()]).catch(() => undefined);
      this.#o.log.debug("capture-skipped", { uri: ex.targetUri, reason: ex.skip });
      return { kind: "skipped", reason: ex.skip };
    }
    let settle: ((w: WrittenRecord | null) => void) | null = null;
    try {
      // Policy → dedup decision → records → awaited write; the dedup entry only after the write.
      const decision = this.#o.dedup ? await this.#o.dedup.decide(ex.targetUri, ex.request, ex.response, ex.dedupPolicy ?? this.#o.dedupPolicy) : null;
      settle = decision?.settle ?? null;
      this.troubles.spoolCut(ex);
      // A response recorded whole needs its block digest: a large body's is taken only now.
      if (!decision?.revisit) {
        const ready = ex.response.blockDigestReady();
        if (ready !== DONE) await ready;
      }
      const group = this.#build(ex, decision?.revisit ?? null);
      const writer = this.#o.writerFor(ex.series, ex.collection);
      const tlsPending = group.some((r) => r.type === "metadata");
      if (tlsPending) ex.tap.tlsRecordedFor.add(ex.series);
      let records: WrittenRecord[];
      try {
        records = await writer.write(group, onWaiting ? { onHeld: onWaiting } : {});
      } catch (e) {
        if (tlsPending) ex.tap.tlsRecordedFor.delete(ex.series);
        throw e;
      }
      const revisit = decision?.revisit != null;
      this.#rememberPage(ex.series, ex.targetUri, records[0]!);
      settle?.(revisit || ex.dedupOk === false ? null : records[0]!);
      settle = null;
      this.stats.captures++;
      this.stats.records += records.length;
      if (revisit) {
        this.stats.revisits++;
        this.stats.bytesSaved += decision!.bytesSaved;
      }
      this.#o.log.debug("capture-written", { uri: ex.targetUri, status: ex.response.status, file: records[0]?.filename, revisit });
      return { kind: "written", records, revisit };
    } catch (e) {
      settle?.(null);
      this.stats.failed++;
      const error = e instanceof ProxyError ? e : new ProxyError("ERR_WARC_WRITE", `capture of ${ex.targetUri} not written: ${errorMessage(e)}`, e);
      if (error instanceof LostCapture) this.troubles.lost(ex.targetUri, error);
      else this.#o.log.error("capture-failed", { uri: ex.targetUri, code: error.code, error: error.message });
      return { kind: "failed", error };
    } finally {
      // Bodies held in memory have nothing to release: no await then (most captures).
      const disposed = allDone([ex.request.dispose(), ex.response.dispose()]);
      if (disposed !== DONE) await disposed.catch(() => undefined);
    }
  }

  #rememberPage(series: string, uri: string, w: WrittenRecord): void {
    // Flat strings: these entries live for minutes, and ropes cost several times their text.
    const key = flatString(`${series} ${uri}`);
    // Bounded: the least recently written pages go first.
    this.#pages.set(key, { id: flatString(w.id), date: flatString(w.date ?? ""), atMs: Date.now() });
  }

  /** The most recent response/revisit of `uri` in `series` written within `windowMs`, if any. */
  pageRecord(series: string, uri: string, windowMs: number): { id: string; date: string } | null {
    const p = this.#pages.get(`${series} ${uri}`);
    return p && Date.now() - p.atMs <= windowMs ? p : null;
  }

  /**
   * Mark a capture of `uri` as in progress: a resource pushed for that page meanwhile (a
   * screenshot taken while the page's own record is still being written) waits for it.
   * Returns the function to call once the capture is archived or abandoned.
   */
  expectPage(series: string, uri: string): () => void {
    const w = new PageCapture(series, uri);
    this.#pending.add(w);
    return () => {
      this.#pending.delete(w);
      w.release?.();
    };
  }

  /** pageRecord, after waiting (at most `waitMs`) for captures of that page still in progress. */
  async awaitPageRecord(series: string, uri: string, windowMs: number, waitMs = 5000): Promise<{ id: string; date: string } | null> {
    const pending: PageCapture[] = [];
    for (const w of this.#pending) if (w.series === series && w.uri === uri) pending.push(w);
    if (pending.length) await Promise.race([Promise.all(pending.map(captured)), new Promise((r) => setTimeout(r, waitMs).unref())]);
    return this.pageRecord(series, uri, windowMs);
  }

  /** Write one record that is a group of its own (pushed resources). */
  async writeAlone(series: string, draft: RecordDraft, collection?: import("./collections.js").Collection): Promise<WrittenRecord> {
    const [w] = await this.#o.writerFor(series, collection).write([draft]);
    this.stats.records++;
    if (this.observers.size) this.#tell({ kind: "record", series, collection: collection?.name ?? null, draft, record: w! });
    return w!;
  }

  #build(ex: CompletedExchange, revisit: RevisitOf | null): RecordDraft[] {
    const { digest } = this.#o;
    const version = ex.version ?? this.#o.version;
    const tls = ex.tap.tls;
    // An h2 exchange is recorded in HTTP/1.1 form; its WARC-Protocol says what was spoken (http2.md §2.9).
    const protocols = [ex.upstreamProtocol ?? httpVersionToken(ex.response.startLine)];
    if (tls?.protocol) protocols.push(tls.protocol);
    const meta: CaptureMeta = {
      dateMicros: ex.dateMicros,
      targetUri: ex.targetUri,
      ip: ex.tap.ip,
      protocols,
      cipherSuite: tls?.cipherSuite,
    };
    const responseId = recordId(this.#o.ids.uuid());
    const requestId = recordId(this.#o.ids.uuid());
    const group: RecordDraft[] = [
      revisit
        ? buildRevisit(responseId, meta, ex.response.storedHead, digestOf(digest, ex.response.storedHead), revisit, version)
        : buildResponse(
        responseId,
        meta,
        {
          head: ex.response.storedHead,
          body: ex.response.body,
          blockDigest: ex.response.blockDigest,
          payloadDigest: ex.response.payloadDigest ?? digestOf(digest),
          truncated: ex.response.truncated,
        },
        version,
      ),
      buildRequest(
        requestId,
        responseId,
        meta,
        {
          head: ex.request.storedHead,
          body: ex.request.body,
          blockDigest: ex.request.blockDigest,
          payloadDigest: ex.request.body && ex.request.bodyLength > 0 ? ex.request.payloadDigest : null,
          truncated: ex.request.truncated,
        },
        version,
      ),
    ];
    // A request whose content-length lathe wrote (http2.md §2.6) is named in the TLS metadata
    // record, or in the exchange's own metadata record when the connection's was written before.
    const synthesized = ex.request.addedContentLength ? [`synthesized-request-content-length: ${requestId}`] : [];
    const tlsRecord = tls !== null && !ex.tap.tlsRecordedFor.has(ex.series);
    if (tlsRecord) {
      group.push(buildTlsMetadata(recordId(this.#o.ids.uuid()), responseId, Object.assign({}, meta, { protocols: [] }), tls, version, digest, ex.clientProtocol, synthesized));
    }
    const extras = { interim: ex.extras?.interim ?? [], trailers: ex.extras?.trailers ?? [], notes: tlsRecord ? [] : synthesized };
    if (extras.interim.length || extras.trailers.length || extras.notes.length) {
      group.push(buildExchangeMetadata(recordId(this.#o.ids.uuid()), responseId, meta, extras, version, digest));
    }
    return group;
  }
}
