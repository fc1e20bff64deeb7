/**
 * The dedup decision (issue "Deduplication", decisions.md §7): is this capture's payload already
 * archived, and where? Entries are remembered only after the original is on disk, and a capture
 * whose digest is still being written waits for that write instead of becoming a second original.
 */
import type { Config } from "../config/schema.js";
import type { Logger } from "../core/log.js";
import { firstFieldValue } from "../capture/httpHead.js";
import type { CapturedMessage } from "../capture/messageCapture.js";
import { parseDigest } from "../dedup/digestKey.js";
import type { BucketCounters, Claim, DedupEntry, DedupIndex, DigestKey } from "../dedup/types.js";
import { formatDigest } from "../warc/digest.js";
import type { RevisitOf } from "../warc/records.js";
import type { WrittenRecord } from "../warc/types.js";

export type DedupPolicy = Config["dedup"];

export interface DedupDecision {
  revisit: RevisitOf | null;
  /** Bytes of payload not stored again (0 unless a revisit). */
  bytesSaved: number;
  /** Call once the capture's outcome is known: remembers a new original (if written) and wakes waiters. */
  settle(written: WrittenRecord | null): void;
}

const TEXT_TYPE = /^(text\/|application\/(json|xml|javascript|ecmascript|x-javascript)\b|[^;]*\+(json|xml)\b)/i;

function statusQualifies(status: number, statuses: string[]): boolean {
  for (const s of statuses) if (s.endsWith("xx") ? Math.floor(status / 100) === Number(s[0]) : Number(s) === status) return true;
  return false;
}

const settled = (): void => undefined;

