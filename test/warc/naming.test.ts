import { describe, expect, it } from "vitest";
import { DEFAULT_TEMPLATE, expandTemplate, formatSerial, randomToken, sanitizeHostname, templateProblem, warcFileName, type NameParts } from "../../src/warc/naming.js";
import { START } from "./helpers.js";

const parts: NameParts = { prefix: "lathe", openedMicros: START, serial: 0, hostname: "crawl7.example.org", pid: 4242, port: 8000, randomtoken: "ab12cd34" };

describe("file names", () => {
  it("expands the default template (spec example)", () => {
    expect(warcFileName(DEFAULT_TEMPLATE, parts, true)).toBe("lathe-20261203104507123-00000-crawl7.example.org.warc.gz");
    expect(warcFileName(DEFAULT_TEMPLATE, parts, false)).toBe("lathe-20261203104507123-00000-crawl7.example.org.warc");
  });

  it("expands every field", () => {
    const t = "{prefix}_{timestamp17}_{timestamp14}_{serial}_{hostname}_{shorthostname}_{pid}_{port}_{randomtoken}";
    expect(expandTemplate(t, { ...parts, serial: 7 })).toBe("lathe_20261203104507123_20261203104507_00007_crawl7.example.org_crawl7_4242_8000_ab12cd34");
  });

  it("pads serials to 5 digits and widens past 99999", () => {
    expect([0, 1, 99999, 100000, 1234567].map(formatSerial)).toEqual(["00000", "00001", "99999", "100000", "1234567"]);
  });

  it("replaces host name characters outside [A-Za-z0-9.-]", () => {
    expect(sanitizeHostname("my host_1/é.example")).toBe("my-host-1--.example");
    expect(expandTemplate("{shorthostname}-{serial}", { ...parts, hostname: "a_b.c.d" })).toBe("a-b-00000");
  });

  it("draws 8 [a-z0-9] random-token chars", () => {
    expect(randomToken(Buffer.from([0, 1, 25, 26, 35, 36, 255, 128]))).toMatch(/^[a-z0-9]{8}$/);
  });

  it("rejects unknown fields, a missing {serial} and an unknown port", () => {
    expect(templateProblem(DEFAULT_TEMPLATE)).toBeNull();
    expect(templateProblem("{prefix}-{nope}-{serial}")).toMatch(/unknown field \{nope\}/);
    expect(templateProblem("{prefix}-{timestamp17}")).toMatch(/\{serial\}/);
    expect(templateProblem("{serial}-{port}", false)).toMatch(/port/);
    expect(() => expandTemplate("{x}", parts)).toThrow(expect.objectContaining({ code: "ERR_CONFIG" }));
  });
});
