/**
 * The one writer of an output series (warc-files.md §2, §6): a serial queue of groups, each
 * appended contiguously to a `NAME.open` file that starts with its warcinfo, rolled over by
 * size and idleness, renamed to `NAME` on close. `write()` resolves only once the bytes are in
 * the file; a failure rejects with ERR_WARC_WRITE, leaves no partial group behind, and the
 * writer heals itself when a later write succeeds.
 */
import { randomBytes } from "node:crypto";
import * as fsp from "node:fs/promises";
import { availableParallelism, hostname as osHostname } from "node:os";
import { join } from "node:path";
import type { Clock } from "../core/clock.js";
import { ProxyError, errorMessage, isProxyError, systemCode } from "../core/errors.js";
import { recordId, type IdSource } from "../core/ids.js";
import type { Logger } from "../core/log.js";
import type { WarcVersion } from "./date.js";
import type { DigestAlgorithm } from "./digest.js";
import { encodeRecord, encodeRecordSync, writeFully, writevFully, type EncodeOptions, type EncodedRecord, type PositionalWriter } from "./gzipMember.js";
import { DEFAULT_TEMPLATE, randomToken, templateProblem, warcFileName } from "./naming.js";
import { RECORD_TRAILER, serializeHeader } from "./serialize.js";
import { syncDir } from "./syncDir.js";
import type { RecordDraft, WarcWriter, WriterState, WrittenRecord } from "./types.js";
import { buildWarcinfo, hostIp, type WarcinfoInfo } from "./warcinfo.js";

export interface WarcFileHandle extends PositionalWriter {
  sync(): Promise<void>;
  truncate(len?: number): Promise<void>;
  close(): Promise<void>;
}

/** The file-system calls the writer makes: a seam so tests can inject ENOSPC and friends. */
export interface WriterFs {
  open(path: string, flags: string, mode: number): Promise<WarcFileHandle>;
  rename(from: string, to: string): Promise<void>;
  unlink(path: string): Promise<void>;
  exists(path: string): Promise<boolean>;
  mkdir(dir: string): Promise<void>;
  syncDir(dir: string): Promise<void>;
}

export const nodeWriterFs: WriterFs = {
  open: (p, flags, mode) => fsp.open(p, flags, mode),
  rename: (a, b) => fsp.rename(a, b),
  unlink: (p) => fsp.unlink(p),
  exists: (p) =>
    fsp.lstat(p).then(
      () => true,
      (e) => (systemCode(e) === "ENOENT" ? false : Promise.reject(e)),
    ),
  mkdir: async (d) => {
    await fsp.mkdir(d, { recursive: true });
  },
  syncDir,
};

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

/**
 * A record as it landed: its draft (whose fields the serializer wrote as they are, adding only
 * WARC-Warcinfo-ID and Content-Length) and where its bytes are.
 */
export interface LandedRecord {
  draft: RecordDraft;
  offset: number;
  length: number;
}

/**
 * Told about each file of a series, in queue order: a new `.open` file, each group once its
 * bytes are in the file (consecutive groups appended in one write come in one call, in order;
 * before `write()` resolves, while the drafts' block sources are still
 * readable), the close (before the rename, so the final name never exists without its index),
 * and the end of a file the writer gave up on.
 */
export interface WriterIndexHook {
  opened(file: { name: string; openPath: string; finalPath: string }): Promise<void>;
  written(name: string, records: LandedRecord[]): Promise<void>;
  closing(name: string): Promise<void>;
  closed(name: string, finalPath: string): Promise<void> | void;
  /** The file was removed (`removed`) or left `.open` for start-up recovery. */
  abandoned(name: string, removed: boolean): Promise<void> | void;
}

export interface WarcFileWriter extends WarcWriter {
  /** Collection metadata changed (§5): queued groups finish, the file closes, the next carries `info`. */
  setWarcinfo(info: WarcinfoInfo): Promise<void>;
}

