/**
 * Index a WARC that lathe itself wrote: GETs, a chunked response, form and JSON POSTs and a 404
 * through a real in-process lathe, then `lathe index --cdxj` of its closed file. Every line
 * parses, points at the gzip member of the right record, and POSTs get the __wb_method key.
 */
import { readFileSync } from "node:fs";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { gunzipSync } from "node:zlib";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { indexCommand } from "../../src/cli/index.js";
import { base32 } from "../../src/warc/digest.js";
import { viaProxy } from "../helpers/client.js";
import { startTestLathe, type TestLathe } from "../helpers/lathe.js";
import { bytesOf, startHttpOrigin, type Origin } from "../helpers/origin.js";
import { warcFiles } from "../helpers/warcs.js";
import { createHash } from "node:crypto";

let lathe: TestLathe;
let origin: Origin;
let tmp = "";
let warcs: string[] = [];
let lines: string[] = [];

beforeAll(async () => {
  tmp = await mkdtemp(join(tmpdir(), "lathe-index-live-"));
  origin = await startHttpOrigin();
  lathe = await startTestLathe();
  const o = origin.url;
  expect((await viaProxy(lathe.proxyUrl, `${o}/text/500?b=2&a=1`)).status).toBe(200);
  expect((await viaProxy(lathe.proxyUrl, `${o}/chunked/3000`)).status).toBe(200);
  expect((await viaProxy(lathe.proxyUrl, `${o}/nothing-here`)).status).toBe(404);
  const form = await viaProxy(lathe.proxyUrl, `${o}/echo?src=form`, {
    method: "POST",
    headers: { Host: new URL(o).host, "Content-Type": "application/x-www-form-urlencoded" },
    body: "name=Lathe+Tester&comment=hello%20world",
  });
  expect(form.status).toBe(200);
  const json = await viaProxy(lathe.proxyUrl, `${o}/echo`, {
    method: "PUT",
    headers: { Host: new URL(o).host, "Content-Type": "application/json" },
    body: '{"a":[1,2],"b":{"c":"d é"}}',
  });
  expect(json.status).toBe(200);
  await lathe.stop();
  warcs = warcFiles(lathe.dir);
  const out = join(tmp, "live.cdxj");
  let err = "";
  const code = await indexCommand(["--cdxj", "--output", out, ...warcs], () => {}, { err: (s) => (err += s), isTTY: false });
  expect(err).toBe("");
  expect(code).toBe(0);
  lines = (await readFile(out, "utf8")).split("\n").filter(Boolean);
});

afterAll(async () => {
  await lathe?.stop().catch(() => {});
  await origin?.close();
  await rm(tmp, { recursive: true, force: true });
  if (lathe) await rm(lathe.dir, { recursive: true, force: true });
});

interface Parsed {
  key: string;
  timestamp: string;
  json: Record<string, string>;
}
const parse = (l: string): Parsed => {
  const m = /^(\S+) (\d{14}) (\{.*\})$/.exec(l);
  expect(m, l).not.toBeNull();
  return { key: m![1]!, timestamp: m![2]!, json: JSON.parse(m![3]!) };
};

/** The WARC header fields of the record in [offset, offset+length) of `file` (one gzip member). */
function recordAt(file: string, offset: number, length: number): { fields: Map<string, string>; block: Buffer } {
  const bytes = readFileSync(file).subarray(offset, offset + length);
  expect(bytes.subarray(0, 2).toString("hex")).toBe("1f8b");
  const rec = gunzipSync(bytes);
  const end = rec.indexOf("\r\n\r\n");
  const fields = new Map<string, string>();
  for (const line of rec.subarray(0, end).toString("utf8").split("\r\n").slice(1)) {
    const c = line.indexOf(":");
    fields.set(line.slice(0, c).toLowerCase(), line.slice(c + 1).trim());
  }
  expect(rec.subarray(0, 10).toString()).toMatch(/^WARC\/1\.[01]\r\n/);
  // The member holds exactly this record: header, block, CRLF CRLF.
  expect(rec.length).toBe(end + 4 + Number(fields.get("content-length")) + 4);
  return { fields, block: rec.subarray(end + 4, end + 4 + Number(fields.get("content-length"))) };
}

describe("lathe index of a WARC lathe wrote", () => {
  it("one line per response, sorted, each parsing as KEY TIMESTAMP JSON", () => {
    expect(warcs.length).toBeGreaterThan(0);
    expect(lines.length).toBe(5);
    const sorted = [...lines].sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
    expect(lines).toEqual(sorted);
    for (const l of lines) parse(l);
  });

  it("offset and length are the gzip member of the record named by url and timestamp", () => {
    for (const l of lines) {
      const p = parse(l);
      const file = warcs.find((w) => w.endsWith("/" + p.json.filename))!;
      expect(file, p.json.filename).toBeDefined();
      const { fields } = recordAt(file, Number(p.json.offset), Number(p.json.length));
      expect(fields.get("warc-type")).toBe("response");
      expect(fields.get("warc-target-uri")).toBe(p.json.url);
      expect(fields.get("warc-date")!.replace(/\D/g, "").slice(0, 14)).toBe(p.timestamp);
      expect(fields.get("warc-payload-digest")).toBe(p.json.digest);
    }
  });

  it("GET keys are SURTs; status and mime from the HTTP head", () => {
    const port = origin.port;
    const text = lines.map(parse).find((p) => p.json.url.includes("/text/500"))!;
    expect(text.key).toBe(`1,0,0,127:${port})/text/500?a=1&b=2`);
    expect(text.json).toMatchObject({ mime: "text/html", status: "200" });
    const missing = lines.map(parse).find((p) => p.json.url.endsWith("/nothing-here"))!;
    expect(missing.json.status).toBe("404");
  });

  it("the chunked response: its digest is that of the de-chunked body lathe stored", () => {
    const c = lines.map(parse).find((p) => p.json.url.endsWith("/chunked/3000"))!;
    expect(c.key).toBe(`1,0,0,127:${origin.port})/chunked/3000`);
    const body = bytesOf(3000, 3007);
    expect(c.json.digest).toBe("sha1:" + base32(createHash("sha1").update(body).digest()));
  });

  it("POST and PUT: __wb_method keys with the body, requestBody and method", () => {
    const port = origin.port;
    const post = lines.map(parse).find((p) => p.json.method === "POST")!;
    expect(post.key).toBe(`1,0,0,127:${port})/echo?__wb_method=post&comment=hello%20world&name=lathe%20tester&src=form`);
    expect(post.json.url).toBe(`${origin.url}/echo?src=form`);
    expect(post.json.requestBody).toBe("name=Lathe Tester&comment=hello world");
    const put = lines.map(parse).find((p) => p.json.method === "PUT")!;
    expect(put.key).toBe(`1,0,0,127:${port})/echo?__wb_method=put&a=1&a.2_=2&c=d+%c3%a9`);
    expect(put.json.requestBody).toBe("a=1&a.2_=2&c=d+%C3%A9");
  });
});
