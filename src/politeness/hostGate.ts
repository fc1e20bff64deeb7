/**
 * The per-host gate: at most `maxConcurrentPerHost` requests to a host at once, a gap after each
 * (`delayMs`, or `delayFactor` × the last fetch's duration, or the robots.txt Crawl-delay, capped
 * by `maxDelayMs`), and a back-off after 5xx and 429. Requests wait in a bounded FIFO queue per
 * host, in arrival order; past `maxWaitMs` (or when the queue is full) they are refused with a
 * GateRefusal. A waiting request is a closure and a timer: it holds no upstream connection, and
 * a client that leaves (its AbortSignal) leaves the queue.
 *
 * One gate per host name, shared by every collection with politeness on: the site does not care
 * which collection asks. Each request is held to its own collection's numbers; the queue head
 * decides, so the order stays the arrival order.
 */
import type { PolitenessPolicy } from "../config/politeness.js";
import { asksForBackoff, backoffWaitMs, retryAfterMs } from "./backoff.js";

export type GateRules = Pick<PolitenessPolicy, "maxConcurrentPerHost" | "delayMs" | "delayFactor" | "maxDelayMs" | "maxWaitMs" | "maxQueuePerHost" | "backoffMs" | "maxBackoffMs">;

/** How a request through the gate ended: the origin's status (none when it never answered). */
export interface GateOutcome {
  status?: number | undefined;
  retryAfter?: string | undefined;
}

/** The request's turn; `release` once its fetch is over (later calls are ignored). */
export interface Ticket {
  release(outcome: GateOutcome): void;
}

/** A request the gate will not let wait (queue full) or that waited too long. */
export class GateRefusal extends Error {
  constructor(
    message: string,
    /** Which setting refused it, e.g. `politeness.maxWaitMs`. */
    readonly rule: string,
    readonly retryAfterS: number,
  ) {
    super(message);
  }
}

/** What /status, the control API and /metrics show of one host. */
export interface HostView {
  host: string;
  active: number;
  queued: number;
  /** The gap the next request keeps after the last one ended. */
  delayMs: number;
  crawlDelayMs: number;
  /** ms until the back-off ends (0 = none). */
  backoffMs: number;
  consecutiveFailures: number;
  lastStatus: number | null;
  requests: number;
}

interface Waiter {
  rules: GateRules;
  grant: (t: Ticket) => void;
  refuse: (e: unknown) => void;
  timer: NodeJS.Timeout;
  signal: AbortSignal | undefined;
  onAbort: () => void;
}

class HostState {
  active = 0;
  readonly queue: Waiter[] = [];
  lastEndMs = Number.NEGATIVE_INFINITY;
  lastDurationMs = 0;
  backoffUntilMs = 0;
  failures = 0;
  crawlDelayMs = 0;
  lastStatus: number | null = null;
  lastRules: GateRules | null = null;
  requests = 0;
  timer: NodeJS.Timeout | null = null;
}

/** Acquires between two sweeps of idle hosts (a long crawl visits millions of hosts). */
const SWEEP_EVERY = 1000;

export class HostGates {
  readonly #hosts = new Map<string, HostState>();
  readonly #now: () => number;
  #acquires = 0;

  constructor(now: () => number = Date.now) {
    this.#now = now;
  }