interface OpenFile {
  name: string;
  finalPath: string;
  openPath: string;
  fh: WarcFileHandle;
  warcinfoId: string;
  size: number;
  /** Records besides the warcinfo. */
  records: number;
}

interface EncodedGroup {
  warcinfoId: string;
  records: EncodedRecord[];
  size: number;
}

/** A write not yet appended, in call order. */
interface QueuedWrite {
  group: RecordDraft[];
  /** Its compressed group, once ready (and while not yet appended). */
  ready: EncodedGroup | null;
  /** Writes of one epoch have no other queue task (rollover, close, …) between them. */
  epoch: number;
  /** Set when an earlier write appended this group together with its own. */
  batched: Promise<WrittenRecord[]> | null;
}

/** Groups compressed and waiting for their append, at most (bounds the memory they hold). */
const MAX_AHEAD = 128;
/** One append takes at most this many queued groups (in-memory members only) … */
const MAX_BATCH_GROUPS = 256;
/** … and at most this many bytes. */
const MAX_BATCH_BYTES = 4 * 1024 * 1024;

/** Bytes a recovery probe must be able to write and fsync before captures are accepted again. */
const PROBE_BYTES = 256 * 1024;

const HINTS: Record<string, string> = {
  ENOSPC: "disk full",
  EDQUOT: "disk quota exceeded",
  EROFS: "read-only file system",
  EACCES: "permission denied",
  EPERM: "operation not permitted",
  EIO: "I/O error",
  ENOTDIR: "a path component is not a directory",
  ENOENT: "no such file or directory",
};

