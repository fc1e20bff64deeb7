/**
 * lathe's answers for politeness refusals, in the shape of warcprox's rule answers (a
 * `Warcprox-Meta` header saying what blocked the request, a text body naming the rule, then
 * close): 403 for robots.txt and the User-Agent rule, 503 with `Retry-After` for a request that
 * could not wait for its turn.
 */
import { type RuleAnswer, asciiJson, ruleAnswer } from "../warcprox/limits.js";
import type { GateRefusal } from "./hostGate.js";
import type { RobotsVerdict } from "./robotsRules.js";

/** A URL robots.txt disallows (or every URL, while robots.txt cannot be read). */
export function robotsAnswer(robotsUrl: string, v: RobotsVerdict | { why: string }): RuleAnswer {
  const detail = "why" in v ? { robots: robotsUrl, reason: v.why } : { robots: robotsUrl, "user-agent": v.group, ...(v.line ? { line: v.line, rule: v.rule } : {}) };
  const because = "why" in v ? `${v.why}, so every URL of the site is disallowed for now (RFC 9309 §2.3.1.4)` : v.line ? `line ${v.line}: ${v.rule}` : "its rules";
  return ruleAnswer(403, "Forbidden", { "blocked-by-robots": detail }, `request rejected by lathe: blocked by ${robotsUrl} (${because})\n`);
}

export function userAgentAnswer(reason: string): RuleAnswer {
  return ruleAnswer(403, "Forbidden", { "blocked-by-politeness": { rule: "userAgent.requireContact" } }, `request rejected by lathe: ${reason}\n`);
}

export function gateAnswer(r: GateRefusal): RuleAnswer {
  const body = `request refused by lathe for the site's sake: ${r.message}; retry in ${r.retryAfterS} s\n`;
  return {
    status: 503,
    reason: "Service Unavailable",
    headers: [
      ["Content-Type", "text/plain;charset=utf-8"],
      ["Connection", "close"],
      ["Content-Length", String(Buffer.byteLength(body, "utf8"))],
      ["Retry-After", String(r.retryAfterS)],
      ["Warcprox-Meta", asciiJson({ "politeness-refused": { rule: r.rule } })],
    ],
    body,
  };
}
