/**
 * How the group whose turn it is lands (the writer's Append): in the file it was compressed for,
 * with the ready ones behind it that fit. With a WriteHold (`rollover` durability, issue #26) a
 * failed append is not the end: the same batch tries again until it lands, and every later write
 * waits behind it in the queue; a closing writer gives it up to `lost/` instead.
 */
import { allDone, DONE } from "../core/done.js";
import { ProxyError } from "../core/errors.js";
import type { Logger } from "../core/log.js";
import { joinsBatch } from "./appendBatch.js";
import type { Append, Followers } from "./appendQueue.js";
import type { WarcFileSeries } from "./fileSeries.js";
import { disposeGroup, type EncodedGroup, type GroupEncoder } from "./groupEncoder.js";
import { LostCapture } from "./lostFile.js";
import type { RecordDraft, WrittenRecord } from "./types.js";
import type { WriteHold } from "./writeHold.js";
import type { WriterFailure } from "./writerFailure.js";

export interface AppenderParts {
  series: WarcFileSeries;
  encoder: GroupEncoder;
  maxFileBytes: number;
  failure: WriterFailure;
  /** Where members are spooled (named when spooling one fails). */
  spoolDir: string;
  /** null: a failed append rejects its writes (strict durability). */
  hold: WriteHold | null;
  /** Write a given-up group to `lost/`; its path. */
  writeLost: (group: RecordDraft[]) => Promise<string>;
  log: Logger;
}

type Batch = Followers<EncodedGroup, WrittenRecord[]>;

export function appender(p: AppenderParts): Append<EncodedGroup, WrittenRecord[]> {
  return async (first, takeFollowers) => {
    // The batch: the group whose turn it is, then the followers it took (taken once, kept together).
    const groups = [first];
    let batch: Batch | null = null;
    try {
      for (;;) {
        if (p.hold?.givenUp) return await giveUp(p, groups, batch, new ProxyError("ERR_WARC_WRITE", "an earlier capture could not be written"));
        try {
          const outs = await appendOnce(p, groups, (f) => {
            batch = takeFollowers(joinsBatch(f, groups[0]!, p.maxFileBytes));
            groups.push(...batch.payloads);
          }, batch !== null);
          p.hold?.landed();
          (batch as Batch | null)?.landed(outs.slice(1));
          return outs[0]!;
        } catch (e) {
          const err = p.failure.wrap(e, p.spoolDir, "spool a record for");
          if (p.hold && (await p.hold.failed(err))) continue;
          if (p.hold?.givenUp) return await giveUp(p, groups, batch, err);
          (batch as Batch | null)?.failed(err);
          throw err;
        }
      }
    } finally {
      // Members held in memory have nothing to release: no await then (most batches).
      const disposed = allDone(groups.map(disposeGroup));
      if (disposed !== DONE) await disposed;
    }
  };
}

/**
 * One attempt: every group of the batch compressed for the file it lands in (a rollover or a
 * failure since may have changed the file), then one append. `take` picks the followers on the
 * first attempt; `taken` says it did already.
 */
async function appendOnce(p: AppenderParts, groups: EncodedGroup[], take: (f: { size: number; warcinfoId: string }) => void, taken: boolean): Promise<WrittenRecord[][]> {
  const { series, encoder } = p;
  for (;;) {
    if (series.needsNewFile(groups[0]!.size)) await series.close();
    const target = series.warcinfoId;
    if (groups[0]!.warcinfoId === target) break;
    // Compressed for another file (a rollover came in between, or the compression failed): every
    // WARC-Warcinfo-ID must name the warcinfo of the file its record lands in, so compress again.
    groups[0] = await recompress(encoder, groups[0]!, target);
  }
  const fresh = series.current === null;
  const f = series.current ?? (await series.open());
  if (!taken) take(f);
  for (let i = 1; i < groups.length; i++) if (groups[i]!.warcinfoId !== f.warcinfoId) groups[i] = await recompress(encoder, groups[i]!, f.warcinfoId);
  return series.append(f, groups, fresh);
}

async function recompress(encoder: GroupEncoder, g: EncodedGroup, warcinfoId: string): Promise<EncodedGroup> {
  await disposeGroup(g);
  // Until the new one exists, the slot holds nothing to dispose twice.
  const drafts = g.drafts;
  g.records = [];
  return encoder.encode(drafts, warcinfoId);
}

/** The writer closed with this batch unwritten: each group goes to a file of its own in `lost/`. */
async function giveUp(p: AppenderParts, groups: EncodedGroup[], batch: Batch | null, why: unknown): Promise<never> {
  const errors: LostCapture[] = [];
  for (const g of groups) {
    try {
      const file = await p.writeLost(g.drafts);
      p.log.error("warc-group-lost", { file, records: g.drafts.length, reason: (why as Error).message });
      errors.push(new LostCapture(file, why));
    } catch (e) {
      p.log.error("warc-group-lost", { file: null, records: g.drafts.length, reason: (why as Error).message, error: e });
      errors.push(new LostCapture(null, why, e));
    }
  }
  batch?.failedEach(errors.slice(1));
  throw errors[0];
}
