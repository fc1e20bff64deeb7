import type { Readable } from "node:stream";
import type { ProxyError } from "../core/errors.js";

export type WarcType = "warcinfo" | "response" | "request" | "revisit" | "metadata" | "resource" | "conversion";

/** A part of a record block: bytes in memory, or a spooled body read as a stream. */
export type BlockPart = Uint8Array | StreamSource;

export interface StreamSource {
  readonly size: number;
  /** A fresh stream over the whole content, every time it is called. */
  createReadStream(): Readable;
  /**
   * The content as chunks when it is all in memory (and will not change), else null: lets small
   * records be encoded without a stream. Optional: a source without it is always streamed.
   */
  memory?(): readonly Uint8Array[] | null;
}

/**
 * A record as the builders produce it, before it lands in a file.
 * `fields` are the WARC header fields in spec order (warc-records.md §1) *without*
 * WARC-Warcinfo-ID and Content-Length: the writer adds those, because only it knows the file
 * (and so the warcinfo) the record lands in, and it counts the block itself.
 */
export interface RecordDraft {
  type: WarcType;
  /** WARC-Record-ID value including `<urn:uuid:...>`. */
  id: string;
  fields: Array<[string, string]>;
  block: BlockPart[];
}

/** Where a record landed. `filename` is the final name, also while the file is still `.open`. */
export interface WrittenRecord {
  id: string;
  type: WarcType;
  filename: string;
  /** Offset of the record (of its gzip member when compressed) in the file. */
  offset: number;
  /** Length of the record on disk (its gzip member when compressed; without the CRLF CRLF for .warc). */
  length: number;
  targetUri?: string;
  date?: string;
}

/** What the writer knows about itself, for status and the 503 answer. */
export interface WriterState {
  failed: ProxyError | null;
  currentFile: string | null;
  /** Failed writes wait and are tried again (rollover durability) rather than rejected. */
  holdsFailedWrites: boolean;
  /** The writes waiting for a writer that cannot write (memory + spool bytes of their records). */
  waiting: { captures: number; bytes: number; since: number | null };
  filesWritten: string[];
  recordsWritten: number;
  bytesWritten: number;
}

export interface WriteOptions {
  /** Called once if the write has to wait because the writer cannot write (it is retried later). */
  onHeld?: () => void;
}

export interface WarcWriter {
  /** Append one group (records of one capture) contiguously. Resolves only once written. */
  write(group: RecordDraft[], o?: WriteOptions): Promise<WrittenRecord[]>;
  /** While failed: try a small write + fsync in the directory; true (and healthy again) if it worked. */
  probe(): Promise<boolean>;
  /** Close the current file (if any) and rename it to its final name; the next write opens a new one. */
  rollover(): Promise<void>;
  /** Finish queued writes, close and rename the current file. */
  close(): Promise<void>;
  state(): WriterState;
}
