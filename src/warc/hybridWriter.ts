/**
 * Hybrid compression (issue #24): one output series written as two, a `.warc.gz` series and a
 * `.warc` series, each a full writer of its own (naming, `.open`, warcinfo first, rollover,
 * durability, recovery, the live index: writer.ts). Each group (the records of one capture)
 * goes whole to one of them, by routing.ts: a request, its response and their metadata stay
 * together in one file. gzip and plain files cannot alternate records in one file, hence two.
 */
import type { RecordDraft, WarcWriter, WriteOptions, WriterState, WrittenRecord } from "./types.js";
import type { WarcinfoInfo } from "./warcinfo.js";
import { createWarcWriter, type WarcFileWriter, type WarcWriterOptions } from "./writer.js";
import { captureFacts, needsSample, readSample, routeCapture, type SeriesKind } from "./routing.js";

export interface HybridWriterOptions extends Omit<WarcWriterOptions, "gzip"> {
  /** Payloads below this stay in the gzip series (routing.ts HYBRID_MIN_PAYLOAD_BYTES by default). */
  minPayloadBytes?: number;
  /** Told where each group went (the bench counts them). */
  onRouted?(series: SeriesKind, reason: string): void;
}

export function createHybridWriter(opts: HybridWriterOptions): WarcFileWriter {
  const writers: Record<SeriesKind, WarcFileWriter> = {
    gzip: createWarcWriter({ ...opts, gzip: true }),
    plain: createWarcWriter({ ...opts, gzip: false }),
  };
  const both = [writers.gzip, writers.plain];
  // Groups whose route waits for a sample read from their spool: close() and rollover() wait
  // for them, so every write called before them is in its file.
  const routing = new Set<Promise<unknown>>();
  const settled = () => Promise.allSettled([...routing]);

  const route = (group: RecordDraft[]): SeriesKind | Promise<SeriesKind> => {
    const facts = captureFacts(group);
    const decide = (sample: Uint8Array | null) => {
      const r = routeCapture(Object.assign({}, facts, { sample }), opts.minPayloadBytes);
      opts.onRouted?.(r.series, r.reason);
      return r.series;
    };
    if (!facts.source || !needsSample(facts, opts.minPayloadBytes)) return decide(facts.sample);
    // A spool that cannot be read here fails on its write too; until then, compress in doubt.
    return readSample(facts.source).then(decide, () => decide(null));
  };

  return {
    write(group: RecordDraft[], o?: WriteOptions): Promise<WrittenRecord[]> {
      const series = route(group);
      if (typeof series === "string") return writers[series].write(group, o);
      const written = series.then((s) => writers[s].write(group, o));
      const tracked = written.catch(() => {});
      routing.add(tracked);
      void tracked.finally(() => routing.delete(tracked));
      return written;
    },
    async rollover() {
      await settled();
      await Promise.all(both.map((w) => w.rollover()));
    },
    async probe() {
      const ok = await Promise.all(both.map((w) => (w.state().failed ? w.probe() : Promise.resolve(true))));
      return ok.every(Boolean);
    },
    async close() {
      await settled();
      await Promise.all(both.map((w) => w.close()));
    },
    async setWarcinfo(info: WarcinfoInfo) {
      await Promise.all(both.map((w) => w.setWarcinfo(info)));
    },
    state: () => mergedState(writers.gzip, writers.plain),
  };
}

/** One state for the pair: failed if either is, counts added up. */
function mergedState(gz: WarcWriter, plain: WarcWriter): WriterState {
  const a = gz.state();
  const b = plain.state();
  const since = [a.waiting.since, b.waiting.since].filter((s): s is number => s !== null);
  return {
    failed: a.failed ?? b.failed,
    currentFile: a.currentFile ?? b.currentFile,
    holdsFailedWrites: a.holdsFailedWrites,
    waiting: { captures: a.waiting.captures + b.waiting.captures, bytes: a.waiting.bytes + b.waiting.bytes, since: since.length ? Math.min(...since) : null },
    filesWritten: [...a.filesWritten, ...b.filesWritten],
    recordsWritten: a.recordsWritten + b.recordsWritten,
    bytesWritten: a.bytesWritten + b.bytesWritten,
  };
}
