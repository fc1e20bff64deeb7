import { describe, expect, it } from "vitest";
import { readFileSync, writeFileSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DEFAULTS } from "../../src/config/schema.js";
import { resolveConfig } from "../../src/config/validate.js";
import { loadConfig } from "../../src/cli/loadConfig.js";

describe("configuration", () => {
  it("proxy.config.json holds every setting with its embedded default", () => {
    const file = JSON.parse(readFileSync(new URL("../../proxy.config.json", import.meta.url), "utf8"));
    expect(file).toEqual(DEFAULTS);
  });

  it("README explains every key of proxy.config.json", () => {
    const readme = readFileSync(new URL("../../README.md", import.meta.url), "utf8");
    // Each section has its own heading (### `section`...) and a table row per key (| `key` |).
    for (const [section, values] of Object.entries(DEFAULTS)) {
      const start = readme.indexOf(`### \`${section}\``);
      expect(start, `README has a heading for ${section}`).toBeGreaterThan(0);
      const next = readme.indexOf("\n### ", start + 1);
      const text = readme.slice(start, next < 0 ? undefined : next);
      for (const key of Object.keys(values)) expect(text, `${section}.${key}`).toContain(`| \`${key}\` |`);
    }
  });

  it("merges layers, later ones winning", () => {
    const c = resolveConfig({ proxy: { port: 9000 } }, { proxy: { host: "127.0.0.2" }, warc: { gzip: false } });
    expect(c.proxy).toMatchObject({ port: 9000, host: "127.0.0.2" });
    expect(c.warc.gzip).toBe(false);
    expect(c.warc.prefix).toBe("lathe");
  });

  it("warc.gzip is an alias of warc.compression; both in one layer must agree", () => {
    expect(resolveConfig({ warc: { gzip: false } }).warc).toMatchObject({ compression: "none", gzip: false });
    expect(resolveConfig({ warc: { compression: "hybrid" } }).warc).toMatchObject({ compression: "hybrid", gzip: true });
    expect(resolveConfig({ warc: { compression: "none" } }, { warc: { gzip: true } }).warc.compression).toBe("gzip");
    expect(resolveConfig({ warc: { gzip: false } }, { warc: { compression: "hybrid" } }).warc).toMatchObject({ compression: "hybrid", gzip: true });
    expect(resolveConfig({ warc: { compression: "hybrid", gzip: true } }).warc.compression).toBe("hybrid");
    expect(() => resolveConfig({ warc: { compression: "hybrid", gzip: false } })).toThrow(/warc\.gzip: contradicts warc\.compression "hybrid"/);
    expect(() => resolveConfig({ warc: { compression: "zstd" } })).toThrow(/warc\.compression: must be one of "gzip", "none", "hybrid"/);
  });

  it.each([
    [{ proxy: { port: 70000 } }, /proxy\.port: must be an integer between 0 and 65535/],
    [{ proxy: { prot: 1 } }, /proxy\.prot: unknown key/],
    [{ wark: {} }, /wark: unknown section/],
    [{ warc: { version: "2.0" } }, /warc\.version: must be one of "1\.0", "1\.1"/],
    [{ warc: { prefix: "../evil" } }, /warc\.prefix: must be a safe file name part/],
    [{ warc: { filenameTemplate: "{prefix}-{timestamp17}" } }, /must contain \{serial\}/],
    [{ warc: { filenameTemplate: "{prefix}-{bogus}-{serial}" } }, /unknown field \{bogus\}/],
    [{ warcinfo: { operator: "a\r\nb" } }, /warcinfo\.operator: must not contain CR or LF/],
    [{ warcinfo: { extra: { "bad name": "x" } } }, /must be an HTTP token/],
    [{ upstream: { allowHosts: "x" } }, /upstream\.allowHosts: must be an array of strings/],
  ])("rejects %j with a message naming the key", (input, re) => {
    expect(() => resolveConfig(input)).toThrow(re);
  });

  it("names the file when it is not valid JSON, and when an explicit file is missing", () => {
    const dir = mkdtempSync(join(tmpdir(), "lathe-cfg-"));
    const f = join(dir, "bad.json");
    writeFileSync(f, "{ nope");
    expect(() => loadConfig(f, {})).toThrow(new RegExp(`${f.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")} is not valid JSON`));
    expect(() => loadConfig(join(dir, "missing.json"), {})).toThrow(/cannot read config file .*missing\.json/);
  });
});
