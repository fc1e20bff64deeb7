/**
 * `blocks` / `compressed_blocks` of `Warcprox-Meta` (warcprox-compat.md §1 `blocks` row, §2):
 * urlcanon `MatchRule.applies` against `urlcanon.semantic(url)`; the first matching rule answers
 * `403 Forbidden`.
 *
 * Conditions (all present ones must hold; `{}` matches everything; an empty-string condition is
 * ignored, as Python's truthiness test in MatchRule ignores it):
 * - `domain`: the canonical host equals it or is a subdomain of it (an IP address only itself);
 *   the rule's domain goes through urlcanon `normalize_host` first;
 * - `surt`: a prefix of urlcanon's `surt()` form, e.g. `http://(com,example,)/fuh/`
 *   (port inside the parentheses: `http://(com,example:8080,)/`);
 * - `ssurt`: a prefix of `ssurt()`, e.g. `com,example,//http:/fuh/` (`com,example,//8080:http:/`);
 * - `regex`: full match of the canonical URL (compiled by the header parser as `^(?:…)$`);
 * - `substring`: occurs in the canonical URL;
 * - `parent_url_regex`: never matches (no parent URL is known to a proxy);
 * - `exact: true`: `domain`, `surt` and `ssurt` must be equal instead (no subdomains/prefixes).
 *
 * Pure: no I/O.
 */
import type { BlockRule } from "./warcproxMeta.js";
import { fromBinary } from "../url/binary.js";
import { formatUrl, hostMatchesDomain, normalizeHost, semantic, ssurtOf, surtOf } from "./urlcanon.js";
import { pythonJson, ruleAnswer, type RuleAnswer } from "./limits.js";

/** The semantic forms of one URL, computed lazily once for all rules. */
class CanonForms {
  private readonly u: ReturnType<typeof semantic>;
  private _url?: string;
  private _surt?: string;
  private _ssurt?: string;
  readonly host: string;
  constructor(url: string) {
    this.u = semantic(url);
    this.host = fromBinary(this.u.host);
  }
  get url(): string {
    return (this._url ??= formatUrl(this.u));
  }
  get surt(): string {
    return (this._surt ??= surtOf(this.u));
  }
  get ssurt(): string {
    return (this._ssurt ??= ssurtOf(this.u));
  }
}

const EMPTY_REGEX = "^(?:)$";

/** Normalized rule domains, computed once per parsed rule. */
const ruleDomains = new WeakMap<BlockRule, string>();
function ruleDomain(rule: BlockRule, domain: string): string {
  let d = ruleDomains.get(rule);
  if (d === undefined) ruleDomains.set(rule, (d = normalizeHost(domain)));
  return d;
}

function applies(rule: BlockRule, c: CanonForms): boolean {
  const exact = rule.exact === true;
  if (rule.domain) {
    const d = ruleDomain(rule, rule.domain);
    if (exact ? c.host !== d : !hostMatchesDomain(c.host, d)) return false;
  }
  if (rule.surt && (exact ? c.surt !== rule.surt : !c.surt.startsWith(rule.surt))) return false;
  if (rule.ssurt && (exact ? c.ssurt !== rule.ssurt : !c.ssurt.startsWith(rule.ssurt))) return false;
  if (rule.substring && !c.url.includes(rule.substring)) return false;
  if (rule.regex && !(rule.regex.source === EMPTY_REGEX && rule.raw.regex === "")) {
    rule.regex.lastIndex = 0;
    if (!rule.regex.test(c.url)) return false;
  }
  if (rule.parentUrlRegex && rule.raw.parent_url_regex !== "") return false;
  return true;
}

/** The first rule that blocks `url`, or null. */
export function matchBlock(rules: readonly BlockRule[] | undefined, url: string): BlockRule | null {
  if (!rules || rules.length === 0) return null;
  let c: CanonForms;
  try {
    c = new CanonForms(url);
  } catch {
    return null;
  }
  for (const r of rules) if (applies(r, c)) return r;
  return null;
}

/**
 * The `403 Forbidden` answer: `Warcprox-Meta: {"blocked-by-rule":<rule as sent, compact>}`, body
 * `request rejected by warcprox: blocked by rule found in Warcprox-Meta header: <rule with Python's
 * default separators>\n`.
 */
export function blockAnswer(rule: BlockRule): RuleAnswer {
  return ruleAnswer(
    403,
    "Forbidden",
    { "blocked-by-rule": rule.raw },
    `request rejected by warcprox: blocked by rule found in Warcprox-Meta header: ${pythonJson(rule.raw)}\n`,
  );
}
