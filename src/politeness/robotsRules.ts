/**
 * One robots.txt, parsed with npm `robots-parser` (RFC 9309: groups, Allow and Disallow with the
 * longest match winning, `*` and `$` wildcards, Crawl-delay), and the verdict for a URL.
 *
 * Which group applies: robots-parser looks a group up by the product token before the first `/`
 * of the User-Agent, which for a crawler's full string ("Mozilla/5.0 (compatible; mybot/1.0
 * +https://…)") is "mozilla". lathe instead picks, as Heritrix does, the longest group token
 * that occurs in the User-Agent (case-insensitive), else `*`, and asks robots-parser with it.
 */
import { createRequire } from "node:module";

/** What lathe uses of robots-parser's Robots object. */
interface ParsedRobots {
  isAllowed(url: string, ua?: string): boolean | undefined;
  getMatchingLineNumber(url: string, ua?: string): number;
  getCrawlDelay(ua?: string): number | undefined;
}

// A CommonJS module whose typings declare an ES default export it does not have: loaded as what
// it is, `module.exports = function (url, contents)`.
const robotsParser = createRequire(import.meta.url)("robots-parser") as (url: string, contents: string) => ParsedRobots;

export interface RobotsVerdict {
  allowed: boolean;
  /** The group that applied (`*` or a token of the User-Agent). */
  group: string;
  /** The deciding line (1-based) and its text, when a rule decided. */
  line?: number;
  rule?: string;
}

/** robots-parser's form of a group name: lower-case, before the first `/`, trimmed. */
function token(ua: string): string {
  const lower = ua.toLowerCase();
  const slash = lower.indexOf("/");
  return (slash >= 0 ? lower.slice(0, slash) : lower).trim();
}

export class RobotsRules {
  readonly #robots: ParsedRobots;
  readonly #lines: string[];
  readonly #groups: string[];

  constructor(robotsUrl: string, text: string) {
    this.#robots = robotsParser(robotsUrl, text);
    this.#lines = text.split(/\r\n|\r|\n/);
    const groups = new Set<string>();
    for (const l of this.#lines) {
      const m = /^\s*user-agent\s*:\s*([^#]*)/i.exec(l);
      const t = m ? token(m[1]!) : "";
      if (t && t !== "*") groups.add(t);
    }
    // Longest first: "mybot-images" wins over "mybot" when both occur in the User-Agent.
    this.#groups = [...groups].sort((a, b) => b.length - a.length);
  }

  /** The group token for this User-Agent. */
  groupOf(userAgent: string): string {
    const ua = userAgent.toLowerCase();
    return this.#groups.find((g) => ua.includes(g)) ?? "*";
  }

  verdict(url: string, userAgent: string): RobotsVerdict {
    const group = this.groupOf(userAgent);
    // undefined: the URL is not on this robots.txt's origin; it says nothing about it.
    const allowed = this.#robots.isAllowed(url, group) !== false;
    const line = this.#robots.getMatchingLineNumber(url, group);
    if (line === undefined || line < 1) return { allowed, group };
    return { allowed, group, line, rule: (this.#lines[line - 1] ?? "").trim() };
  }

  /** The Crawl-delay for this User-Agent in ms, or 0. */
  crawlDelayMs(userAgent: string): number {
    const s = this.#robots.getCrawlDelay(this.groupOf(userAgent));
    return typeof s === "number" && Number.isFinite(s) && s > 0 ? Math.round(s * 1000) : 0;
  }
}
