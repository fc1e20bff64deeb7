/**
 * The one writer of an output series (warc-files.md §2, §6): a serial queue of groups, each
 * appended contiguously to a `NAME.open` file that starts with its warcinfo, rolled over by
 * size and idleness, renamed to `NAME` on close. `write()` resolves only once the bytes are in
 * the file; a failure rejects with ERR_WARC_WRITE, leaves no partial group behind, and the
 * writer heals itself when a later write succeeds.
 *
 * This file assembles the parts: appendQueue.ts (call order, batching), groupEncoder.ts
 * (compression ahead of the queue), appendBatch.ts (which groups share an append),
 * fileSeries.ts and warcFile.ts (the files: naming, `.open`, rollover, close and rename),
 * durability.ts (when fsync happens), writerFailure.ts (the failure state and its probe).
 */
import { randomBytes } from "node:crypto";
import { hostname as osHostname } from "node:os";
import type { Clock } from "../core/clock.js";
import { ProxyError } from "../core/errors.js";
import type { IdSource } from "../core/ids.js";
import type { Logger } from "../core/log.js";
import { joinsBatch } from "./appendBatch.js";
import { AppendQueue, type Append } from "./appendQueue.js";
import type { WarcVersion } from "./date.js";
import type { DigestAlgorithm } from "./digest.js";
import { Durability } from "./durability.js";
import { WarcFileSeries, type FileSeriesOptions } from "./fileSeries.js";
import type { EncodeOptions } from "./gzipMember.js";
import { GroupEncoder, disposeGroup, type EncodedGroup } from "./groupEncoder.js";
import { DEFAULT_TEMPLATE, randomToken, templateProblem } from "./naming.js";
import type { WarcWriter, WriterState, WrittenRecord } from "./types.js";
import { fileNamer } from "./warcFile.js";
import { buildWarcinfo, hostIp, type WarcinfoInfo } from "./warcinfo.js";
import { WriterFailure } from "./writerFailure.js";
import { nodeWriterFs, type WriterFs } from "./writerFs.js";
import { GuardedIndexHook, type WriterIndexHook } from "./writerIndexHook.js";

export { nodeWriterFs, type WarcFileHandle, type WriterFs } from "./writerFs.js";
export type { LandedRecord, WriterIndexHook } from "./writerIndexHook.js";

export interface WarcWriterOptions {
  dir: string;
  prefix: string;
  /** File name template without extension; default `{prefix}-{timestamp17}-{serial}-{hostname}`. */
  template?: string;
  gzip: boolean;
  gzipLevel?: number;
  skipLength?: boolean;
  version: WarcVersion;
  digest: DigestAlgorithm;
  maxFileBytes: number;
  /** 0 disables. */
  idleRolloverMs: number;
  durability: "rollover" | "strict";
  warcinfo: WarcinfoInfo;
  /** `lathe/<version>`. */
  software: string;
  port?: number;
  /** Default os.hostname(). */
  hostname?: string;
  /** warcinfo `ip`; default the host's first non-internal address; null omits it. */
  ip?: string | null;
  clock: Clock;
  ids: IdSource;
  log: Logger;
  spoolDir?: string;
  spoolMemoryBytes?: number;
  /** Groups compressed ahead of the queue at once; default min(4, CPUs). */
  encodeConcurrency?: number;
  /** Called with the final path after each file is closed and renamed. */
  onFileClosed?: (finalPath: string) => void;
  /** The live index of this series' files (issue "CDXJ index"); its failures never fail a write. */
  index?: WriterIndexHook;
  fs?: WriterFs;
}

export interface WarcFileWriter extends WarcWriter {
  /** Collection metadata changed (§5): queued groups finish, the file closes, the next carries `info`. */
  setWarcinfo(info: WarcinfoInfo): Promise<void>;
}

