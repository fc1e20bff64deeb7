/**
 * One shared writer per output series (prefix). A series takes its warcinfo, WARC version and
 * compression from the collection whose capture first opened it; a change to that collection's
 * metadata starts a new file (warc-files.md §5), a change of version or compression a new writer.
 * A hybrid series (issue #24) is a pair of writers, `.warc.gz` and `.warc`, behind one.
 */
import type { Config } from "../config/schema.js";
import type { Clock } from "../core/clock.js";
import type { IdSource } from "../core/ids.js";
import type { Logger } from "../core/log.js";
import type { WarcWriter } from "../warc/types.js";
import { createHybridWriter } from "../warc/hybridWriter.js";
import { createWarcWriter, type WarcFileWriter, type WarcWriterOptions, type WriterIndexHook } from "../warc/writer.js";
import type { Collection, CollectionEvent } from "./collections.js";

export interface WriterRegistryOptions {
  config: Config;
  warcDir: string;
  software: string;
  clock: Clock;
  ids: IdSource;
  log: Logger;
  port(): number;
  defaults(): Collection;
  onFileClosed?(path: string): void;
  /** The live CDXJ index of a series' files, by the series' collection. */
  indexFor?(collection: string): WriterIndexHook;
}

export class WriterRegistry {
  readonly map = new Map<string, WarcFileWriter>();
  readonly #collectionOf = new Map<string, Collection>();
  readonly #retired: WarcWriter[] = [];
  readonly #o: WriterRegistryOptions;

  constructor(o: WriterRegistryOptions) {
    this.#o = o;
  }

  writerFor = (series: string, collection?: Collection): WarcWriter => {
    let w = this.map.get(series);
    if (!w) {
      const coll = collection ?? this.#o.defaults();
      const c = this.#o.config.warc;
      const o: Omit<WarcWriterOptions, "gzip"> = {
        dir: this.#o.warcDir,
        prefix: series,
        template: c.filenameTemplate,
        gzipLevel: c.gzipLevel,
        skipLength: c.gzipSkipLength,
        version: coll.warcVersion,
        digest: c.digest,
        maxFileBytes: c.maxFileBytes,
        idleRolloverMs: c.idleRolloverMs,
        durability: c.durability,
        // Rollover: the client has its response before the write, so a failed write waits (issue #26).
        holdFailedWrites: c.durability === "rollover",
        warcinfo: coll.warcinfo,
        software: this.#o.software,
        port: this.#o.port(),
        clock: this.#o.clock,
        ids: this.#o.ids,
        log: this.#o.log,
        spoolDir: this.#o.config.capture.spoolDir ?? undefined,
        ...(this.#o.onFileClosed ? { onFileClosed: this.#o.onFileClosed } : {}),
        ...(this.#o.indexFor ? { index: this.#o.indexFor(coll.name) } : {}),
      };
      const compression = coll.compression ?? (coll.gzip ? "gzip" : "none");
      w = compression === "hybrid" ? createHybridWriter({ ...o, minPayloadBytes: c.hybridMinPayloadBytes }) : createWarcWriter({ ...o, gzip: compression === "gzip" });
      this.map.set(series, w);
      this.#collectionOf.set(series, coll);
    }
    return w;
  };

  /** Series currently written for a collection. */
  seriesOf(name: string): string[] {
    return [...this.#collectionOf.entries()].filter(([, c]) => c.name === name).map(([s]) => s);
  }

  /** Close the current files of a collection's series (closing a session, deleting a collection). */
  async rolloverCollection(name: string): Promise<void> {
    await Promise.all(this.seriesOf(name).map((s) => this.map.get(s)!.rollover()));
  }

  async onCollectionChange(e: CollectionEvent): Promise<void> {
    const name = (e.after ?? e.before)!.name;
    for (const series of this.seriesOf(name)) {
      const w = this.map.get(series)!;
      if (!e.after || e.after.warcVersion !== e.before?.warcVersion || e.after.compression !== e.before?.compression || e.after.prefix !== e.before?.prefix) {
        // A new writer takes over; the old one finishes its queue and closes its file.
        this.map.delete(series);
        this.#collectionOf.delete(series);
        this.#retired.push(w);
        await w.close();
      } else {
        this.#collectionOf.set(series, e.after);
        if (JSON.stringify(e.after.warcinfo) !== JSON.stringify(e.before?.warcinfo)) await w.setWarcinfo(e.after.warcinfo);
      }
    }
  }

  all(): WarcWriter[] {
    return [...this.map.values(), ...this.#retired];
  }

  async closeAll(): Promise<void> {
    await Promise.all(this.all().map((w) => w.close()));
  }
}
