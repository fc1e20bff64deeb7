/**
 * HTTP/2 toward origins (http2.md §1, §2): lathe offers ALPN h2 and http/1.1, multiplexes streams
 * on one session per origin, and records each h2 exchange as its HTTP/1.1 form.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ProxyAgent, fetch as undiciFetch } from "undici";
import http2 from "node:http2";
import { originCerts } from "../helpers/certs.js";
import { h2session } from "../helpers/h2client.js";
import { frame, startRawH2Origin } from "../helpers/h2frames.js";
import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { readFileSync, readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { base32 } from "../../src/warc/digest.js";
import { GZIP_BODY, startH2Origin, streamChunk, type H2Origin } from "../helpers/h2origin.js";
import { bytesOf, startHttpsOrigin, type Origin } from "../helpers/origin.js";
import { startTestLathe, type TestLathe } from "../helpers/lathe.js";
import { checkDigests, digestString, readAllWarcs, readWarc, warcFiles, type ReadRecord } from "../helpers/warcs.js";
import { readWarcRecords } from "../../src/warc/reader.js";

const uri = (r: ReadRecord) => r.get("WARC-Target-URI") ?? "";
const run = promisify(execFile);

async function get(agent: ProxyAgent, url: string, init: Parameters<typeof undiciFetch>[1] = {}): Promise<{ status: number; body: Buffer; headers: Headers }> {
  const r = await undiciFetch(url, { dispatcher: agent, ...init });
  return { status: r.status, body: Buffer.from(await r.arrayBuffer()), headers: r.headers };
}

describe("HTTP/2 toward origins", () => {
  const certs = originCerts();
  let h2only: H2Origin;
  let both: H2Origin;
  let h1only: Origin;
  let lathe: TestLathe;
  let agent: ProxyAgent;
  let records: ReadRecord[];

  beforeAll(async () => {
    h2only = await startH2Origin(certs, { allowHTTP1: false });
    both = await startH2Origin(certs, { allowHTTP1: true });
    h1only = await startHttpsOrigin(certs);
    lathe = await startTestLathe({ upstream: { caFile: certs.caFile } });
    agent = new ProxyAgent({ uri: lathe.proxyUrl, requestTls: { ca: lathe.ca.caCertPem } });
  });
  afterAll(async () => {
    await agent.close();
    await lathe.stop();
    await Promise.all([h2only.close(), both.close(), h1only.close()]);
  });

  it("reaches an h2-only origin, 50 concurrent requests on one h2 session", async () => {
    const sizes = Array.from({ length: 50 }, (_, i) => 10 + i * 1013);
    const answers = await Promise.all(sizes.map((n) => get(agent, `${h2only.url}/bytes/${n}?c=${n}`)));
    for (const [i, a] of answers.entries()) {
      expect(a.status).toBe(200);
      expect(a.body.equals(bytesOf(sizes[i]!, sizes[i]!))).toBe(true);
    }
    expect(h2only.sessions).toBe(1);
  });

  it("passes a gzip-encoded body through undecoded, and duplicate fields as they came", async () => {
    const raw = await get(agent, `${h2only.url}/gzip`, { headers: { "accept-encoding": "gzip" } });
    expect(raw.status).toBe(200);
    const f = await get(agent, `${h2only.url}/fields`);
    expect(f.status).toBe(299);
    expect(f.headers.get("x-dup")).toBe("one, two");
    expect(f.headers.getSetCookie()).toEqual(["a=1", "b=2"]);
  });

  it("sends a chunked request body on as DATA, recorded with a content-length of its own", async () => {
    const body = bytesOf(70_000, 9);
    const stream = new ReadableStream({
      start(c) {
        c.enqueue(body.subarray(0, 30_000));
        c.enqueue(body.subarray(30_000));
        c.close();
      },
    });
    const a = await get(agent, `${h2only.url}/echo?chunked`, { method: "POST", body: stream, duplex: "half" } as Parameters<typeof undiciFetch>[1]);
    expect(a.status).toBe(200);
    expect(a.body.equals(body)).toBe(true);
    expect(h2only.seen.find((s) => s.path === "/echo?chunked")!.body.equals(body)).toBe(true);
  });

  it("cuts the client's response and records what came when the origin resets the stream mid-body", async () => {
    await expect(get(agent, `${h2only.url}/reset/40000`)).rejects.toThrow();
    // The session is still good for the next request.
    const after = await get(agent, `${h2only.url}/bytes/100?after-reset`);
    expect(after.status).toBe(200);
  });

  it("finishes the stream a GOAWAY names, then opens a new session for the next request", async () => {
    expect((await get(agent, `${h2only.url}/bytes/1?session`)).status).toBe(200);
    const before = h2only.sessions;
    const a = await get(agent, `${h2only.url}/goaway/3000`);
    expect(a.status).toBe(200);
    expect(a.body.equals(bytesOf(3000, 3000))).toBe(true);
    const b = await get(agent, `${h2only.url}/bytes/200?after-goaway`);
    expect(b.status).toBe(200);
    expect(h2only.sessions).toBe(before + 1);
  });

  it("lists 1xx and trailers of an h2 response in a metadata record concurrent to it", async () => {
    const a = await get(agent, `${h2only.url}/trailers`);
    expect(a.status).toBe(200);
    expect(a.body.toString()).toBe("with trailers");
    // An h2 client through lathe gets the 103 Early Hints before the response.
    const session = await h2session(lathe, h2only);
    const hints = await new Promise<http2.IncomingHttpHeaders>((resolve, reject) => {
      const r = session.request({ ":path": "/trailers?h2client" });
      r.on("headers", (h) => resolve(h));
      r.on("response", () => reject(new Error("the final response came without the 103 before it")));
      r.resume();
    });
    session.close();
    expect(hints[":status"]).toBe(103);
    expect(hints.link).toBe("</style.css>; rel=preload");
  });

  it("answers from a new session the streams sent after a GOAWAY's last-stream-id (retried, or sent there)", async () => {
    expect((await get(agent, `${h2only.url}/bytes/1?warm`)).status).toBe(200);
    const before = h2only.sessions;
    // The GOAWAY names the first stream; the four sent right after it on the same session are
    // above its last-stream-id: never processed, so lathe sends them again on a new session.
    const goaway = get(agent, `${h2only.url}/slowgoaway/1000`);
    const later = Array.from({ length: 4 }, (_, i) => get(agent, `${h2only.url}/hold/${300 + i}?in-flight=${i}`));
    const answers = await Promise.all([...later, goaway]);
    for (const a of answers) expect(a.status).toBe(200);
    expect(answers[4]!.body.equals(bytesOf(1000, 1000))).toBe(true);
    for (let i = 0; i < 4; i++) expect(answers[i]!.body.equals(bytesOf(300 + i, 300 + i))).toBe(true);
    expect(h2only.sessions).toBeGreaterThan(before);
  });

  it("uses HTTP/1.1 with an origin that offers only that, and h2 with one that offers both", async () => {
    for (let i = 0; i < 3; i++) expect((await get(agent, `${h1only.url}/bytes/${500 + i}?h1only=${i}`)).status).toBe(200);
    expect((await get(agent, `${both.url}/bytes/600?both`)).status).toBe(200);
    expect(both.seen.some((s) => s.path === "/bytes/600?both")).toBe(true);
  });

  it("records h2 exchanges in HTTP/1.1 form, with WARC-Protocol h2 (http2.md §2)", async () => {
    await lathe.stop();
    records = await readAllWarcs(lathe.dir);
    for (const r of records.filter((x) => x.type === "response" || x.type === "request")) expect(checkDigests(r), uri(r)).toEqual([]);
    const res = records.find((r) => r.type === "response" && uri(r).endsWith("/bytes/10?c=10"))!;
    expect(res.httpHead!.startsWith("HTTP/1.1 200 OK\r\n")).toBe(true);
    expect(res.httpHead).not.toMatch(/(^|\n):/);
    expect(res.httpHead).toMatch(/\r\ncontent-type: application\/octet-stream\r\n/);
    expect(res.httpHead).not.toMatch(/transfer-encoding/i);
    expect(res.getAll("WARC-Protocol")[0]).toBe("h2");
    expect(res.getAll("WARC-Protocol")[1]).toMatch(/^tls\/1\.[23]$/);
    const req = records.find((r) => r.type === "request" && uri(r).endsWith("/bytes/10?c=10"))!;
    expect(req.httpHead!.startsWith(`GET /bytes/10?c=10 HTTP/1.1\r\nhost: 127.0.0.1:${h2only.port}\r\n`)).toBe(true);
    expect(req.getAll("WARC-Protocol")[0]).toBe("h2");

    const fields = records.find((r) => r.type === "response" && uri(r).endsWith("/fields"))!;
    expect(fields.httpHead!.startsWith("HTTP/1.1 299 \r\n")).toBe(true);
    expect(fields.httpHead).toMatch(/\r\nx-dup: one\r\nx-dup: two\r\n/);

    const gz = records.find((r) => r.type === "response" && uri(r).endsWith("/gzip"))!;
    expect(gz.httpHead).toMatch(/\r\ncontent-encoding: gzip\r\n/);
    expect(gz.body!.equals(GZIP_BODY)).toBe(true);

    const posted = records.find((r) => r.type === "request" && uri(r).endsWith("/echo?chunked"))!;
    expect(posted.httpHead).toMatch(/\r\ncontent-length: 70000\r\n\r\n$/);
    expect(posted.httpHead).not.toMatch(/transfer-encoding/i);
    expect(posted.body!.equals(bytesOf(70_000, 9))).toBe(true);
    // The content-length lathe wrote is named, once, in a metadata record (http2.md §2.6).
    const notes = records.filter((r) => r.type === "metadata" && r.block.toString("latin1").includes(`synthesized-request-content-length: ${posted.get("WARC-Record-ID")}\r\n`));
    expect(notes).toHaveLength(1);
    expect(records.filter((r) => r.block.toString("latin1").includes("synthesized-request-content-length:"))).toHaveLength(1);

    const withTrailers = records.find((r) => r.type === "response" && uri(r).endsWith("/trailers"))!;
    expect(withTrailers.httpHead!.startsWith("HTTP/1.1 200 OK\r\n")).toBe(true);
    expect(withTrailers.body!.toString()).toBe("with trailers");
    const extras = records.find((r) => r.type === "metadata" && r.get("WARC-Concurrent-To") === withTrailers.get("WARC-Record-ID") && r.block.toString().includes("trailer:"))!;
    expect(extras.get("Content-Type")).toBe("application/warc-fields");
    expect(extras.block.toString()).toBe("interim: 103\r\ntrailer: x-checksum: abc123\r\ntrailer: x-count: 3\r\n");
    // Responses without either get no such record.
    expect(records.some((r) => r.type === "metadata" && r.block.toString().includes("interim:") && r.get("WARC-Concurrent-To") === res.get("WARC-Record-ID"))).toBe(false);

    const reset = records.find((r) => r.type === "response" && uri(r).endsWith("/reset/40000"))!;
    expect(reset.get("WARC-Truncated")).toBe("disconnect");
    expect(reset.body!.equals(bytesOf(40000, 40000))).toBe(true);

    // The h2 connection's TLS facts are recorded as for HTTP/1.1: the chain, ALPN h2, the client's protocol.
    expect(res.get("WARC-Cipher-Suite")).toMatch(/^TLS_/);
    const tlsMeta = records.find((r) => r.type === "metadata" && r.block.toString("latin1").includes("tls-alpn: h2\r\n"))!;
    expect(tlsMeta.block.toString("latin1")).toMatch(/\r\ntls-verify-result: ok\r\n/);
    expect(tlsMeta.block.toString("latin1")).toMatch(/\r\ntls-certificate: [A-Za-z0-9+/=]+\r\n/);
    expect(tlsMeta.block.toString("latin1")).toMatch(/\r\nclient-protocol: http\/1\.1\r\n/);
    // lathe's own reader reads every record the independent one does.
    let ours = 0;
    for (const f of warcFiles(lathe.dir)) for await (const r of readWarcRecords(f)) if (r.warcType) ours++;
    expect(ours).toBe(records.length);

    const h1 = records.filter((r) => r.type === "response" && uri(r).includes("?h1only="));
    expect(h1).toHaveLength(3);
    for (const r of h1) expect(r.getAll("WARC-Protocol")[0]).toBe("http/1.1");
  });

  it("gives an h2 capture and an HTTP/1.1 capture of the same body the same payload digest: the second is a revisit", async () => {
    lathe = await startTestLathe({ upstream: { caFile: certs.caFile } });
    await agent.close();
    agent = new ProxyAgent({ uri: lathe.proxyUrl, requestTls: { ca: lathe.ca.caCertPem } });
    // Same bytes (bytesOf(n, n)) from the h2 origin, then from the HTTP/1.1 one.
    expect((await get(agent, `${h2only.url}/bytes/5000?same`)).status).toBe(200);
    expect((await get(agent, `${h1only.url}/bytes/5000?same`)).status).toBe(200);
    await lathe.stop();
    const recs = await readAllWarcs(lathe.dir);
    const first = recs.find((r) => r.type === "response" && uri(r).startsWith(h2only.url))!;
    const second = recs.find((r) => uri(r).startsWith(h1only.url) && (r.type === "revisit" || r.type === "response"))!;
    const sha1 = digestString("sha1", bytesOf(5000, 5000));
    expect(first.get("WARC-Payload-Digest")).toBe(sha1);
    expect(second.type).toBe("revisit");
    expect(second.get("WARC-Payload-Digest")).toBe(sha1);
    expect(second.get("WARC-Refers-To")).toBe(first.get("WARC-Record-ID"));
    lathe = await startTestLathe({ upstream: { caFile: certs.caFile } });
  });
});

describe("a large body over h2 on both legs", () => {
  it("streams 100 MB with flat memory, byte for byte, and records it whole", async () => {
    const certs = originCerts();
    const origin = await startH2Origin(certs, { allowHTTP1: false });
    const lathe = await startTestLathe({ upstream: { caFile: certs.caFile } });
    const size = 100 * 1024 * 1024;
    try {
      const want = createHash("sha1");
      for (let off = 0; off < size; off += 65536) want.update(streamChunk(off, Math.min(65536, size - off)));
      const session = await h2session(lathe, origin);
      const base = process.memoryUsage().rss;
      let peak = base;
      const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 20);
      const got = createHash("sha1");
      let length = 0;
      await new Promise<void>((resolve, reject) => {
        const r = session.request({ ":path": `/stream/${size}` });
        r.on("data", (c: Buffer) => {
          got.update(c);
          length += c.length;
        });
        r.on("end", () => resolve());
        r.on("error", reject);
      });
      session.close();
      clearInterval(sampler);
      expect(length).toBe(size);
      const digest = want.digest();
      expect(got.digest().equals(digest)).toBe(true);
      // Flat: far below the body's size (the spool keeps 1 MiB in memory, then a temp file).
      console.log(`${size / 1024 / 1024} MiB over h2 both legs: RSS grew ${((peak - base) / 1e6).toFixed(1)} MB`);
      expect(peak - base).toBeLessThan(60 * 1024 * 1024);
      await lathe.stop();
      const records = await readAllWarcs(lathe.dir);
      const res = records.find((r) => r.type === "response" && (r.get("WARC-Target-URI") ?? "").endsWith(`/stream/${size}`))!;
      expect(res.get("WARC-Truncated")).toBeUndefined();
      expect(res.get("WARC-Payload-Digest")).toBe(`sha1:${base32(digest)}`);
    } finally {
      await lathe.stop();
      await origin.close();
    }
  });
});

describe("an origin that pushes although push is disabled", () => {
  it("is refused: nothing of the push is recorded, and lathe keeps serving", async () => {
    const certs = originCerts();
    const origin = await startRawH2Origin(certs.key, certs.cert, (stream, write) => {
      const authority = `127.0.0.1:${pushing.port}`;
      // PUSH_PROMISE for stream 2 (GET https://authority/pushed), then the answer to the request.
      const promised = Buffer.concat([Buffer.from([0, 0, 0, 2, 0x82, 0x87, 0x04, 7]), Buffer.from("/pushed"), Buffer.from([0x41, authority.length]), Buffer.from(authority)]);
      write(frame(0x5, 0x4, stream, promised));
      write(frame(0x1, 0x4 | 0x1, stream, Buffer.from([0x88])));
    });
    const pushing = origin;
    const lathe = await startTestLathe({ upstream: { caFile: certs.caFile } });
    const agent = new ProxyAgent({ uri: lathe.proxyUrl, requestTls: { ca: lathe.ca.caCertPem } });
    const fine = await startH2Origin(certs, { allowHTTP1: false });
    try {
      const r = await get(agent, `${origin.url}/page`);
      // RFC 9113 §8.4: a PUSH_PROMISE to a client that disabled push is a connection error.
      expect(r.status).toBe(502);
      expect((await get(agent, `${fine.url}/bytes/10?after-push`)).status).toBe(200);
    } finally {
      await agent.close();
      await lathe.stop();
      await origin.close();
      await fine.close();
    }
    const records = await readAllWarcs(lathe.dir);
    expect(records.some((r) => (r.get("WARC-Target-URI") ?? "").includes("/pushed"))).toBe(false);
    expect(records.some((r) => (r.get("WARC-Target-URI") ?? "").endsWith("/page"))).toBe(false);
  });
});

describe("an h2 origin whose certificate does not verify, with upstream.rejectInvalidCerts", () => {
  it("gets 502 naming the verification error, and nothing is recorded", async () => {
    const certs = originCerts();
    const origin = await startH2Origin({ ...certs, key: certs.selfSigned.key, cert: certs.selfSigned.cert }, { allowHTTP1: false });
    const lathe = await startTestLathe({ upstream: { caFile: certs.caFile, rejectInvalidCerts: true } });
    const agent = new ProxyAgent({ uri: lathe.proxyUrl, requestTls: { ca: lathe.ca.caCertPem } });
    try {
      const r = await get(agent, `${origin.url}/bytes/10`);
      expect(r.status).toBe(502);
      expect(r.body.toString()).toMatch(/certificate/i);
    } finally {
      await agent.close();
      await lathe.stop();
      await origin.close();
    }
    const records = await readAllWarcs(lathe.dir);
    expect(records.filter((r) => r.type !== "warcinfo")).toEqual([]);
  });
});

describe("curl --http2 and strict durability, h2 on both legs", () => {
  it("curl gets HTTP/2 from an h2-only origin through lathe, and the record is on disk when the response ends", async () => {
    const certs = originCerts();
    const origin = await startH2Origin(certs, { allowHTTP1: false });
    const lathe = await startTestLathe({ upstream: { caFile: certs.caFile }, warc: { durability: "strict" } });
    try {
      const caFile = `${lathe.certsDir}/ca-for-curl.pem`;
      writeFileSync(caFile, lathe.ca.caCertPem);
      const { stdout } = await run("curl", ["-sS", "--http2", "-x", lathe.proxyUrl, "--cacert", caFile, "-o", `${lathe.certsDir}/out`, "-w", "%{http_version} %{http_code}", `${origin.url}/bytes/70000?curl`]);
      expect(stdout).toBe("2 200");
      expect(readFileSync(`${lathe.certsDir}/out`).equals(bytesOf(70000, 70000))).toBe(true);
      // Strict durability: the response ended only once its records were written, before any stop.
      const openFiles = readdirSync(lathe.dir).filter((f) => f.endsWith(".warc.gz.open"));
      expect(openFiles).toHaveLength(1);
      const open = (await readWarc(join(lathe.dir, openFiles[0]!))).filter((r) => r.type === "response");
      expect(open.map((r) => r.get("WARC-Target-URI"))).toEqual([`${origin.url}/bytes/70000?curl`]);
      expect(open[0]!.getAll("WARC-Protocol")[0]).toBe("h2");
    } finally {
      await lathe.stop();
      await origin.close();
    }
  });
});

describe("upstream.http2: false", () => {
  it("speaks HTTP/1.1 to an origin that offers both", async () => {
    const certs = originCerts();
    const both = await startH2Origin(certs, { allowHTTP1: true });
    const lathe = await startTestLathe({ upstream: { caFile: certs.caFile, http2: false } });
    const agent = new ProxyAgent({ uri: lathe.proxyUrl, requestTls: { ca: lathe.ca.caCertPem } });
    try {
      const r = await get(agent, `${both.url}/anything`);
      expect(r.body.toString()).toBe("over http/1.1");
      expect(both.sessions).toBe(0);
    } finally {
      await agent.close();
      await lathe.stop();
      await both.close();
    }
  });
});
