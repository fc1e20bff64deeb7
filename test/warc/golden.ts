/** The golden example (read in place, never copied): ../shared/spec/examples beside the repository. */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { RecordDraft, WarcType } from "../../src/warc/types.js";
import type { WarcinfoInfo } from "../../src/warc/warcinfo.js";
import { sharedDir } from "../helpers/shared.js";
import { get, splitPlain, type ParsedRecord } from "./helpers.js";

/** Groups that read the golden files say so with `describeUsing(GOLDEN, …)`. */
export const GOLDEN = sharedDir("spec/examples");
export const GOLDEN_BASE = "lathe-20261203104507123-00000-example-host";
export const GOLDEN_WARCINFO_UUID = "fc9d2219-b89d-45a8-b5fb-d2d9e42e5441";

export function goldenBytes(suffix: string): Buffer {
  return readFileSync(join(GOLDEN.path, GOLDEN_BASE + suffix));
}

export function goldenRecords(): ParsedRecord[] {
  return splitPlain(goldenBytes(".warc"));
}

/** The warcinfo's body fields, as the collection metadata that produced them. */
export function goldenInfo(): { info: WarcinfoInfo; fields: Array<[string, string]> } {
  const body = goldenRecords()[0]!.block.toString("utf8");
  const fields = body.split("\r\n").filter(Boolean).map((l): [string, string] => [l.slice(0, l.indexOf(": ")), l.slice(l.indexOf(": ") + 2)]);
  const f = (n: string) => fields.find(([k]) => k === n)?.[1] ?? "";
  const fixed = new Set(["software", "format", "conformsTo", "hostname", "ip", "operator", "description", "isPartOf", "robots", "http-header-user-agent", "http-header-from"]);
  return {
    fields,
    info: {
      operator: f("operator"),
      description: f("description"),
      isPartOf: f("isPartOf"),
      robots: f("robots"),
      httpHeaderUserAgent: f("http-header-user-agent"),
      httpHeaderFrom: f("http-header-from"),
      extra: Object.fromEntries(fields.filter(([k]) => !fixed.has(k))),
    },
  };
}

/** The golden records after the warcinfo, as drafts (minus the fields the writer adds). */
export function goldenDrafts(): RecordDraft[] {
  return goldenRecords()
    .slice(1)
    .map((r) => ({
      type: get(r, "WARC-Type") as WarcType,
      id: get(r, "WARC-Record-ID")!,
      fields: r.fields.filter(([n]) => n !== "WARC-Warcinfo-ID" && n !== "Content-Length"),
      block: [r.block],
    }));
}
