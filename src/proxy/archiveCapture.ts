/**
 * The end of an exchange: both messages finalized and handed to the archive pipeline; once it
 * answers, the limits are settled, the crawl log gets its line and the counters their counts.
 */
import { firstFieldValue } from "../capture/httpHead.js";
import type { CapturedMessage, Truncation } from "../capture/messageCapture.js";
import type { CaptureOutcome, CompletedExchange } from "../archive/pipeline.js";
import type { Admitted } from "../warcprox/limits.js";
import type { ProxyContext } from "./context.js";
import { type RequestPolicy, filteredOut } from "./requestPolicy.js";
import type { Captures } from "./captures.js";
import { chargeBacklog } from "./backlog.js";

/** One exchange to archive: what was asked, what was captured, how it ended. */
export interface Finished {
  uri: string;
  method: string;
  caps: Captures;
  ended: "clean" | Truncation;
  policy: RequestPolicy;
  admitted: Admitted;
  /** Keep the bytes as received (a response Node's parser refused: decisions.md §1). */
  wireExact?: boolean;
  /** The client leg's protocol ("http/1.1", "h2"). */
  clientProtocol: string;
  /** Called if the capture waits for a writer that cannot write (it is written later, in order). */
  onWaiting?: () => void;
}

/** Finalize both messages and hand the exchange to the archive pipeline; true when written. */
export async function archiveExchange(ctx: ProxyContext, f: Finished): Promise<boolean> {
  const messages = await finalizeBoth(ctx, f);
  if (!messages || !f.caps.tap) {
    await Promise.all([messages?.request.dispose(), messages?.response.dispose(), f.caps.request.discard(), f.caps.response.discard()]);
    ctx.log.warn("capture-incomplete", { uri: f.uri, reason: "no complete response head was received" });
    f.admitted.release(null);
    return false;
  }
  const { request, response } = messages;
  const { policy } = f;
  const contentType = firstFieldValue(response.headFields, "content-type");
  const skip = skipReason(policy, contentType);
  const ex: CompletedExchange = {
    targetUri: f.uri,
    method: f.method,
    dateMicros: f.caps.sentAt ?? request.firstByteMicros,
    endedMicros: ctx.clock.nowMicros(),
    request,
    response,
    tap: f.caps.tap,
    series: policy.series,
    version: policy.collection.warcVersion,
    collection: policy.collection,
    dedupPolicy: policy.dedupPolicy,
    dedupOk: policy.dedupOk,
    session: policy.session?.id,
    clientProtocol: f.clientProtocol,
  };
  // Assigned, not spread into the literal: each spread was a runtime call and an object (#25).
  // The same keys in the same order when present.
  if (f.caps.h2) ex.upstreamProtocol = "h2";
  if (f.caps.extras) ex.extras = f.caps.extras;
  if (skip) ex.skip = skip;
  const release = chargeBacklog(ctx.archiver, response.rawHead.length + response.wireBodyLength + request.rawHead.length + request.wireBodyLength);
  // A capture waiting for its writer leaves the back-pressure count (the retry bounds count it).
  const archiving = ctx.archiver.archive(ex, {
    onWaiting: () => {
      release();
      f.onWaiting?.();
    },
  });
  let settled: CaptureOutcome;
  try {
    settled = await archiving;
  } finally {
    release(); // here rather than in a reaction of its own: one promise less per exchange
  }
  const outcome = settled; // a const, so that `written` narrows it below
  const written = outcome.kind === "written";
  f.admitted.release({ written, revisit: written && outcome.revisit, wireBytes: response.rawHead.length + response.wireBodyLength });
  logCapture(ctx, f, ex, outcome, contentType);
  countOutcome(ctx, policy, outcome);
  return written;
}

async function finalizeBoth(ctx: ProxyContext, f: Finished): Promise<{ request: CapturedMessage; response: CapturedMessage } | null> {
  const mode = f.wireExact ? "wire-exact" : ctx.config.warc.chunked;
  const lenient = ctx.config.upstream.lenientParsing;
  let request: CapturedMessage | null = null;
  let response: CapturedMessage | null = null;
  try {
    request = await f.caps.request.finalize(mode, "clean");
    response = await f.caps.response.finalize(mode, f.ended, { lenient, rejected: f.wireExact === true });
  } catch (e) {
    ctx.log.error("capture-failed", { uri: f.uri, error: e });
  }
  if (request && response) return { request, response };
  await Promise.all([request?.dispose(), response?.dispose()]);
  return null;
}

/** The crawl log line of an archived (or failed-to-archive) capture. */
function logCapture(ctx: ProxyContext, f: Finished, ex: CompletedExchange, outcome: CaptureOutcome, contentType: string | undefined): void {
  const { request, response } = ex;
  const { policy } = f;
  const written = outcome.kind === "written";
  const first = written ? outcome.records[0] : undefined;
  void ctx.crawlLog
    ?.append(
      {
        status: response.status,
        size: response.wireBodyLength,
        url: f.uri,
        referer: firstFieldValue(request.headFields, "referer") ?? null,
        metadata: policy.meta?.metadata ?? null,
        contentType: contentType ?? null,
        fetchStart: new Date(Number(ex.dateMicros / 1000n)),
        fetchEnd: new Date(Number(ex.endedMicros / 1000n)),
        digest: response.payloadDigest,
        revisit: written && outcome.revisit,
        truncated: response.truncated,
        contentSize: response.rawHead.length + response.wireBodyLength,
        warcFilename: first?.filename ?? null,
        warcFileOffset: first?.offset ?? null,
        method: f.method,
      },
      policy.meta?.warcPrefix ?? (policy.noArchive ? "-" : policy.series),
    )
    .catch((e) => ctx.log.error("crawl-log-failed", { error: e }));
}

/** Count a capture's outcome for its session and its collection (status, session summaries). */
export function countOutcome(ctx: ProxyContext, policy: RequestPolicy, outcome: CaptureOutcome): void {
  for (const c of [policy.session?.counters, ctx.collectionCounters(policy.collection.name)]) {
    if (!c) continue;
    if (outcome.kind === "written") {
      c.captures++;
      if (outcome.revisit) c.revisits++;
      for (const r of outcome.records) {
        c.bytes += r.length;
        if (c === policy.session?.counters) policy.session.files.add(r.filename);
      }
    } else if (outcome.kind === "skipped") c.skipped++;
    else c.failed++;
  }
}

function skipReason(policy: RequestPolicy, ct: string | undefined): string | null {
  if (policy.noArchive) return 'Warcprox-Meta warc-prefix "-"';
  if (filteredOut(policy.mimeTypeFilters, ct)) return `mime-type-filters (${ct ?? "no Content-Type"})`;
  return null;
}

/** The crawl log line of an exchange that got no response to record (heritrix's negative codes). */
export function logFetchFailure(ctx: ProxyContext, uri: string, method: string, policy: RequestPolicy, fetchStatus: number, error: { code: string; message: string }): void {
  void ctx.crawlLog
    ?.append({ status: fetchStatus, size: null, url: uri, metadata: policy.meta?.metadata ?? null, fetchStart: null, exception: error.code, exceptionMessage: error.message, method }, policy.meta?.warcPrefix ?? policy.series)
    .catch((e) => ctx.log.error("crawl-log-failed", { error: e }));
}
