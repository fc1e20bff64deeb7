/**
 * The warcinfo record that opens every file (warc-files.md §4). Pure, except `hostIp`, which
 * reads the host's interfaces (pass them in to test it).
 */
import { networkInterfaces, type NetworkInterfaceInfo } from "node:os";
import { ProxyError } from "../core/errors.js";
import { formatWarcDate, type WarcVersion } from "./date.js";
import { digestOf, type DigestAlgorithm } from "./digest.js";
import type { RecordDraft } from "./types.js";

/** The collection metadata part (config `warcinfo`, control API). */
export interface WarcinfoInfo {
  operator: string;
  description: string;
  isPartOf: string;
  robots: string;
  httpHeaderUserAgent: string;
  httpHeaderFrom: string;
  extra: Record<string, string>;
}

export interface WarcinfoInput {
  /** WARC-Record-ID, `<urn:uuid:...>`. */
  id: string;
  /** The file's open instant, µs since the epoch (the same instant as `{timestamp17}`). */
  dateMicros: bigint;
  /** The final file name (never `.open`). */
  filename: string;
  version: WarcVersion;
  digest: DigestAlgorithm;
  /** `lathe/<package version>`. */
  software: string;
  hostname: string;
  ip?: string;
  info: WarcinfoInfo;
}

const CONFORMS_TO: Record<WarcVersion, string> = {
  "1.0": "https://iipc.github.io/warc-specifications/specifications/warc-format/warc-1.0/",
  "1.1": "https://iipc.github.io/warc-specifications/specifications/warc-format/warc-1.1/",
};
const FIXED = [
  "software",
  "format",
  "conformsTo",
  "hostname",
  "ip",
  "operator",
  "description",
  "isPartOf",
  "robots",
  "http-header-user-agent",
  "http-header-from",
];
const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

/** The `application/warc-fields` body, fields in the fixed order, empty ones omitted. */
export function warcinfoFields(input: WarcinfoInput): Array<[string, string]> {
  const { info } = input;
  const fixed: Array<[string, string | undefined]> = [
    ["software", input.software],
    ["format", `WARC File Format ${input.version}`],
    ["conformsTo", CONFORMS_TO[input.version]],
    ["hostname", input.hostname],
    ["ip", input.ip],
    ["operator", info.operator],
    ["description", info.description],
    ["isPartOf", info.isPartOf],
    ["robots", info.robots],
    ["http-header-user-agent", info.httpHeaderUserAgent],
    ["http-header-from", info.httpHeaderFrom],
  ];
  const out: Array<[string, string]> = [];
  for (const [n, v] of fixed) if (v) out.push([n, v]);
  for (const [n, v] of Object.entries(info.extra)) {
    // The control API refuses these with 400; checked again so a bad value can never reach a file.
    if (!TOKEN.test(n) || FIXED.some((f) => f.toLowerCase() === n.toLowerCase())) {
      throw new ProxyError("ERR_CONFIG", `warcinfo extra field name ${JSON.stringify(n)} is not allowed`);
    }
    if (v) out.push([n, v]);
  }
  for (const [n, v] of out) {
    if (/[\r\n]/.test(v)) throw new ProxyError("ERR_CONFIG", `warcinfo field ${n} contains CR or LF`);
  }
  return out;
}

export function buildWarcinfo(input: WarcinfoInput): RecordDraft {
  const body = Buffer.from(
    warcinfoFields(input)
      .map(([n, v]) => `${n}: ${v}\r\n`)
      .join(""),
    "utf8",
  );
  return {
    type: "warcinfo",
    id: input.id,
    fields: [
      ["WARC-Type", "warcinfo"],
      ["WARC-Record-ID", input.id],
      ["WARC-Date", formatWarcDate(input.dateMicros, input.version)],
      ["WARC-Filename", input.filename],
      ["WARC-Block-Digest", digestOf(input.digest, body)],
      ["Content-Type", "application/warc-fields"],
    ],
    block: [body],
  };
}

/**
 * The host's `ip`: first non-internal IPv4, else the first non-internal, non-link-local IPv6
 * (a link-local address means nothing off the link); undefined when there is none.
 */
export function hostIp(ifaces: NodeJS.Dict<NetworkInterfaceInfo[]> = networkInterfaces()): string | undefined {
  const all = Object.values(ifaces).flatMap((l) => l ?? []).filter((a) => !a.internal);
  // `family` was a number in Node 18.0–18.3.
  const fam = (a: NetworkInterfaceInfo) => String(a.family).replace(/^4$/, "IPv4").replace(/^6$/, "IPv6");
  return (
    all.find((a) => fam(a) === "IPv4")?.address ??
    all.find((a) => fam(a) === "IPv6" && !/^fe[89ab]/i.test(a.address))?.address
  );
}