export function createWarcWriter(opts: WarcWriterOptions): WarcFileWriter {
  const fs = opts.fs ?? nodeWriterFs;
  const log = opts.log;
  const template = opts.template ?? DEFAULT_TEMPLATE;
  const problem = templateProblem(template, opts.port !== undefined);
  if (problem) throw new ProxyError("ERR_CONFIG", `warc.filenameTemplate: ${problem}`);
  const host = opts.hostname ?? osHostname();
  const ip = opts.ip === undefined ? hostIp() : (opts.ip ?? undefined);
  const token = randomToken(randomBytes(8));
  const strict = opts.durability === "strict";
  const enc: EncodeOptions = {
    gzip: opts.gzip,
    level: opts.gzipLevel ?? 6,
    skipLength: opts.skipLength ?? false,
    ...(opts.spoolDir !== undefined && { spoolDir: opts.spoolDir }),
    ...(opts.spoolMemoryBytes !== undefined && { spoolMemoryBytes: opts.spoolMemoryBytes }),
  };
  const slots = semaphore(opts.encodeConcurrency ?? Math.max(1, Math.min(4, availableParallelism())));
  const ahead = semaphore(MAX_AHEAD);
  // Writes waiting for their append, in call order: when one's turn comes, the ones right behind
  // it that are already compressed go into the same write(2) (one round trip per batch, not per
  // group: under load the queue otherwise falls behind the proxy and holds every capture).
  const queued: QueuedWrite[] = [];
  let epoch = 0;

  let info = opts.warcinfo;
  let serial = 0;
  let cur: OpenFile | null = null;
  // Pre-drawn so a group can be compressed for the file that its arrival will open.
  let nextWarcinfoId = recordId(opts.ids.uuid());
  let failed: ProxyError | null = null;
  let closing: Promise<void> | null = null;
  let idle: NodeJS.Timeout | null = null;
  let tail: Promise<unknown> = Promise.resolve();
  const filesWritten: string[] = [];
  let recordsWritten = 0;
  let bytesWritten = 0;

  /** Queue a task other than a write: no batch of writes spans it. */
  function enqueue<T>(task: () => Promise<T>): Promise<T> {
    epoch++;
    return enqueueWrite(task);
  }

  function enqueueWrite<T>(task: () => Promise<T>): Promise<T> {
    const run = tail.then(task);
    tail = run.catch(() => {});
    return run;
  }

  function failure(file: string, e: unknown, op = "write"): ProxyError {
    const code = systemCode(e);
    const hint = code && HINTS[code] ? `${HINTS[code]} (${errorMessage(e)})` : errorMessage(e);
    failed = new ProxyError("ERR_WARC_WRITE", `cannot ${op} WARC file ${file}: ${hint}`, e);
    log.error("warc-write-failed", { file, op, code, error: failed.message });
    return failed;
  }

  async function encodeGroup(group: RecordDraft[], warcinfoId: string): Promise<EncodedGroup> {
    const records: EncodedRecord[] = [];
    try {
      for (const d of group) {
        if (d.type === "warcinfo") throw new ProxyError("ERR_INTERNAL", "a group must not hold a warcinfo record: each file's own is written by the writer");
        records.push(await encodeRecord(serializeHeader(d, { version: opts.version, warcinfoId }), d.block, enc));
      }
    } catch (e) {
      await Promise.all(records.map((r) => r.dispose()));
      throw e;
    }
    return { warcinfoId, records, size: records.reduce((n, r) => n + r.size, 0) };
  }

  /**
   * The group compressed at once when every record is small and in memory (most captures), or
   * null: then it takes the asynchronous path, which also reports any error.
   */
  function encodeGroupSync(group: RecordDraft[], warcinfoId: string): EncodedGroup | null {
    const records: EncodedRecord[] = [];
    let size = 0;
    try {
      for (const d of group) {
        if (d.type === "warcinfo") return null;
        const r = encodeRecordSync(serializeHeader(d, { version: opts.version, warcinfoId }), d.block, enc);
        if (!r) return null;
        records.push(r);
        size += r.size;
      }
    } catch {
      return null;
    }
    return { warcinfoId, records, size };
  }

  const disposeGroup = (g: EncodedGroup) => Promise.all(g.records.map((r) => r.dispose()));

  async function append(q: QueuedWrite, first: EncodedGroup): Promise<WrittenRecord[]> {
    const group = q.group;
    let g = first;
    const followers: Array<{ q: QueuedWrite; g: EncodedGroup; resolve: (w: WrittenRecord[]) => void; reject: (e: unknown) => void }> = [];
    try {
      for (;;) {
        if (cur && cur.records > 0 && cur.size + g.size > opts.maxFileBytes) await closeCurrent();
        const target = cur ? cur.warcinfoId : nextWarcinfoId;
        if (g.warcinfoId === target) break;
        // Compressed for another file (a rollover came in between): every WARC-Warcinfo-ID must
        // name the warcinfo of the file its record lands in, so compress again.
        await disposeGroup(g);
        g = await encodeGroup(group, target);
      }
      const fresh = cur === null;
      const f = cur ?? (await openFile());
      // The writes right behind this one that are compressed for this file, held in memory and
      // fit in it without a rollover join this append (same order, same offsets as one by one).
      const inMemory = (x: EncodedGroup) => x.records.every((r) => r.parts !== null);
      if (inMemory(g)) {
        let size = f.size + g.size;
        let bytes = g.size;
        for (const x of queued) {
          if (x === q) continue;
          const xg = x.ready;
          if (!xg || x.epoch !== q.epoch || xg.warcinfoId !== f.warcinfoId || !inMemory(xg)) break;
          if (size + xg.size > opts.maxFileBytes || bytes + xg.size > MAX_BATCH_BYTES || followers.length + 1 >= MAX_BATCH_GROUPS) break;
          size += xg.size;
          bytes += xg.size;
          let resolve!: (w: WrittenRecord[]) => void;
          let reject!: (e: unknown) => void;
          x.batched = new Promise<WrittenRecord[]>((res, rej) => ((resolve = res), (reject = rej)));
          x.batched.catch(() => {}); // awaited by its own queue task
          x.ready = null;
          followers.push({ q: x, g: xg, resolve, reject });
        }
        for (const fl of followers) queued.splice(queued.indexOf(fl.q), 1);
      }
      let outs: WrittenRecord[][];
      try {
        outs = await appendGroups(f, [{ group, g }, ...followers.map((fl) => ({ group: fl.q.group, g: fl.g }))], fresh);
      } catch (e) {
        for (const fl of followers) fl.reject(e);
        throw e;
      }
      followers.forEach((fl, i) => fl.resolve(outs[i + 1]!));
      return outs[0]!;
    } finally {
      await Promise.all([disposeGroup(g), ...followers.map((fl) => disposeGroup(fl.g))]);
    }
  }

  async function openFile(): Promise<OpenFile> {
    const micros = opts.clock.nowMicros();
    let name = "";
    let finalPath = "";
    let openPath = "";
    let fh: WarcFileHandle;
    try {
      await fs.mkdir(opts.dir);
      for (;;) {
        const parts = { prefix: opts.prefix, openedMicros: micros, serial: serial++, hostname: host, pid: process.pid, randomtoken: token };
        name = warcFileName(template, opts.port === undefined ? parts : { ...parts, port: opts.port }, opts.gzip);
        finalPath = join(opts.dir, name);
        openPath = finalPath + ".open";
        // Exclusive create, and never a name whose final form exists: no file is overwritten.
        if (await fs.exists(finalPath)) continue;
        try {
          fh = await fs.open(openPath, "wx", 0o644);
          break;
        } catch (e) {
          if (systemCode(e) !== "EEXIST") throw e;
        }
      }
    } catch (e) {
      throw isProxyError(e) ? e : failure(openPath || opts.dir, e, "create");
    }
    const id = nextWarcinfoId;
    nextWarcinfoId = recordId(opts.ids.uuid());
    try {
      const draft = buildWarcinfo({ id, dateMicros: micros, filename: name, version: opts.version, digest: opts.digest, software: opts.software, hostname: host, ...(ip !== undefined && { ip }), info });
      const rec = await encodeRecord(serializeHeader(draft, { version: opts.version }), draft.block, enc);
      try {
        await rec.writeTo(fh, 0);
      } finally {
        await rec.dispose();
      }
      // Strict durability: the file's directory entry must survive a crash as well as its bytes.
      if (strict) await fs.syncDir(opts.dir);
      cur = { name, finalPath, openPath, fh, warcinfoId: id, size: rec.size, records: 0 };
      log.info("warc-file-opened", { file: openPath });
      await hook("opened", () => opts.index?.opened({ name, openPath, finalPath }));
      return cur;
    } catch (e) {
      await fh.close().catch(() => {});
      await fs.unlink(openPath).catch(() => {});
      throw isProxyError(e) ? e : failure(openPath, e);
    }
  }

  /** Append consecutive groups (several only when all are in memory); all land, or none. */
  async function appendGroups(f: OpenFile, items: Array<{ group: RecordDraft[]; g: EncodedGroup }>, fresh: boolean): Promise<WrittenRecord[][]> {
    const start = f.size;
    let pos = start;
    let syncing = false;
    const outs: WrittenRecord[][] = [];
    try {
      // Groups held in memory go to the file in one pwritev(2); large members stream.
      const members = items.flatMap((it) => it.g.records);
      const whole = members.every((r) => r.parts !== null) ? members.flatMap((r) => r.parts!) : null;
      if (whole) await writevFully(f.fh, whole, pos);
      for (const { group, g } of items) {
        const out: WrittenRecord[] = [];
        for (let i = 0; i < g.records.length; i++) {
          const r = g.records[i]!;
          const d = group[i]!;
          if (!whole) await r.writeTo(f.fh, pos);
          const w: WrittenRecord = { id: d.id, type: d.type, filename: f.name, offset: pos, length: opts.gzip ? r.size : r.size - RECORD_TRAILER.byteLength };
          const uri = field(d, "WARC-Target-URI");
          const date = field(d, "WARC-Date");
          if (uri !== undefined) w.targetUri = uri;
          if (date !== undefined) w.date = date;
          out.push(w);
          pos += r.size;
        }
        outs.push(out);
      }
      if (strict) {
        syncing = true;
        await f.fh.sync();
      }
    } catch (e) {
      const err = isProxyError(e) ? e : failure(f.openPath, e, syncing ? "fsync" : "write");
      await rollback(f, start, fresh, syncing);
      throw err;
    }
    if (opts.index) {
      const landed: LandedRecord[] = items.flatMap(({ group }, k) =>
        outs[k]!.map((w, i) => ({ draft: group[i]!, offset: w.offset, length: w.length })),
      );
      await hook("written", () => opts.index?.written(f.name, landed));
    }
    const n = items.reduce((k, it) => k + it.group.length, 0);
    f.size = pos;
    f.records += n;
    recordsWritten += n;
    bytesWritten += pos - (fresh ? 0 : start); // a fresh file's warcinfo counts once it is kept
    failed = null;
    // A group that filled the file (or one larger than the limit, alone in it) closes it now.
    // Should that close fail, this write rejects too: its bytes are only as safe as the file.
    if (f.size >= opts.maxFileBytes) await closeCurrent();
    else armIdle(f);
    return outs;
  }

  /** Leave no part of a failed group in the file. */
  async function rollback(f: OpenFile, start: number, fresh: boolean, syncFailed: boolean): Promise<void> {
    if (!fresh && !syncFailed) {
      try {
        await f.fh.truncate(start);
        log.warn("warc-group-rolled-back", { file: f.openPath, offset: start });
        return;
      } catch (e) {
        log.error("warc-truncate-failed", { file: f.openPath, error: e });
      }
    }
    // A fresh file holds nothing anyone was told about: remove it. Otherwise (truncate or fsync
    // failed) the tail is uncertain: stop using the file and leave it `.open` for start-up
    // recovery (§7), which cuts it back to its complete records.
    if (cur === f) cur = null;
    clearIdle();
    await f.fh.close().catch(() => {});
    if (fresh) await fs.unlink(f.openPath).catch(() => {});
    else log.error("warc-file-abandoned", { file: f.openPath, keptBytes: start });
    await hook("abandoned", () => opts.index?.abandoned(f.name, fresh));
  }

  async function closeCurrent(): Promise<void> {
    const f = cur;
    if (!f) return;
    cur = null;
    clearIdle();
    let op = "fsync";
    try {
      await f.fh.sync();
      op = "close";
      await f.fh.close();
      await hook("closing", () => opts.index?.closing(f.name));
      op = "rename";
      await fs.rename(f.openPath, f.finalPath);
      op = "fsync the directory of";
      await fs.syncDir(opts.dir);
    } catch (e) {
      if (op === "fsync") await f.fh.close().catch(() => {});
      const err = failure(f.openPath, e, op); // stays `.open`; start-up recovery finishes it
      if (op !== "fsync the directory of") await hook("abandoned", () => opts.index?.abandoned(f.name, false));
      throw err;
    }
    filesWritten.push(f.name);
    log.info("warc-file-closed", { file: f.finalPath, bytes: f.size, records: f.records });
    await hook("closed", () => opts.index?.closed(f.name, f.finalPath));
    try {
      opts.onFileClosed?.(f.finalPath);
    } catch (e) {
      log.error("warc-file-closed-callback-failed", { file: f.finalPath, error: e });
    }
  }

  /** The index is derived data (it can be rebuilt from the file): its failure is logged, never thrown. */
  async function hook(what: string, call: () => Promise<void> | void): Promise<void> {
    try {
      await call();
    } catch (e) {
      log.error("warc-index-failed", { what, error: errorMessage(e) });
    }
  }

  function armIdle(f: OpenFile): void {
    clearIdle();
    if (opts.idleRolloverMs <= 0) return;
    const seen = f.records;
    idle = setTimeout(() => {
      // Through the queue, and only if nothing arrived meanwhile. A failure is already logged
      // and marked in state().failed by closeCurrent.
      enqueue(async () => {
        if (cur === f && f.records === seen) await closeCurrent();
      }).catch(() => {});
    }, opts.idleRolloverMs);
    idle.unref();
  }

  function clearIdle(): void {
    if (idle) clearTimeout(idle);
    idle = null;
  }

  return {
    write(group) {
      if (closing) return Promise.reject(new ProxyError("ERR_WARC_WRITE", `the WARC writer for ${opts.dir} is closed`));
      if (group.length === 0) return Promise.resolve([]);
      // Compression runs ahead of the queue (bounded: `slots` at once, MAX_AHEAD waiting); the
      // queue slot is taken now, so groups land in call order and close() waits for every write
      // called before it.
      const q: QueuedWrite = { group, ready: null, epoch, batched: null };
      queued.push(q);
      const now = encodeGroupSync(group, cur?.warcinfoId ?? nextWarcinfoId);
      let encoding: Promise<EncodedGroup>;
      if (now) {
        q.ready = now;
        encoding = Promise.resolve(now);
      } else {
        encoding = ahead
          .acquire()
          .then(() => slots.acquire())
          .then(() => encodeGroup(group, cur?.warcinfoId ?? nextWarcinfoId).finally(() => slots.release()));
        encoding.then(
          (g) => {
            if (!q.batched) q.ready = g;
          },
          () => {}, // awaited in the queue; this only silences an early rejection
        );
      }
      return enqueueWrite(async () => {
        try {
          if (q.batched) return await q.batched; // appended with an earlier write
          const g = await encoding;
          q.ready = null;
          queued.splice(queued.indexOf(q), 1);
          return await append(q, g);
        } catch (e) {
          throw isProxyError(e) ? e : failure(opts.spoolDir ?? opts.dir, e, "spool a record for");
        } finally {
          const i = queued.indexOf(q);
          if (i >= 0) queued.splice(i, 1);
          if (!now) ahead.release();
        }
      });
    },
    rollover: () => enqueue(closeCurrent),
    probe() {
      // Through the queue, so it never races a write. Success clears the failure: the next
      // capture is written again (disk space came back, the directory is writable again).
      return enqueue(async () => {
        if (!failed) return true;
        const path = join(opts.dir, `.lathe-probe-${process.pid}-${randomToken(randomBytes(8))}`);
        try {
          await fs.mkdir(opts.dir);
          const fh = await fs.open(path, "wx", 0o600);
          try {
            await writeFully(fh, Buffer.alloc(PROBE_BYTES), 0);
            await fh.sync();
          } finally {
            await fh.close().catch(() => {});
            await fs.unlink(path).catch(() => {});
          }
        } catch {
          await fs.unlink(path).catch(() => {});
          return false;
        }
        log.info("warc-writer-recovered", { dir: opts.dir, after: failed.message });
        failed = null;
        return true;
      });
    },
    close() {
      closing ??= enqueue(async () => {
        clearIdle();
        await closeCurrent();
      });
      return closing;
    },
    setWarcinfo(next) {
      return enqueue(async () => {
        if (JSON.stringify(next) === JSON.stringify(info)) return;
        info = next;
        await closeCurrent();
      });
    },
    state(): WriterState {
      return { failed, currentFile: cur?.name ?? null, filesWritten: [...filesWritten], recordsWritten, bytesWritten };
    },
  };
}

function field(d: RecordDraft, name: string): string | undefined {
  const n = name.toLowerCase();
  return d.fields.find(([k]) => k.toLowerCase() === n)?.[1];
}

/** FIFO counting semaphore: holders are always the earliest writes, so the queue never starves. */
function semaphore(n: number) {
  let free = n;
  const waiting: Array<() => void> = [];
  return {
    acquire(): Promise<void> {
      if (free > 0) {
        free--;
        return Promise.resolve();
      }
      return new Promise<void>((r) => waiting.push(r));
    },
    release(): void {
      const next = waiting.shift();
      if (next) next();
      else free++;
    },
  };
}
