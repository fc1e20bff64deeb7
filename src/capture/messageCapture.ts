import type { Hash } from "node:crypto";
import { closeSync, openSync, readSync } from "node:fs";
import { Dechunker, DechunkStream } from "./dechunk.js";
import { type ParsedHead, findHeadEnd, firstFieldValue, isChunked, parseHead, rewriteHead, statusOf } from "./httpHead.js";
import { type BodyDigests, type DigestJob, blockDigestOfFile, startDigestJob } from "./digestThread.js";
import { Spool, type SpoolOptions } from "./spool.js";
import { type DigestAlgorithm, digestBytes, formatDigest, newHash } from "../warc/digest.js";
import type { StreamSource } from "../warc/types.js";
import { DONE } from "../core/done.js";
import { ProxyError } from "../core/errors.js";

export type Truncation = "length" | "time" | "disconnect" | "unspecified";
export type ChunkedMode = "dechunk" | "wire-exact";

export interface MessageCaptureOptions {
  kind: "request" | "response";
  digest: DigestAlgorithm;
  spool: SpoolOptions;
  /** 0 = no limit. Bytes of body kept; past it the record is `WARC-Truncated: length`. */
  maxBodyBytes: number;
  /** The response to a HEAD request has no body whatever its head says. */
  noBody?: boolean;
  /** `upstream.lenientParsing`: Content-Length beside chunked is renamed too (warc-records.md §2.1 rule 4). */
  lenient?: boolean;
  /** Called with the wall-clock time of the first byte of the message head. */
  now: () => bigint;
  /**
   * A request whose head has neither Content-Length nor chunked still has a body, up to its end
   * (an h2 request: DATA frames frame it). Its record gets `content-length: N` appended, as an
   * HTTP/1.1 request without one has no body (http2.md §2.6).
   */
  bodyUntilEnd?: boolean;
}

/** What the recorder keeps of one HTTP message, ready for a record builder. */
export interface CapturedMessage {
  rawHead: Buffer;
  /** Head as stored in the record (renames applied in dechunk mode). */
  storedHead: Buffer;
  startLine: string;
  status: number;
  /** Stored body, or null when the message has none. */
  body: StreamSource | null;
  bodyLength: number;
  /** Body bytes as they were on the wire (chunk framing included). */
  wireBodyLength: number;
  /** null when the message has no body (requests without one get no payload digest). */
  payloadDigest: string | null;
  blockDigest: string;
  /**
   * Resolves once `blockDigest` can be read without blocking. A large response's block digest
   * (its spooled body after its head) is taken on the digest worker only when a record needs it,
   * which a revisit never does; read before this resolves, it is hashed on the caller's thread.
   */
  blockDigestReady(): Promise<void>;
  truncated: Truncation | null;
  chunked: boolean;
  framingError: { offset: number; reason: string } | null;
  firstByteMicros: bigint;
  headFields: ParsedHead["fields"];
  /** The stored head got a `content-length` the message did not carry (bodyUntilEnd). */
  addedContentLength: boolean;
  /** Why the body is cut short of what was received (its spool could not be written), or null. */
  spoolFailure: string | null;
  dispose(): Promise<void>;
}

type BodyMode = "none" | "length" | "chunked" | "close";

/** How far the spool's file must have grown before the digest worker is told again. */
const DIGEST_PROGRESS_BYTES = 4 * 1024 * 1024;

/**
 * Records one HTTP message from the exact bytes of the upstream socket (the tap), without being
 * the parser that decides anything: Node's parser serves the client; this only keeps bytes,
 * finds the head and the framed end, de-chunks and hashes incrementally.
 */
export class MessageCapture {
  readonly #o: MessageCaptureOptions;
  #pending: Buffer[] = [];
  #pendingLen = 0;
  #head: ParsedHead | null = null;
  #status = NaN;
  #mode: BodyMode = "none";
  #remaining = 0;
  #spool: Spool | null = null;
  #dechunker: Dechunker | null = null;
  #entityHash: Hash | null = null;
  #rawBodyHash: Hash | null = null;
  // Block digests kept as the bytes arrive, so a spooled body is never read back just to hash it:
  // over the head and body as received, and (chunked only) over the renamed head and the entity.
  #rawBlockHash: Hash | null = null;
  #entityBlockHash: Hash | null = null;
  #entityLength = 0;
  #rawLength = 0;
  /** The body's digests, taken on the digest worker once the spool is on disk (digestThread.ts). */
  #offThread: DigestJob | null = null;
  #offThreadTold = 0;
  #cutAtLimit = false;
  #complete = false;
  #firstByte: bigint | null = null;
  /** Set when a 101 head arrived: everything after it is another protocol. */
  upgraded = false;