  /**
   * Wait for a turn at `host`; rejects with GateRefusal, or with the signal's reason. `first`:
   * go ahead of the queue (the robots.txt fetch the queued requests themselves wait for).
   */
  acquire(host: string, rules: GateRules, o: { signal?: AbortSignal | undefined; first?: boolean } = {}): Promise<Ticket> {
    const { signal, first = false } = o;
    if (++this.#acquires % SWEEP_EVERY === 0) this.#sweep();
    const s = this.#state(host);
    s.lastRules = rules;
    if (s.queue.length === 0 && this.#mayStart(s, rules)) return Promise.resolve(this.#start(s, rules));
    if (!first && s.queue.length >= rules.maxQueuePerHost) {
      return Promise.reject(new GateRefusal(`${s.queue.length} requests already wait for ${host} (politeness.maxQueuePerHost ${rules.maxQueuePerHost})`, "politeness.maxQueuePerHost", this.#retryAfterS(s, rules)));
    }
    return new Promise<Ticket>((grant, refuse) => {
      const w: Waiter = { rules, grant, refuse, signal, timer: undefined as unknown as NodeJS.Timeout, onAbort: () => undefined };
      const leave = (e: unknown) => {
        const i = s.queue.indexOf(w);
        if (i < 0) return;
        s.queue.splice(i, 1);
        this.#unwatch(w);
        refuse(e);
        this.#pump(s);
      };
      w.timer = setTimeout(() => leave(new GateRefusal(`waited ${rules.maxWaitMs} ms for a turn at ${host} (politeness.maxWaitMs)`, "politeness.maxWaitMs", this.#retryAfterS(s, rules))), rules.maxWaitMs);
      w.onAbort = () => leave(signal!.reason);
      signal?.addEventListener("abort", w.onAbort, { once: true });
      if (first) s.queue.unshift(w);
      else s.queue.push(w);
      this.#pump(s);
    });
  }

  /** A robots.txt Crawl-delay for `host` (0 = none); it raises the gap up to maxDelayMs. */
  setCrawlDelay(host: string, ms: number): void {
    this.#state(host).crawlDelayMs = ms;
  }

  /** Every host the gate knows, busiest first. */
  snapshot(): HostView[] {
    const now = this.#now();
    const out: HostView[] = [];
    for (const [host, s] of this.#hosts) {
      out.push({
        host,
        active: s.active,
        queued: s.queue.length,
        delayMs: s.lastRules ? this.#gapMs(s, s.lastRules) : 0,
        crawlDelayMs: s.crawlDelayMs,
        backoffMs: Math.max(0, s.backoffUntilMs - now),
        consecutiveFailures: s.failures,
        lastStatus: s.lastStatus,
        requests: s.requests,
      });
    }
    return out.sort((a, b) => b.queued + b.active - (a.queued + a.active) || a.host.localeCompare(b.host));
  }

  #state(host: string): HostState {
    let s = this.#hosts.get(host);
    if (!s) this.#hosts.set(host, (s = new HostState()));
    return s;
  }

  #gapMs(s: HostState, r: GateRules): number {
    return Math.min(r.maxDelayMs, Math.max(r.delayMs, r.delayFactor * s.lastDurationMs, s.crawlDelayMs));
  }

  #readyAtMs(s: HostState, r: GateRules): number {
    return Math.max(s.lastEndMs + this.#gapMs(s, r), s.backoffUntilMs);
  }

  #mayStart(s: HostState, r: GateRules): boolean {
    return s.active < r.maxConcurrentPerHost && this.#now() >= this.#readyAtMs(s, r);
  }

  /** A hint for a refused client: the wait before this host's queue could take it. */
  #retryAfterS(s: HostState, r: GateRules): number {
    const ahead = Math.max(0, this.#readyAtMs(s, r) - this.#now()) + s.queue.length * Math.max(this.#gapMs(s, r), 1000);
    return Math.max(1, Math.ceil(ahead / 1000 / Math.max(1, r.maxConcurrentPerHost)));
  }

  /** Let the queue's head go when it may; else wake up when it may (a release also wakes it). */
  #pump(s: HostState): void {
    if (s.timer) clearTimeout(s.timer);
    s.timer = null;
    while (s.queue.length > 0) {
      const head = s.queue[0]!;
      if (s.active >= head.rules.maxConcurrentPerHost) return;
      const wait = this.#readyAtMs(s, head.rules) - this.#now();
      if (wait > 0) {
        s.timer = setTimeout(() => this.#pump(s), wait);
        return;
      }
      s.queue.shift();
      this.#unwatch(head);
      head.grant(this.#start(s, head.rules));
    }
  }

  #unwatch(w: Waiter): void {
    clearTimeout(w.timer);
    w.signal?.removeEventListener("abort", w.onAbort);
  }

  #start(s: HostState, rules: GateRules): Ticket {
    s.active++;
    s.requests++;
    const startMs = this.#now();
    let released = false;
    return {
      release: (o) => {
        if (released) return;
        released = true;
        s.active--;
        const now = this.#now();
        s.lastEndMs = now;
        s.lastDurationMs = now - startMs;
        this.#noteOutcome(s, rules, o, now);
        this.#pump(s);
      },
    };
  }

  #noteOutcome(s: HostState, rules: GateRules, o: GateOutcome, now: number): void {
    if (o.status === undefined) return;
    s.lastStatus = o.status;
    if (!asksForBackoff(o.status)) {
      s.failures = 0;
      return;
    }
    s.failures++;
    const wait = backoffWaitMs({ failures: s.failures, retryAfterMs: retryAfterMs(o.retryAfter, now), backoffMs: rules.backoffMs, maxBackoffMs: rules.maxBackoffMs });
    s.backoffUntilMs = Math.max(s.backoffUntilMs, now + wait);
  }

  /** Forget hosts that are idle, past their gap and back-off, with no failure to remember. */
  #sweep(): void {
    const now = this.#now();
    for (const [host, s] of this.#hosts) {
      const idle = s.active === 0 && s.queue.length === 0 && s.failures === 0;
      if (idle && s.lastRules && now > this.#readyAtMs(s, s.lastRules) + 60_000) this.#hosts.delete(host);
    }
  }
}