export function createWarcWriter(opts: WarcWriterOptions): WarcFileWriter {
  const fs = opts.fs ?? nodeWriterFs;
  const template = opts.template ?? DEFAULT_TEMPLATE;
  const problem = templateProblem(template, opts.port !== undefined);
  if (problem) throw new ProxyError("ERR_CONFIG", `warc.filenameTemplate: ${problem}`);
  const enc = encodeOptions(opts);
  const encoder = new GroupEncoder(opts.version, enc, opts.encodeConcurrency);
  const failure = new WriterFailure(fs, opts.dir, opts.log);
  // A write that failed for a reason of its own (a spool it could not read) becomes the failure.
  const queue = new AppendQueue<EncodedGroup, WrittenRecord[]>((e) => failure.wrap(e, opts.spoolDir ?? opts.dir, "spool a record for"));
  let info = opts.warcinfo;
  let closing: Promise<void> | null = null;
  const series = fileSeries(opts, { fs, template, enc, failure, info: () => info, schedule: (task) => queue.task(task) });
  const append = appender(series, encoder, opts.maxFileBytes);

  return {
    write(group) {
      if (closing) return Promise.reject(new ProxyError("ERR_WARC_WRITE", `the WARC writer for ${opts.dir} is closed`));
      if (group.length === 0) return Promise.resolve([]);
      // Compression runs ahead of the queue (bounded, see groupEncoder.ts); the queue slot is
      // taken now, so groups land in call order and close() waits for every write called before it.
      return queue.write(encoder.start(group, () => series.warcinfoId), append);
    },
    rollover: () => queue.task(() => series.close()),
    // Through the queue, so it never races a write.
    probe: () => queue.task(() => failure.probe()),
    close() {
      closing ??= queue.task(async () => {
        series.stopIdle();
        await series.close();
      });
      return closing;
    },
    setWarcinfo(next) {
      return queue.task(async () => {
        if (JSON.stringify(next) === JSON.stringify(info)) return;
        info = next;
        await series.close();
      });
    },
    state(): WriterState {
      return { failed: failure.current, currentFile: series.current?.name ?? null, ...series.counts() };
    },
  };
}

/** The series of files the writer writes: named from the template, each opening with a warcinfo of `info()`. */
function fileSeries(
  opts: WarcWriterOptions,
  parts: { fs: WriterFs; template: string; enc: EncodeOptions; failure: WriterFailure; info: () => WarcinfoInfo; schedule: FileSeriesOptions["schedule"] },
): WarcFileSeries {
  const host = opts.hostname ?? osHostname();
  const ip = opts.ip === undefined ? hostIp() : (opts.ip ?? undefined);
  const token = randomToken(randomBytes(8));
  return new WarcFileSeries({
    dir: opts.dir,
    gzip: opts.gzip,
    version: opts.version,
    enc: parts.enc,
    maxFileBytes: opts.maxFileBytes,
    idleRolloverMs: opts.idleRolloverMs,
    clock: opts.clock,
    ids: opts.ids,
    log: opts.log,
    fs: parts.fs,
    nextName: fileNamer({ template: parts.template, prefix: opts.prefix, port: opts.port, hostname: host, token, gzip: opts.gzip }),
    warcinfo: (id, micros, filename) =>
      buildWarcinfo({ id, dateMicros: micros, filename, version: opts.version, digest: opts.digest, software: opts.software, hostname: host, ...(ip !== undefined && { ip }), info: parts.info() }),
    durability: new Durability(opts.durability, parts.fs, opts.dir),
    failure: parts.failure,
    index: new GuardedIndexHook(opts.index, opts.log),
    onFileClosed: opts.onFileClosed,
    schedule: parts.schedule,
  });
}

/** How the group whose turn it is lands: in the file it was compressed for, with the ready ones behind it that fit. */
function appender(series: WarcFileSeries, encoder: GroupEncoder, maxFileBytes: number): Append<EncodedGroup, WrittenRecord[]> {
  return async (first, takeFollowers) => {
    let g = first;
    let followers: EncodedGroup[] = [];
    try {
      for (;;) {
        if (series.needsNewFile(g.size)) await series.close();
        const target = series.warcinfoId;
        if (g.warcinfoId === target) break;
        // Compressed for another file (a rollover came in between): every WARC-Warcinfo-ID must
        // name the warcinfo of the file its record lands in, so compress again.
        await disposeGroup(g);
        g = await encoder.encode(g.drafts, target);
      }
      const fresh = series.current === null;
      const f = series.current ?? (await series.open());
      // The ready writes right behind this one that fit join this append (see appendBatch.ts).
      const batch = takeFollowers(joinsBatch(f, g, maxFileBytes));
      followers = batch.payloads;
      let outs: WrittenRecord[][];
      try {
        outs = await series.append(f, [g, ...followers], fresh);
      } catch (e) {
        batch.failed(e);
        throw e;
      }
      batch.landed(outs.slice(1));
      return outs[0]!;
    } finally {
      await Promise.all([disposeGroup(g), ...followers.map(disposeGroup)]);
    }
  };
}

function encodeOptions(opts: WarcWriterOptions): EncodeOptions {
  return {
    gzip: opts.gzip,
    level: opts.gzipLevel ?? 6,
    skipLength: opts.skipLength ?? false,
    ...(opts.spoolDir !== undefined && { spoolDir: opts.spoolDir }),
    ...(opts.spoolMemoryBytes !== undefined && { spoolMemoryBytes: opts.spoolMemoryBytes }),
  };
}
