/**
 * `pages/pages.jsonl` of a WACZ (issue #23): the entry points ReplayWeb.page lists. Found in the
 * same pass that indexes the WARCs (`inspect` sees every record in file order):
 *
 * - given pages (`lathe record`: the pages it visited, with their titles): each page's own
 *   response/revisit record, named by id, gives its timestamp;
 * - otherwise, in this order of preference, whichever finds any page:
 *   1. declared: the pages a crawler wrote a page-level resource for — `urn:view:<page>` (lathe's
 *      screenshots, `lathe record` and the resources API), `screenshot:<page>` (brozzler through
 *      WARCPROX_WRITE_RECORD), `urn:pageinfo:<page>` (Browsertrix). A title comes from the
 *      record's WARC-JSON-Metadata (`extra.title`, as `lathe record` writes it) when present;
 *   2. top-level navigations: `text/html` 200 responses (or revisits) whose request record says
 *      `Sec-Fetch-Dest: document` (or, without Sec-Fetch-Dest, `Sec-Fetch-Mode: navigate`) —
 *      used when any request in the package carries those headers, i.e. a browser made them;
 *   3. every `text/html` 200 response (or revisit).
 * `from`/`to` keep only pages captured in a window (a session's lifetime).
 */
import { createHash } from "node:crypto";
import type { WarcRecord } from "../warc/reader.js";

export interface Page {
  url: string;
  /** RFC 3339: the record's WARC-Date. */
  ts: string;
  title?: string;
}

export interface GivenPage {
  url: string;
  title: string | null;
  /** WARC-Record-ID of the page's response/revisit; pages without one are left out (nothing to replay). */
  recordId: string | null;
}

export type PageSource = { kind: "given"; pages: GivenPage[] } | { kind: "detect"; from?: Date; to?: Date };

/** Which rule produced the list. */
export type PageRule = "given" | "declared" | "navigation" | "html";

/** The first line of pages.jsonl (WACZ 1.1.1's example, byte for byte). */
export const PAGES_HEADER = '{"format": "json-pages-1.0", "id": "pages", "title": "All Pages"}';

const DECLARING = /^(?:urn:view:|screenshot:|urn:pageinfo:)(https?:\/\/\S+)$/;

interface HtmlCapture {
  page: Page;
  id: string | null;
  concurrentTo: string[];
}

export class PageCollector {
  readonly #source: PageSource;
  readonly #given = new Map<string, GivenPage>();
  readonly #givenFound: Page[] = [];
  readonly #declared = new Map<string, Page>();
  readonly #html: HtmlCapture[] = [];
  /** Navigation requests: their own ids, and the ids they name in WARC-Concurrent-To. */
  readonly #navIds = new Set<string>();
  readonly #navTargets = new Set<string>();
  #navKnown = false;

  constructor(source: PageSource) {
    this.#source = source;
    if (source.kind === "given") for (const p of source.pages) if (p.recordId) this.#given.set(p.recordId, p);
  }

  /** Look at one record (IndexWarcOptions.inspect). */
  inspect = (rec: WarcRecord): void => {
    if (this.#source.kind === "given") {
      const g = rec.recordId ? this.#given.get(rec.recordId) : undefined;
      if (g && rec.date) this.#givenFound.push({ url: g.url, ts: rec.date, ...(g.title ? { title: g.title } : {}) });
      return;
    }
    if (!rec.date || !this.#inWindow(rec.date)) return;
    const t = rec.warcType;
    if (t === "resource" || t === "metadata") this.#declaring(rec);
    else if (t === "request") this.#request(rec);
    else if (t === "response" || t === "revisit") this.#response(rec);
  };

  #inWindow(date: string): boolean {
    if (this.#source.kind !== "detect") return true;
    const { from, to } = this.#source;
    if (!from && !to) return true;
    // A second of slack: WARC/1.0 dates are whole seconds, cut down from the instant of capture.
    const ms = Date.parse(date);
    return !(from && ms < from.getTime() - 1000) && !(to && ms > to.getTime() + 1000);
  }

  #declaring(rec: WarcRecord): void {
    const url = declaredPage(rec.targetUri);
    if (url === null) return;
    const page: Page = { url, ts: rec.date! };
    const title = titleFromMetadata(rec.get("warc-json-metadata"));
    if (title) page.title = title;
    const key = `${page.url} ${page.ts}`;
    const had = this.#declared.get(key);
    if (!had || (!had.title && page.title)) this.#declared.set(key, page);
  }