  constructor(o: MessageCaptureOptions) {
    this.#o = o;
  }

  get headComplete(): boolean {
    return this.#head !== null;
  }

  /** True once the framed end of the message was seen (Content-Length reached, last chunk). */
  get complete(): boolean {
    return this.#complete;
  }

  get status(): number {
    return this.#status;
  }

  /** True once any byte was fed (for a response: the origin has begun to answer). */
  get started(): boolean {
    return this.#firstByte !== null;
  }

  /** The final head exactly as received, once complete. */
  rawHeadBytes(): Buffer | null {
    return this.#head?.bytes ?? null;
  }

  spoolNeedsDrain(): boolean {
    return this.#spool?.needsDrain ?? false;
  }

  drained(): Promise<void> {
    return this.#spool ? this.#spool.drained() : Promise.resolve();
  }

  /** Feed bytes exactly as read from (or written to) the upstream socket. */
  feed(chunk: Buffer): void {
    if (this.#firstByte === null) this.#firstByte = this.#o.now();
    if (this.#complete || this.upgraded) return;
    if (!this.#head) {
      this.#pending.push(chunk);
      this.#pendingLen += chunk.length;
      this.#tryHead();
      return;
    }
    this.#feedBody(chunk);
  }

  #tryHead(): void {
    for (;;) {
      let buf = this.#pending.length === 1 ? this.#pending[0]! : Buffer.concat(this.#pending);
      // Empty lines before the start line (e.g. a stray CRLF after the previous response on a
      // kept-alive connection) are not part of the message; Node's parser skips them too. Kept,
      // they would make a block that does not start with its status line (found by fuzz.test.ts).
      let lead = 0;
      while (lead < buf.length && (buf[lead] === 0x0d || buf[lead] === 0x0a)) lead++;
      if (lead > 0) {
        buf = buf.subarray(lead);
        this.#pendingLen = buf.length;
      }
      this.#pending = buf.length ? [buf] : [];
      if (buf.length === 0) return;
      const end = findHeadEnd(buf);
      if (end < 0) return;
      const headBytes = Buffer.from(buf.subarray(0, end));
      const rest = buf.subarray(end);
      const head = parseHead(headBytes);
      const status = this.#o.kind === "response" ? statusOf(head.startLine) : NaN;
      if (this.#o.kind === "response" && status >= 100 && status < 200 && status !== 101) {
        // Interim responses (100, 102, 103) are not recorded: the block starts at the final one.
        this.#pending = rest.length ? [Buffer.from(rest)] : [];
        this.#pendingLen = rest.length;
        if (rest.length === 0) return;
        continue;
      }
      this.#pending = [];
      this.#pendingLen = 0;
      this.#startBody(head, status);
      // Not copied: the spool keeps socket chunks by reference, and this is part of one.
      if (rest.length) this.#feedBody(rest);
      return;
    }
  }

  #startBody(head: ParsedHead, status: number): void {
    this.#head = head;
    this.#status = status;
    if (status === 101) {
      this.upgraded = true;
      this.#mode = "none";
    } else if (this.#o.noBody || status === 204 || status === 304) {
      this.#mode = "none";
    } else if (isChunked(head)) {
      this.#mode = "chunked";
      this.#dechunker = new Dechunker();
      // Chunked bodies are hashed as they come, both as received and de-chunked (either may be
      // stored); other bodies are hashed once they are whole (finalize).
      this.#rawBlockHash = newHash(this.#o.digest).update(head.bytes);
      this.#rawBodyHash = newHash(this.#o.digest);
      this.#entityHash = newHash(this.#o.digest);
      this.#entityBlockHash = newHash(this.#o.digest).update(rewriteHead(head, dechunkRenames(this.#o.lenient ?? false)));
    } else {
      const cl = firstFieldValue(head.fields, "content-length");
      if (cl !== undefined && /^\d+$/.test(cl)) {
        this.#mode = "length";
        this.#remaining = Number(cl);
      } else if (this.#o.kind === "request") {
        this.#mode = this.#o.bodyUntilEnd ? "close" : "none";
      } else {
        this.#mode = "close";
      }
    }
    if (this.#mode === "none" || (this.#mode === "length" && this.#remaining === 0)) {
      this.#complete = true;
      return;
    }
    // Spelled out (a `{ ...spool, keepOnFailure }` costs ~0.6 µs per message in Node 20's V8);
    // Required<> makes a new SpoolOptions field a compile error here instead of a silent drop.
    const spool: Required<SpoolOptions> = { memoryBytes: this.#o.spool.memoryBytes, dir: this.#o.spool.dir ?? null, keepOnFailure: true };
    this.#spool = new Spool(spool);
  }

  #feedBody(chunk: Buffer): void {
    if (this.#complete || this.#mode === "none") return;
    let data = chunk;
    if (this.#mode === "length") {
      if (data.length > this.#remaining) data = data.subarray(0, this.#remaining);
      this.#remaining -= data.length;
    }
    const limit = this.#o.maxBodyBytes;
    if (limit > 0 && this.#rawLength + data.length > limit) {
      data = data.subarray(0, Math.max(0, limit - this.#rawLength));
      this.#cutAtLimit = true;
    }
    if (data.length > 0) {
      if (this.#dechunker) {
        const used = this.#dechunker.feed(data, (d) => {
          this.#entityHash!.update(d);
          this.#entityBlockHash!.update(d);
          this.#entityLength += d.length;
        });
        // Bytes past the last chunk do not belong to this message; on a framing error all
        // received bytes are kept (the record is then wire-exact).
        if (this.#dechunker.done) {
          data = data.subarray(0, used);
          this.#complete = true;
        }
        this.#rawBodyHash!.update(data);
        this.#rawBlockHash!.update(data);
      } else {
        this.#entityLength += data.length;
      }
      this.#rawLength += data.length;
      this.#spool!.write(data);
      if (!this.#dechunker) this.#hashOffThread();
    }
    if (this.#mode === "length" && this.#remaining === 0) this.#complete = true;
    if (this.#cutAtLimit) this.#complete = true;
  }

  /**
   * A body past the spool's memory (not chunked: the worker hashes the bytes as they are) is
   * hashed by the digest worker from the spool's file, from its first byte on; what this thread
   * hashed so far is dropped. Then the worker is told as the file grows.
   */
  #hashOffThread(): void {
    const spool = this.#spool!;
    if (!this.#offThread) {
      if (!spool.onDisk || spool.cut) return;
      // A response's block digest waits until a record needs it (Captured.blockDigestReady).
      this.#offThread = startDigestJob(spool.filePath!, this.#o.digest, this.#o.kind === "response" ? null : this.#head!.bytes);
      return;
    }
    const onDisk = spool.bytesOnDisk;
    if (onDisk - this.#offThreadTold < DIGEST_PROGRESS_BYTES) return;
    this.#offThreadTold = onDisk;
    this.#offThread.progress(onDisk);
  }

  /** The digests of a body hashed off this thread, or read back from the spool when the worker could not. */
  async #offThreadDigests(head: Buffer, body: StreamSource): Promise<BodyDigests> {
    const d = await this.#offThread!.finish(this.#rawLength);
    if (d) return d;
    const again = await digestsOf(this.#o.digest, head, body);
    return { block: again.block.digest(), payload: again.payload.digest() };
  }

  /**
   * Finish the message. `ended` says how the body ended when the framing did not say it:
   * `clean` (orderly close for close-delimited bodies), or a truncation cause.
   * Returns null when no complete head was seen (nothing is recorded then).
   */
  async finalize(
    mode: ChunkedMode,
    ended: "clean" | Truncation,
    o: { lenient?: boolean; rejected?: boolean } = {},
  ): Promise<CapturedMessage | null> {
    const lenient = o.lenient ?? false;
    const head = this.#head;
    if (!head) return null;
    const alg = this.#o.digest;
    let truncated: Truncation | null = null;
    if (this.#cutAtLimit) truncated = "length";
    else if (!this.#complete) truncated = ended === "clean" && this.#mode === "close" ? null : ended === "clean" ? "disconnect" : ended;
    const framingError = this.#dechunker?.error ?? null;
    const spool = this.#spool;
    // A spool kept in memory is finished at once (DONE): nothing to wait for.
    const finished = spool?.finish() ?? DONE;
    if (finished !== DONE) await finished;
    // A spool that could not keep every byte (issue #26): the body is what it kept, as received.
    const spoolFailure = spool?.cut ?? null;
    // Bytes Node's parser refused (decisions.md §1) or a broken chunk framing are kept as received.
    const asReceived = framingError !== null || o.rejected === true || spoolFailure !== null;
    if (asReceived) truncated = truncated && !framingError && !o.rejected ? truncated : "unspecified";
    const rawLength = spoolFailure ? spool!.size : this.#rawLength;
    const dechunk = this.#dechunker !== null && mode === "dechunk" && !asReceived;
    const trailers = this.#dechunker?.trailers ?? [];
    let storedHead = head.bytes;
    if (dechunk) storedHead = rewriteHead(head, dechunkRenames(lenient), trailers);
    const addedLength = this.#o.kind === "request" && this.#mode === "close";
    if (addedLength) storedHead = rewriteHead(head, {}, [], [["content-length", String(rawLength)]]);
    let body: StreamSource | null = null;
    let bodyLength = 0;
    if (spool) {
      if (dechunk) {
        bodyLength = this.#entityLength;
        body = {
          size: bodyLength,
          createReadStream: () => spool.createReadStream().pipe(new DechunkStream()),
          memory: () => {
            const wire = spool.memory();
            if (!wire) return null;
            const d = new Dechunker();
            const out: Uint8Array[] = [];
            for (const c of wire) d.feed(c, (data) => out.push(data));
            return out;
          },
        };
      } else {
        bodyLength = rawLength;
        body = spool;
      }
    }
    // Payload: the entity (chunked coding removed), or the body bytes as received on a framing error.
    let payload: string | null = null;
    let blockHash: Hash | null = null;
    let blockDigest: Buffer | null = null;
    // A spooled response's block digest, left until a record needs it (blockDigestReady).
    let blockFromSpool = false;
    if (spoolFailure) {
      // The running hashes saw bytes the spool dropped: hash what it kept.
      this.#offThread?.cancel();
      const digests = await digestsOf(alg, storedHead, body);
      blockHash = digests.block;
      payload = formatDigest(alg, digests.payload.digest());
    } else if (this.#offThread) {
      // Not chunked: the worker hashed the head and the body as received.
      const d = await this.#offThreadDigests(head.bytes, spool!);
      payload = formatDigest(alg, d.payload);
      if (!addedLength) blockDigest = d.block;
      blockFromSpool = !addedLength && d.block === null;
    } else if (this.#dechunker) {
      payload = formatDigest(alg, (asReceived && this.#rawBodyHash ? this.#rawBodyHash : this.#entityHash!).digest());
      if (!dechunk && !addedLength) blockHash = this.#rawBlockHash!;
      else if (dechunk && trailers.length === 0) blockHash = this.#entityBlockHash!;
    }
    // Not chunked and not off-thread: the body, if any, is whole in memory. Its payload digest is
    // taken here in one call; the block digest (head and body) when a record asks for it, which a
    // response recorded as a revisit never does (its block is the head alone).
    let bodyInMemory: readonly Uint8Array[] | null = null;
    if (!spoolFailure && !this.#offThread && !this.#dechunker) {
      // (null is not expected: then the body is read back rather than guessed.)
      const whole = spool ? spool.memory() : NO_BODY;
      if (spool) payload = formatDigest(alg, whole ? digestBytes(alg, whole) : (await digestsOf(alg, head.bytes, body)).payload.digest());
      // A stored head that gained a Content-Length is hashed with the body below.
      bodyInMemory = addedLength ? null : whole;
    }
    if (!blockHash && !blockDigest && !bodyInMemory && !blockFromSpool) {
      // Trailers or a Content-Length went into the stored head after the body was hashed: hash the block again.
      blockHash = newHash(alg).update(storedHead);
      if (body) for await (const c of body.createReadStream()) blockHash.update(c as Buffer);
    }
    const m = new Captured(alg, blockDigest ?? blockHash, bodyInMemory, spool, blockFromSpool);
    m.rawHead = head.bytes;
    m.storedHead = storedHead;
    m.addedContentLength = addedLength;
    m.spoolFailure = spoolFailure;
    m.startLine = head.startLine;
    m.status = this.#status;
    m.body = body;
    m.bodyLength = bodyLength;
    m.wireBodyLength = this.#rawLength;
    m.payloadDigest = payload;
    m.truncated = truncated;
    m.chunked = this.#dechunker !== null;
    m.framingError = framingError;
    m.firstByteMicros = this.#firstByte ?? this.#o.now();
    m.headFields = head.fields;
    return m;
  }

  /** Bytes received but not yet part of a complete head (for error reporting). */
  get pendingBytes(): number {
    return this.#pendingLen;
  }

  async discard(): Promise<void> {
    this.#offThread?.cancel();
    await this.#spool?.finish().catch(() => undefined);
    await this.#spool?.dispose();
  }
}

/**
 * A finished message. Its block digest is final when made, or, for a body kept in memory, the
 * hash of the head finished with the body on first read (once per message: a revisit reads none).
 * A class, not a literal with a getter: V8 builds the latter through its runtime (#25).
 */
class Captured implements CapturedMessage {
  rawHead!: Buffer;
  storedHead!: Buffer;
  addedContentLength = false;
  spoolFailure: string | null = null;
  startLine = "";
  status = NaN;
  body: StreamSource | null = null;
  bodyLength = 0;
  wireBodyLength = 0;
  payloadDigest: string | null = null;
  truncated: Truncation | null = null;
  chunked = false;
  framingError: { offset: number; reason: string } | null = null;
  firstByteMicros = 0n;
  headFields!: ParsedHead["fields"];
  readonly #alg: DigestAlgorithm;
  /** null: the stored head and the body in memory, hashed on first read. */
  #block: Hash | Buffer | string | null;
  #bodyInMemory: readonly Uint8Array[] | null;
  readonly #spool: Spool | null;
  /** The block is the stored head and the spool's file, not hashed yet (blockDigestReady). */
  #blockFromSpool: boolean;
  #blockReady: Promise<void> | null = null;
  #disposed = false;

  constructor(alg: DigestAlgorithm, block: Hash | Buffer | null, bodyInMemory: readonly Uint8Array[] | null, spool: Spool | null, blockFromSpool: boolean) {
    this.#alg = alg;
    this.#block = block;
    this.#bodyInMemory = bodyInMemory;
    this.#spool = spool;
    this.#blockFromSpool = blockFromSpool;
  }

  blockDigestReady(): Promise<void> {
    if (!this.#blockFromSpool) return DONE;
    return (this.#blockReady ??= this.#hashSpooledBlock());
  }

  async #hashSpooledBlock(): Promise<void> {
    const spool = this.#spool!;
    const bytes =
      (await blockDigestOfFile(spool.filePath!, this.#alg, this.storedHead, spool.size)) ??
      (await digestsOf(this.#alg, this.storedHead, spool)).block.digest();
    if (!this.#blockFromSpool) return;
    this.#blockFromSpool = false;
    this.#block = bytes;
  }

  get blockDigest(): string {
    const b = this.#block;
    if (typeof b === "string") return b;
    if (this.#disposed) throw new ProxyError("ERR_INTERNAL", "a block digest was asked for after its body was released");
    let bytes: Buffer;
    if (this.#blockFromSpool) {
      this.#blockFromSpool = false;
      bytes = blockDigestOfFileSync(this.#alg, this.storedHead, this.#spool!.filePath!, this.#spool!.size);
    } else if (b === null) bytes = digestBytes(this.#alg, [this.storedHead, ...(this.#bodyInMemory ?? NO_BODY)]);
    else if (Buffer.isBuffer(b)) bytes = b;
    else bytes = b.digest();
    this.#bodyInMemory = null;
    this.#block = formatDigest(this.#alg, bytes);
    return this.#block;
  }

  dispose(): Promise<void> {
    this.#disposed = true;
    this.#bodyInMemory = null;
    return this.#spool ? this.#spool.dispose() : DONE;
  }
}

const NO_BODY: readonly Uint8Array[] = [];

/** Block and payload hashes read back from a stored head and body. */
async function digestsOf(alg: DigestAlgorithm, head: Buffer, body: StreamSource | null): Promise<{ block: Hash; payload: Hash }> {
  const block = newHash(alg).update(head);
  const payload = newHash(alg);
  if (body) {
    for await (const c of body.createReadStream()) {
      block.update(c as Buffer);
      payload.update(c as Buffer);
    }
  }
  return { block, payload };
}

/** A block digest read straight from a finished file (a caller that did not wait for blockDigestReady). */
function blockDigestOfFileSync(alg: DigestAlgorithm, head: Buffer, path: string, size: number): Buffer {
  const h = newHash(alg).update(head);
  const buf = Buffer.allocUnsafe(Math.min(size, 1024 * 1024));
  const fd = openSync(path, "r");
  try {
    for (let at = 0; at < size; ) {
      const n = readSync(fd, buf, 0, Math.min(buf.length, size - at), at);
      if (n === 0) throw new ProxyError("ERR_SPOOL", `${path} holds ${at} of ${size} bytes`);
      h.update(buf.subarray(0, n));
      at += n;
    }
  } finally {
    closeSync(fd);
  }
  return h.digest();
}

function dechunkRenames(lenient: boolean): Record<string, string> {
  const renames: Record<string, string> = { "transfer-encoding": "X-Orig-Transfer-Encoding" };
  if (lenient) renames["content-length"] = "X-Orig-Content-Length";
  return renames;
}
