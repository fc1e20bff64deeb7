/**
 * The one writer of an output series (warc-files.md §2, §6): a serial queue of groups, each
 * appended contiguously to a `NAME.open` file that starts with its warcinfo, rolled over by
 * size and idleness, renamed to `NAME` on close. `write()` resolves only once the bytes are in
 * the file; a failure leaves no partial group behind and the writer heals itself when a later
 * write succeeds. The failed write rejects with ERR_WARC_WRITE, or, with `holdFailedWrites`
 * (rollover durability, issue #26), waits and is tried again, every later write behind it.
 *
 * This file assembles the parts: appendQueue.ts (call order, batching), appender.ts (how the
 * group whose turn it is lands, tried again while held), groupEncoder.ts (compression ahead of
 * the queue), appendBatch.ts (which groups share an append), fileSeries.ts and warcFile.ts (the
 * files: naming, `.open`, rollover, close and rename), durability.ts (when fsync happens),
 * writerFailure.ts (the failure state and its probe), writeHold.ts (held writes and their
 * ledger), lostFile.ts (where a closing writer puts what it gives up).
 */
import { randomBytes } from "node:crypto";
import { hostname as osHostname } from "node:os";
import type { Clock } from "../core/clock.js";
import { ProxyError } from "../core/errors.js";
import type { IdSource } from "../core/ids.js";
import type { Logger } from "../core/log.js";
import { appender } from "./appender.js";
import { AppendQueue } from "./appendQueue.js";
import type { WarcVersion } from "./date.js";
import type { DigestAlgorithm } from "./digest.js";
import { Durability } from "./durability.js";
import { WarcFileSeries, type FileSeriesOptions } from "./fileSeries.js";
import type { EncodeOptions } from "./gzipMember.js";
import { GroupEncoder, uncompressed, type EncodedGroup } from "./groupEncoder.js";
import { writeLostFile } from "./lostFile.js";
import { blockSize } from "./serialize.js";
import { DEFAULT_TEMPLATE, randomToken, templateProblem } from "./naming.js";
import type { RecordDraft, WarcWriter, WriteOptions, WriterState, WrittenRecord } from "./types.js";
import { fileNamer } from "./warcFile.js";
import { buildWarcinfo, hostIp, type WarcinfoInfo } from "./warcinfo.js";
import { WriteHold, worthRetrying } from "./writeHold.js";
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
  /**
   * Hold failed writes and retry them in order instead of rejecting them (issue #26; lathe sets
   * it in `rollover` durability): write() then rejects only when the writer closes with the
   * capture still unwritten, after putting it in `lost/`.
   */
  holdFailedWrites?: boolean;
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
  const encoder = new GroupEncoder(opts.version, enc, opts.encodeConcurrency, opts.dir);
  const failure = new WriterFailure(fs, opts.dir, opts.log);
  const spoolDir = opts.spoolDir ?? opts.dir;
  // A write that failed for a reason of its own (a spool it could not read) becomes the failure.
  const queue = new AppendQueue<EncodedGroup, WrittenRecord[]>((e) => failure.wrap(e, spoolDir, "spool a record for"));
  const hold = opts.holdFailedWrites ? new WriteHold() : null;
  let info = opts.warcinfo;
  let closing: Promise<void> | null = null;
  const warcinfo = warcinfoBuilder(opts, () => info);
  const series = fileSeries(opts, { fs, template, enc, failure, warcinfo, schedule: (task) => queue.task(task) });
  const writeLost = (group: RecordDraft[]) => writeLostFile({ dir: opts.dir, prefix: opts.prefix, gzip: opts.gzip, version: opts.version, enc, clock: opts.clock, ids: opts.ids, fs, warcinfo }, group);
  const append = appender({ series, encoder, maxFileBytes: opts.maxFileBytes, failure, spoolDir, hold, writeLost, log: opts.log });

  return {
    write(group, o?: WriteOptions) {
      if (closing) return Promise.reject(new ProxyError("ERR_WARC_WRITE", `the WARC writer for ${opts.dir} is closed`));
      if (group.length === 0) return Promise.resolve([]);
      const entry = hold?.enter(group.reduce((n, d) => n + blockSize(d.block), 0), o?.onHeld);
      // Compression runs ahead of the queue (bounded, see groupEncoder.ts); the queue slot is
      // taken now, so groups land in call order and close() waits for every write called before it.
      const pending = encoder.start(group, () => series.warcinfoId);
      // A held write compresses again on its turn if compressing failed (a full spool directory);
      // one compressed at once (`ready`) did not fail.
      if (hold && !pending.ready) pending.result = pending.result.catch((e: unknown) => (worthRetrying(e) ? uncompressed(group) : Promise.reject(e)));
      const written = queue.write(pending, append);
      if (entry) written.then(() => hold!.leave(entry), () => hold!.leave(entry));
      return written;
    },
    rollover: () => queue.task(() => series.close()),
    // Through the queue, so it never races a write; a held write is its own probe.
    probe: () => (hold?.failing ? Promise.resolve(false) : queue.task(() => failure.probe())),
    close() {
      hold?.close();
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
      const waiting = hold?.waiting() ?? { captures: 0, bytes: 0, since: null };
      return { failed: failure.current, currentFile: series.current?.name ?? null, holdsFailedWrites: hold !== null, waiting, ...series.counts() };
    },
  };
}

/** The series of files the writer writes: named from the template, each opening with a warcinfo. */
function fileSeries(
  opts: WarcWriterOptions,
  parts: { fs: WriterFs; template: string; enc: EncodeOptions; failure: WriterFailure; warcinfo: WarcinfoBuilder; schedule: FileSeriesOptions["schedule"] },
): WarcFileSeries {
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
    nextName: fileNamer({ template: parts.template, prefix: opts.prefix, port: opts.port, hostname: hostnameOf(opts), token, gzip: opts.gzip }),
    warcinfo: parts.warcinfo,
    durability: new Durability(opts.durability, parts.fs, opts.dir),
    failure: parts.failure,
    index: new GuardedIndexHook(opts.index, opts.log),
    onFileClosed: opts.onFileClosed,
    schedule: parts.schedule,
  });
}

type WarcinfoBuilder = (id: string, openedMicros: bigint, filename: string) => RecordDraft;

const hostnameOf = (opts: WarcWriterOptions) => opts.hostname ?? osHostname();

/** The warcinfo record of a new file (a lost file's too), with the collection metadata `info()` holds then. */
function warcinfoBuilder(opts: WarcWriterOptions, info: () => WarcinfoInfo): WarcinfoBuilder {
  const host = hostnameOf(opts);
  const ip = opts.ip === undefined ? hostIp() : (opts.ip ?? undefined);
  return (id, micros, filename) =>
    buildWarcinfo({ id, dateMicros: micros, filename, version: opts.version, digest: opts.digest, software: opts.software, hostname: host, ...(ip !== undefined && { ip }), info: info() });
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