  #request(rec: WarcRecord): void {
    const head = rec.httpHead();
    if (!head) return;
    const dest = head.get("sec-fetch-dest")?.toLowerCase() ?? null;
    const mode = head.get("sec-fetch-mode")?.toLowerCase() ?? null;
    if (dest === null && mode === null) return;
    this.#navKnown = true;
    if (dest === "document" || (dest === null && mode === "navigate")) {
      if (rec.recordId) this.#navIds.add(rec.recordId);
      for (const id of rec.getAll("warc-concurrent-to")) this.#navTargets.add(id);
    }
  }

  #response(rec: WarcRecord): void {
    const uri = rec.targetUri;
    if (!uri || !/^https?:/i.test(uri)) return;
    const head = rec.httpHead();
    if (!head || head.status !== 200) return;
    const mime = head.get("content-type")?.split(";", 1)[0]!.trim().toLowerCase();
    if (mime !== "text/html") return;
    this.#html.push({ page: { url: uri, ts: rec.date! }, id: rec.recordId, concurrentTo: rec.getAll("warc-concurrent-to") });
  }

  /** The pages, by time, and the rule that found them. */
  result(): { pages: Page[]; rule: PageRule } {
    if (this.#source.kind === "given") return { pages: sortPages(dedupe(this.#givenFound)), rule: "given" };
    if (this.#declared.size > 0) return { pages: sortPages([...this.#declared.values()]), rule: "declared" };
    const all = this.#html.map((h) => h.page);
    if (this.#navKnown) {
      const nav = this.#html.filter((h) => (h.id !== null && this.#navTargets.has(h.id)) || h.concurrentTo.some((id) => this.#navIds.has(id)));
      if (nav.length > 0) return { pages: sortPages(dedupe(nav.map((h) => h.page))), rule: "navigation" };
    }
    return { pages: sortPages(dedupe(all)), rule: "html" };
  }
}

/** The page a record declares by its URI (`urn:view:<page>` …), or null. */
export function declaredPage(uri: string | null): string | null {
  return DECLARING.exec(uri ?? "")?.[1] ?? null;
}

/** `extra.title` (or `page.title`) of a WARC-JSON-Metadata value, if it holds one. */
function titleFromMetadata(json: string | null): string | null {
  if (!json) return null;
  try {
    const m = JSON.parse(json) as { extra?: { title?: unknown }; page?: { title?: unknown } };
    const t = m.extra?.title ?? m.page?.title;
    return typeof t === "string" && t.trim() !== "" ? t : null;
  } catch {
    return null;
  }
}

function dedupe(pages: Page[]): Page[] {
  const seen = new Set<string>();
  return pages.filter((p) => {
    const k = `${p.url} ${p.ts}`;
    if (seen.has(k)) return false;
    seen.add(k);
    return true;
  });
}

const sortPages = (pages: Page[]) => pages.sort((a, b) => Date.parse(a.ts) - Date.parse(b.ts) || (a.url < b.url ? -1 : a.url > b.url ? 1 : 0));

/** pages.jsonl: the header line, then one line per page with a stable id (url and ts hashed). */
export function pagesJsonl(pages: Page[]): Buffer {
  const lines = [PAGES_HEADER];
  for (const p of pages) {
    const id = createHash("sha256").update(`${p.url} ${p.ts}`).digest("hex").slice(0, 32);
    lines.push(JSON.stringify({ id, url: p.url, ts: p.ts, ...(p.title !== undefined ? { title: p.title } : {}) }));
  }
  return Buffer.from(lines.join("\n") + "\n", "utf8");
}
