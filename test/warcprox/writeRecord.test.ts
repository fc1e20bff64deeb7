import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { startHttpOrigin, type Origin } from "../helpers/origin.js";
import { startTestLathe, type TestLathe } from "../helpers/lathe.js";
import { rawExchange } from "../helpers/client.js";
import { checkDigests, readAllWarcs } from "../helpers/warcs.js";

const run = promisify(execFile);
const SCRIPT = new URL("../helpers/brozzler_like.py", import.meta.url).pathname;

describe("WARCPROX_WRITE_RECORD", () => {
  let origin: Origin;
  let lathe: TestLathe;
  beforeAll(async () => {
    origin = await startHttpOrigin();
    lathe = await startTestLathe();
  });
  afterAll(async () => {
    await lathe.stop();
    await origin.close();
  });

  it("a brozzler-like Python client pushes a screenshot and thumbnail: 204, records linked to the page", async () => {
    const page = `${origin.url}/text/300`;
    const { stdout } = await run("python3", [SCRIPT, `127.0.0.1:${lathe.address.port}`, page, "job7"], { timeout: 30000 });
    expect(JSON.parse(stdout)).toEqual({ page: 300, screenshot: 204, thumbnail: 204 });
  });

  it("missing headers, a bad WARC-Type and a bad Warcprox-Meta get 400 naming the problem", async () => {
    const port = lathe.proxyUrl;
    const noType = await rawExchange(port, "WARCPROX_WRITE_RECORD screenshot:http://x/ HTTP/1.1\r\nHost: N/A\r\nContent-Type: image/jpeg\r\nContent-Length: 3\r\n\r\nabc");
    expect(noType).toMatch(/^HTTP\/1\.1 400 Bad request\r\n/);
    expect(noType).toMatch(/WARC-Type/);
    const badType = await rawExchange(port, "WARCPROX_WRITE_RECORD x:y HTTP/1.1\r\nWARC-Type: response\r\nContent-Type: a/b\r\nContent-Length: 1\r\n\r\nz");
    expect(badType).toMatch(/^HTTP\/1\.1 400 /);
    expect(badType).toMatch(/resource, metadata or conversion/);
    const badMeta = await rawExchange(port, "WARCPROX_WRITE_RECORD x:y HTTP/1.1\r\nWARC-Type: resource\r\nContent-Type: a/b\r\nWarcprox-Meta: {bad\r\nContent-Length: 1\r\n\r\nz");
    expect(badMeta).toMatch(/^HTTP\/1\.1 400 request rejected by warcprox: invalid Warcprox-Meta header\r\n/);
  });

  it("writes the resources verbatim into the request's warc-prefix series", async () => {
    const page = `${origin.url}/text/300`;
    await lathe.stop();
    const recs = await readAllWarcs(lathe.dir);
    for (const r of recs) expect(checkDigests(r)).toEqual([]);
    const pageRec = recs.find((r) => r.type === "response" && r.get("WARC-Target-URI") === page)!;
    const shot = recs.find((r) => r.get("WARC-Target-URI") === `screenshot:${page}`)!;
    const thumb = recs.find((r) => r.get("WARC-Target-URI") === `thumbnail:${page}`)!;
    for (const r of [shot, thumb]) {
      expect(r.type).toBe("resource");
      expect(r.get("Content-Type")).toBe("image/jpeg");
      expect(r.get("WARC-IP-Address")).toBeUndefined();
      expect(r.get("WARC-Payload-Digest")).toBe(r.get("WARC-Block-Digest"));
      expect(r.get("WARC-Concurrent-To")).toBe(pageRec.get("WARC-Record-ID"));
      expect(r.get("WARC-Date")).toBe(pageRec.get("WARC-Date"));
      expect(r.file).toMatch(/\/job7-/);
      const meta = JSON.parse(r.get("WARC-JSON-Metadata")!);
      expect(Object.keys(meta)).toEqual(["kind", "variant", "mode", "capturedAt", "page", "tool"]);
      expect(meta).toMatchObject({ kind: "screenshot", mode: "parallel", tool: "brozzler", page: { url: page, recordId: pageRec.get("WARC-Record-ID") } });
    }
    expect(JSON.parse(shot.get("WARC-JSON-Metadata")!).variant).toBe("screenshot");
    expect(JSON.parse(thumb.get("WARC-JSON-Metadata")!).variant).toBe("thumbnail");
    expect(shot.block.subarray(0, 4).toString("hex")).toBe("ffd8ffe0");
    // dedup-buckets from Warcprox-Meta: the second fetch of the same payload is a revisit.
    const again = recs.find((r) => r.get("WARC-Target-URI") === `${page}?again`)!;
    expect(again.type).toBe("revisit");
    expect(again.get("WARC-Refers-To")).toBe(pageRec.get("WARC-Record-ID"));
    expect(shot.block.length).toBe(4 + 256 * 40 + 2);
  });
});
