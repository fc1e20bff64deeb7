import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bytesOf, startHttpOrigin, type Origin } from "../helpers/origin.js";
import { startTestLathe } from "../helpers/lathe.js";
import { viaProxy } from "../helpers/client.js";
import { captureOf, checkDigests, readAllWarcs, warcFiles } from "../helpers/warcs.js";
import type { ConfigInput } from "../../src/config/schema.js";

let origin: Origin;
beforeAll(async () => {
  origin = await startHttpOrigin();
});
afterAll(async () => {
  await origin.close();
});

/** Run lathe with `overrides`, fetch `paths`, stop it and read the records back. */
async function recordWith(overrides: ConfigInput, paths: string[]) {
  const lathe = await startTestLathe(overrides);
  const responses = [];
  for (const p of paths) responses.push(await viaProxy(lathe.proxyUrl, `${origin.url}${p}`).catch(() => null));
  await lathe.stop();
  return { lathe, responses, records: await readAllWarcs(lathe.dir) };
}

describe("recording settings", () => {
  it("warc.digest sha256 writes sha256: hex digests", async () => {
    const { records } = await recordWith({ warc: { digest: "sha256" } }, ["/bytes/5000", "/chunked/3000"]);
    for (const r of records) expect(checkDigests(r)).toEqual([]);
    const { response } = captureOf(records, `${origin.url}/bytes/5000`);
    expect(response.get("WARC-Payload-Digest")).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(response.get("WARC-Block-Digest")).toMatch(/^sha256:[0-9a-f]{64}$/);
  });

  it("warc.version 1.0 writes WARC/1.0 files with whole-second dates, and gzip: false writes .warc", async () => {
    const { lathe, records } = await recordWith({ warc: { version: "1.0", gzip: false } }, ["/text/100"]);
    const files = warcFiles(lathe.dir);
    expect(files.every((f) => f.endsWith(".warc"))).toBe(true);
    for (const r of records) expect(r.get("WARC-Date")).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
    expect(records[0]!.block.toString()).toContain("format: WARC File Format 1.0");
  });

  it("capture.maxBodyBytes cuts the record (WARC-Truncated: length) but the client gets everything", async () => {
    const { responses, records } = await recordWith({ capture: { maxBodyBytes: 10_000 } }, ["/bytes/50000", "/chunked/50000"]);
    expect(responses[0]!.body.equals(bytesOf(50000, 50000))).toBe(true);
    expect(responses[1]!.body.length).toBe(50000);
    for (const r of records) expect(checkDigests(r)).toEqual([]);
    const a = captureOf(records, `${origin.url}/bytes/50000`).response;
    expect(a.get("WARC-Truncated")).toBe("length");
    expect(a.body!.equals(bytesOf(50000, 50000).subarray(0, 10_000))).toBe(true);
    const b = captureOf(records, `${origin.url}/chunked/50000`).response;
    expect(b.get("WARC-Truncated")).toBe("length");
    expect(b.body!.length).toBeLessThanOrEqual(10_000);
  });

  it("capture.maxDurationMs ends a response that takes too long (WARC-Truncated: time)", async () => {
    const { records } = await recordWith({ capture: { maxDurationMs: 300 } }, ["/slow/100"]);
    const r = captureOf(records, `${origin.url}/slow/100`).response;
    expect(r.get("WARC-Truncated")).toBe("time");
    expect(r.body!.length).toBeGreaterThan(0);
    expect(r.body!.length).toBeLessThan(100);
    expect(checkDigests(r)).toEqual([]);
  });

  it("warc.chunked wire-exact keeps the chunk framing and the entity's payload digest", async () => {
    const { records } = await recordWith({ warc: { chunked: "wire-exact" } }, ["/chunked/3000"]);
    const r = captureOf(records, `${origin.url}/chunked/3000`).response;
    expect(r.httpHead).toMatch(/\r\nTransfer-Encoding: chunked\r\n/);
    expect(r.body!.toString("latin1")).toMatch(/^[0-9a-f]+\r\n/);
    expect(r.body!.toString("latin1").endsWith("0\r\n\r\n")).toBe(true);
    // The payload digest is the de-chunked entity's, as in the default mode (warc-records.md §2.1).
    const problems = checkDigests(r);
    expect(problems).toEqual([expect.stringMatching(/payload digest mismatch/)]);
  });

  it("warcinfo fields come from configuration", async () => {
    const { records } = await recordWith({ warcinfo: { operator: "Archive Team <a@example.org>", isPartOf: "test-crawl", extra: { "x-note": "hello" } } }, ["/text/10"]);
    const info = records[0]!;
    expect(info.type).toBe("warcinfo");
    const text = info.block.toString();
    expect(text).toMatch(/^software: lathe\/\d+\.\d+\.\d+\r\nformat: WARC File Format 1\.1\r\n/);
    expect(text).toContain("operator: Archive Team <a@example.org>\r\n");
    expect(text).toContain("isPartOf: test-crawl\r\n");
    expect(text.endsWith("x-note: hello\r\n")).toBe(true);
    for (const r of records.slice(1)) expect(r.get("WARC-Warcinfo-ID")).toBe(info.get("WARC-Record-ID"));
  });
});
