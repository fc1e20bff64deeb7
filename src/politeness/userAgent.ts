/**
 * The User-Agent rule of a politeness policy: a configured suffix appended to what the crawler
 * sends (once: not when the User-Agent holds it already), then, when `requireContact` is on, the
 * result must name a way to reach the operator — a URL (`http://` or `https://`, as Heritrix's
 * `+http://…` convention) or an e-mail address — else the request is refused. The rewritten
 * header is what goes upstream, so the request record holds what was actually sent.
 */
import type { PolitenessPolicy } from "../config/politeness.js";

const CONTACT = [/\bhttps?:\/\/[^\s;()]+\.[^\s;()]+/i, /[^\s@;()<>,"]+@[^\s@;()<>,"]+\.[a-z]{2,}/i];

export function hasContact(userAgent: string): boolean {
  return CONTACT.some((re) => re.test(userAgent));
}

export type UserAgentResult = { ok: true; rawHeaders: string[]; userAgent: string } | { ok: false; userAgent: string; reason: string };

export function applyUserAgentRule(rawHeaders: string[], rule: PolitenessPolicy["userAgent"]): UserAgentResult {
  let at = -1;
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) {
    if (rawHeaders[i]!.toLowerCase() === "user-agent") {
      at = i;
      break;
    }
  }
  const sent = at >= 0 ? rawHeaders[at + 1]! : "";
  let userAgent = sent;
  let headers = rawHeaders;
  if (rule.suffix && !sent.includes(rule.suffix)) {
    userAgent = sent ? `${sent} ${rule.suffix}` : rule.suffix;
    headers = [...rawHeaders];
    if (at >= 0) headers[at + 1] = userAgent;
    else headers.push("User-Agent", userAgent);
  }
  if (rule.requireContact && !hasContact(userAgent)) {
    return { ok: false, userAgent, reason: `the User-Agent ${JSON.stringify(userAgent)} names no contact (a URL or an e-mail address) and this collection requires one (politeness.userAgent.requireContact)` };
  }
  return { ok: true, rawHeaders: headers, userAgent };
}
