/**
 * A request's way through a collection's politeness policy, in order: the User-Agent rule
 * (userAgent.ts), robots.txt (robotsCache.ts, robotsRules.ts; embeds exempted by embeds.ts when
 * the policy says so), then its turn at the host (hostGate.ts). The caller sends the request
 * upstream with the returned headers and releases the ticket when the fetch is over.
 *
 * State is per lathe instance: in a fleet each instance keeps its own gates and robots.txt
 * copies (hosts are not coordinated across instances).
 */
import type { PolitenessPolicy } from "../config/politeness.js";
import type { RuleAnswer } from "../warcprox/limits.js";
import { gateAnswer, robotsAnswer, userAgentAnswer } from "./answers.js";
import { embedOf } from "./embeds.js";
import { GateRefusal, HostGates, type HostView, type Ticket } from "./hostGate.js";
import { RobotsCache, type RobotsEntry, type RobotsResponse } from "./robotsCache.js";
import { applyUserAgentRule } from "./userAgent.js";

export interface PoliteRequest {
  policy: PolitenessPolicy;
  /** Where it goes; `authority` as in the URI (`host[:port]`). */
  target: { scheme: string; host: string; authority: string; path: string };
  uri: string;
  rawHeaders: string[];
  /** Aborted when the client leaves: it leaves the queue. */
  signal: AbortSignal;
  /**
   * Fetch `robotsUrl` for this request (recorded into its collection) with these request
   * headers (its User-Agent); report an unreachable site as such rather than throw.
   */
  fetchRobots(robotsUrl: string, rawHeaders: string[]): Promise<RobotsResponse>;
}

/** Go upstream with these headers and release the ticket after; or answer the client instead. */
export type Admission = { ok: true; ticket: Ticket; rawHeaders: string[] } | { ok: false; answer: RuleAnswer; why: RefusalKind };

export type RefusalKind = "robots" | "userAgent" | "queueFull" | "maxWait";

export interface PolitenessCounts {
  refused: Record<RefusalKind, number>;
  /** Requests robots.txt would refuse that went ahead as page requisites. */
  embedsExempted: number;
  robotsFetches: number;
}

export interface PolitenessReport extends PolitenessCounts {
  /** Hosts the gates know now (idle ones are forgotten), requests at them and waiting, hosts in back-off. */
  hosts: HostView[];
  hostsKnown: number;
  active: number;
  queued: number;
  backingOff: number;
  robotsCached: number;
  /** false: each instance of a fleet keeps its own gates (hosts are not coordinated across instances). */
  coordinated: false;
}

/** Hosts a report lists (the busiest); the totals count them all. */
const REPORTED_HOSTS = 100;

export class Politeness {
  readonly gates: HostGates;
  readonly robots: RobotsCache;
  readonly counts: PolitenessCounts = { refused: { robots: 0, userAgent: 0, queueFull: 0, maxWait: 0 }, embedsExempted: 0, robotsFetches: 0 };

  constructor(o: { now?: () => number; robotsCacheMs?: number; robotsRetryMs?: number } = {}) {
    this.gates = new HostGates(o.now);
    this.robots = new RobotsCache({ ...(o.now ? { now: o.now } : {}), ...(o.robotsCacheMs ? { cacheMs: o.robotsCacheMs } : {}), ...(o.robotsRetryMs ? { retryMs: o.robotsRetryMs } : {}) });
  }

  /** Rejects only with the signal's reason (the client left). */
  async admit(r: PoliteRequest): Promise<Admission> {
    const ua = applyUserAgentRule(r.rawHeaders, r.policy.userAgent);
    if (!ua.ok) return this.#refuse("userAgent", userAgentAnswer(ua.reason));
    const host = r.target.host.toLowerCase();
    try {
      if (r.policy.robots !== "ignore" && r.target.path !== "/robots.txt") {
        const refusal = await this.#checkRobots(r, host, ua.rawHeaders, ua.userAgent);
        if (refusal) return this.#refuse("robots", refusal);
        r.signal.throwIfAborted();
      }
      const ticket = await this.gates.acquire(host, r.policy, { signal: r.signal });
      return { ok: true, ticket, rawHeaders: ua.rawHeaders };
    } catch (e) {
      if (!(e instanceof GateRefusal)) throw e;
      return this.#refuse(e.rule === "politeness.maxQueuePerHost" ? "queueFull" : "maxWait", gateAnswer(e));
    }
  }

  /** Per-host state for /status, the control API, /metrics and the live page: the busiest hosts first. */
  report(maxHosts = REPORTED_HOSTS): PolitenessReport {
    const all = this.gates.snapshot();
    const totals = { hostsKnown: all.length, active: 0, queued: 0, backingOff: 0 };
    for (const h of all) {
      totals.active += h.active;
      totals.queued += h.queued;
      if (h.backoffMs > 0) totals.backingOff++;
    }
    return { ...totals, robotsCached: this.robots.entries().length, ...structuredClone(this.counts), coordinated: false, hosts: all.slice(0, maxHosts) };
  }

  /** The 403 when robots.txt disallows the URL, else null (its Crawl-delay now applies to the host). */
  async #checkRobots(r: PoliteRequest, host: string, headers: string[], userAgent: string): Promise<RuleAnswer | null> {
    const robotsUrl = `${r.target.scheme}://${r.target.authority}/robots.txt`;
    const entry: RobotsEntry = await this.robots.get(robotsUrl, () => this.#fetchInTurn(r, host, robotsUrl, headers));
    const exempt = r.policy.robots === "obey-except-embeds" && embedOf(r.rawHeaders).embed;
    const state = entry.state;
    if (state.kind === "allow-all") return null;
    if (state.kind === "disallow-all") return exempt ? this.#exempted() : robotsAnswer(robotsUrl, state);
    this.gates.setCrawlDelay(host, state.rules.crawlDelayMs(userAgent));
    const verdict = state.rules.verdict(r.uri, userAgent);
    if (verdict.allowed) return null;
    return exempt ? this.#exempted() : robotsAnswer(robotsUrl, verdict);
  }

  #exempted(): null {
    this.counts.embedsExempted++;
    return null;
  }

  /** robots.txt is a request to the host like any other: it takes a turn (ahead of the queue, which waits for it). */
  async #fetchInTurn(r: PoliteRequest, host: string, robotsUrl: string, headers: string[]): Promise<RobotsResponse> {
    const ticket = await this.gates.acquire(host, r.policy, { first: true });
    this.counts.robotsFetches++;
    const res = await r.fetchRobots(robotsUrl, headers).catch((e: unknown): RobotsResponse => ({ kind: "unreachable", error: (e as Error)?.message ?? String(e) }));
    ticket.release(res.kind === "response" ? { status: res.status } : {});
    return res;
  }

  #refuse(why: RefusalKind, answer: RuleAnswer): Admission {
    this.counts.refused[why]++;
    return { ok: false, answer, why };
  }
}
