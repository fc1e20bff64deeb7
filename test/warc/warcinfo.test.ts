import { beforeAll, describe, expect, it } from "vitest";
import { digestOf } from "../../src/warc/digest.js";
import { RECORD_TRAILER, serializeHeader } from "../../src/warc/serialize.js";
import { buildWarcinfo, hostIp, warcinfoFields, type WarcinfoInput } from "../../src/warc/warcinfo.js";
import { describeUsing } from "../helpers/shared.js";
import { GOLDEN, GOLDEN_BASE, GOLDEN_WARCINFO_UUID, goldenInfo, goldenRecords } from "./golden.js";
import { INFO, START, parseRecord } from "./helpers.js";

/** The golden example's warcinfo inputs: its metadata is read from the golden file when the group runs. */
let base: WarcinfoInput;

function record(input: WarcinfoInput): Buffer {
  const d = buildWarcinfo(input);
  return Buffer.concat([serializeHeader(d, { version: input.version }), ...(d.block as Buffer[]), RECORD_TRAILER]);
}

describeUsing(GOLDEN, "warcinfo", () => {
  beforeAll(() => {
    base = {
      id: `<urn:uuid:${GOLDEN_WARCINFO_UUID}>`,
      dateMicros: START,
      filename: `${GOLDEN_BASE}.warc`,
      version: "1.1",
      digest: "sha1",
      software: "lathe/0.1.0",
      hostname: "example-host",
      ip: "192.0.2.17",
      info: goldenInfo().info,
    };
  });

  it("is byte-identical to the golden example's warcinfo, given its inputs", () => {
    const golden = goldenRecords()[0]!;
    const mine = parseRecord(record(base));
    expect(mine.fields).toEqual(golden.fields);
    expect(mine.block.equals(golden.block)).toBe(true);
    expect(mine.version).toBe("WARC/1.1");
    // and the body field order matches records.txt: fixed fields, then the extra one
    expect(goldenInfo().fields.map(([n]) => n)).toEqual([
      "software", "format", "conformsTo", "hostname", "ip", "operator", "description", "isPartOf",
      "robots", "http-header-user-agent", "http-header-from", "x-example-extra",
    ]);
  });

  it("omits empty fields and keeps extra fields in the order given", () => {
    const f = warcinfoFields({ ...base, ip: undefined, info: { ...INFO, description: "", robots: "", extra: { zeta: "1", alpha: "2", empty: "" } } });
    expect(f.map(([n]) => n)).toEqual(["software", "format", "conformsTo", "hostname", "operator", "isPartOf", "http-header-user-agent", "http-header-from", "zeta", "alpha"]);
  });

  it("describes WARC 1.0 files as such, with a seconds-only date", () => {
    const d = buildWarcinfo({ ...base, version: "1.0" });
    const r = parseRecord(record({ ...base, version: "1.0" }));
    expect(r.version).toBe("WARC/1.0");
    expect(d.fields.find(([n]) => n === "WARC-Date")![1]).toBe("2026-12-03T10:45:07Z");
    const body = r.block.toString();
    expect(body).toContain("format: WARC File Format 1.0\r\n");
    expect(body).toContain("conformsTo: https://iipc.github.io/warc-specifications/specifications/warc-format/warc-1.0/\r\n");
  });

  it("digests the block with the configured algorithm", () => {
    const d = buildWarcinfo({ ...base, digest: "sha256" });
    expect(d.fields.find(([n]) => n === "WARC-Block-Digest")![1]).toBe(digestOf("sha256", d.block[0] as Buffer));
  });

  it("refuses CR/LF in values and extra names that are not tokens or repeat a fixed name", () => {
    expect(() => buildWarcinfo({ ...base, info: { ...INFO, description: "a\r\nb" } })).toThrow(/CR or LF/);
    expect(() => buildWarcinfo({ ...base, info: { ...INFO, extra: { "bad name": "x" } } })).toThrow(/not allowed/);
    expect(() => buildWarcinfo({ ...base, info: { ...INFO, extra: { Operator: "x" } } })).toThrow(/not allowed/);
  });
});

describe("warcinfo", () => {
  it("picks the first non-internal IPv4, else a global IPv6, else none", () => {
    const i = (address: string, family: "IPv4" | "IPv6", internal = false) => ({ address, family, internal, netmask: "", mac: "", cidr: null, ...(family === "IPv6" ? { scopeid: 0 } : {}) }) as never;
    expect(hostIp({ lo: [i("127.0.0.1", "IPv4", true)], eth0: [i("fe80::1", "IPv6"), i("2001:db8::5", "IPv6"), i("192.0.2.17", "IPv4")] })).toBe("192.0.2.17");
    expect(hostIp({ lo: [i("::1", "IPv6", true)], eth0: [i("fe80::1", "IPv6"), i("2001:db8::5", "IPv6")] })).toBe("2001:db8::5");
    expect(hostIp({ lo: [i("127.0.0.1", "IPv4", true)] })).toBeUndefined();
    expect(typeof (hostIp() ?? "")).toBe("string");
  });
});