/** RFC 9110 §8.8.3.2 weak comparison: W/ ignored, opaque tags byte-equal. */
function weakEqual(a: string, b: string): boolean {
  const strip = (t: string) => t.trim().replace(/^W\//, "");
  return strip(a) === strip(b);
}

function etagList(v: string): string[] {
  return v.match(/(W\/)?"[^"]*"/g) ?? [];
}

const NONE: DedupDecision = { revisit: null, bytesSaved: 0, settle: settled };

export class Deduplicator {
  readonly #store: DedupIndex;
  readonly #log: Logger;
  readonly #inflight = new Map<string, Promise<void>>();
  readonly counters = new Map<string, BucketCounters>();

  constructor(store: DedupIndex, log: Logger) {
    this.#store = store;
    this.#log = log;
  }

  get store(): DedupIndex {
    return this.#store;
  }

  #count(bucket: string): BucketCounters {
    let c = this.counters.get(bucket);
    if (!c) this.counters.set(bucket, (c = { captures: 0, revisits: 0, bytesSaved: 0 }));
    return c;
  }

  /** May this capture be deduplicated (and later serve as an original)? */
  eligible(res: CapturedMessage, p: DedupPolicy): DigestKey | null {
    if (p.policy === "off" || res.truncated || !res.payloadDigest || res.bodyLength === 0) return null;
    if (!statusQualifies(res.status, p.statuses)) return null;
    const text = TEXT_TYPE.test(firstFieldValue(res.headFields, "content-type") ?? "");
    if (res.bodyLength < (text ? p.minBytes.text : p.minBytes.binary)) return null;
    return parseDigest(res.payloadDigest);
  }

  async decide(uri: string, req: CapturedMessage, res: CapturedMessage, p: DedupPolicy): Promise<DedupDecision> {
    if (p.policy === "off") return NONE;
    if (res.status === 304 && p.serverNotModified) return this.#decideNotModified(uri, req, res, p);
    const key = this.eligible(res, p);
    if (!key) return NONE;
    // Only a key of #inflight, never shown: the bytes one char each (latin1) cost less than hex.
    const k = `${key.alg}:${key.bytes.toString("latin1")}`;
    for (const b of p.buckets) this.#count(b.name).captures++;
    // Nobody here is writing this payload: look it up at once, side by side with other captures
    // of it (with a shared store each lookup is a round trip; a queue would serialize them). Only
    // a miss queues, and then looks again.
    if (!this.#inflight.has(k)) {
      let early: DedupEntry | null = null;
      try {
        early = await this.#lookup(uri, key, p);
      } catch {
        // Not found, as far as this first look goes: the queued look below says.
      }
      if (early) return this.#revisitOf(early, res);
    }
    const done = await this.#queueBehindWriters(k, p.inflightWaitMs);
    let claim: Claim | null = null;
    let hit: DedupEntry | null = null;
    try {
      hit = await this.#lookup(uri, key, p);
      if (!hit) {
        // Another instance of the fleet may be writing the same payload right now.
        claim = await this.#store.claim(key, p.inflightWaitMs);
        if (claim.kind === "settled" || (claim.kind === "mine" && claim.lookAgain)) hit = await this.#lookup(uri, key, p);
      }
    } catch (e) {
      // The store cannot say: a full response, never a revisit that cannot be verified.
      this.#log.warn("dedup-lookup-failed", { uri, error: (e as Error).message });
    }
    if (hit) {
      if (claim?.kind === "mine") claim.release();
      done();
      return this.#revisitOf(hit, res);
    }
    const release = claim?.kind === "mine" ? claim.release : settled;
    return {
      revisit: null,
      bytesSaved: 0,
      settle: (written) => {
        this.#remember(uri, key, res, written, p)
          .catch((e: unknown) => this.#log.error("dedup-remember-failed", { uri, error: e }))
          .finally(() => {
            release();
            done();
          });
      },
    };
  }

  /**
   * An identical payload still being written by this instance: wait for it (bounded), then it is
   * in the store. Whoever registered while we waited is waited for too, so captures of one payload
   * are decided, and written, in the order they arrived. Then this capture registers (in the same
   * turn as the last check, so nobody slips in between): it may become the original, and later
   * identical payloads here wait for it. Returns the call that ends its registration.
   */
  async #queueBehindWriters(k: string, waitMs: number): Promise<() => void> {
    const deadline = Date.now() + waitMs;
    for (let pending = this.#inflight.get(k); pending; pending = this.#inflight.get(k)) {
      const left = deadline - Date.now();
      if (left <= 0) break;
      let timer: NodeJS.Timeout | undefined;
      const timedOut = await Promise.race([pending.then(() => false), new Promise<boolean>((r) => (timer = setTimeout(() => r(true), left).unref()))]);
      clearTimeout(timer);
      if (timedOut) break;
    }
    let wake!: () => void;
    const mine = new Promise<void>((r) => (wake = r));
    const registered = !this.#inflight.has(k);
    if (registered) this.#inflight.set(k, mine);
    return () => {
      if (registered && this.#inflight.get(k) === mine) this.#inflight.delete(k);
      wake();
    };
  }

  async #decideNotModified(uri: string, req: CapturedMessage, res: CapturedMessage, p: DedupPolicy): Promise<DedupDecision> {
    let snm: { bucket: string; of: RevisitOf } | null = null;
    try {
      snm = await this.#serverNotModified(uri, req, res, p);
    } catch (e) {
      this.#log.warn("dedup-lookup-failed", { uri, error: (e as Error).message });
    }
    if (!snm) return NONE;
    for (const b of p.buckets) this.#count(b.name).captures++;
    this.#count(snm.bucket).revisits++;
    return { revisit: snm.of, bytesSaved: 0, settle: settled };
  }

  #revisitOf(hit: DedupEntry, res: CapturedMessage): DedupDecision {
    const c = this.#count(hit.bucket);
    c.revisits++;
    c.bytesSaved += res.bodyLength;
    return {
      revisit: {
        profile: "identical-payload-digest",
        refersTo: hit.recordId,
        refersToTargetUri: hit.url,
        refersToDate: hit.date,
        payloadDigest: res.payloadDigest!,
      },
      bytesSaved: res.bodyLength,
      settle: settled,
    };
  }

  #lookup(uri: string, key: DigestKey, p: DedupPolicy): Promise<DedupEntry | null> {
    // One bucket looked up by digest (the default policy): the store's own answer, no async frame
    // of ours around it.
    if (p.policy === "digest" && p.buckets.length === 1) return this.#store.byDigest(p.buckets[0]!.name, key);
    return this.#lookupEach(uri, key, p);
  }

  async #lookupEach(uri: string, key: DigestKey, p: DedupPolicy): Promise<DedupEntry | null> {
    for (const b of p.buckets) {
      const hit =
        p.policy === "digest"
          ? await this.#store.byDigest(b.name, key)
          : p.policy === "url"
            ? await this.#store.byUrlAndDigest(b.name, uri, key)
            : ((await this.#store.byUrlAndDigest(b.name, uri, key)) ?? (await this.#store.byDigest(b.name, key)));
      if (hit) return hit;
    }
    return null;
  }

  /** Store the new original's entries (only once it is written: `written` null means it was not). */
  async #remember(uri: string, key: DigestKey, res: CapturedMessage, w: WrittenRecord | null, p: DedupPolicy): Promise<void> {
    if (!w) return;
    const entries: DedupEntry[] = p.buckets
      .filter((b) => b.mode === "rw")
      .map((b) => ({
        bucket: b.name,
        digest: key,
        url: uri,
        date: w.date ?? "",
        recordId: w.id,
        filename: w.filename,
        offset: w.offset,
        length: w.length,
        status: res.status,
        etag: firstFieldValue(res.headFields, "etag") ?? null,
        lastModified: firstFieldValue(res.headFields, "last-modified") ?? null,
      }));
    if (entries.length) await this.#store.add(entries);
  }

  /** warc-records.md §4 server-not-modified: a 304 to a conditional request matching a stored capture. */
  async #serverNotModified(uri: string, req: CapturedMessage, res: CapturedMessage, p: DedupPolicy): Promise<{ bucket: string; of: RevisitOf } | null> {
    const inm = firstFieldValue(req.headFields, "if-none-match");
    const ims = firstFieldValue(req.headFields, "if-modified-since");
    if (!inm && !ims) return null;
    const resTag = firstFieldValue(res.headFields, "etag");
    for (const b of p.buckets) {
      for (const e of await this.#store.byUrl(b.name, uri, 50)) {
        let match = false;
        if (e.etag && resTag) match = weakEqual(e.etag, resTag);
        else if (e.etag && inm) match = etagList(inm).some((t) => weakEqual(t, e.etag!));
        else if (!e.etag && !resTag && e.lastModified && ims) match = e.lastModified === ims;
        if (match) {
          return {
            bucket: b.name,
            of: {
              profile: "server-not-modified",
              refersTo: e.recordId,
              refersToTargetUri: e.url,
              refersToDate: e.date,
              payloadDigest: formatDigest(e.digest.alg, e.digest.bytes),
            },
          };
        }
      }
    }
    return null;
  }
}
