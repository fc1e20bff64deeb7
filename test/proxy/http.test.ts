import { afterAll, beforeAll, describe, expect, it } from "vitest";
import http from "node:http";
import { bytesOf, startHttpOrigin, startRawOrigin, type Origin } from "../helpers/origin.js";
import { startTestLathe, type TestLathe } from "../helpers/lathe.js";
import { rawExchange, viaProxy } from "../helpers/client.js";
import { captureOf, checkDigests, readAllWarcs, warcFiles, type ReadRecord } from "../helpers/warcs.js";

let origin: Origin;
let lathe: TestLathe;
let records: ReadRecord[] = [];

/** Stop lathe (closing and renaming its files) and read every record back with warcio. */
async function finish(): Promise<ReadRecord[]> {
  await lathe.stop();
  return readAllWarcs(lathe.dir);
}

describe("plain HTTP through lathe", () => {
  beforeAll(async () => {
    origin = await startHttpOrigin();
    lathe = await startTestLathe({ capture: { spoolMemoryBytes: 64 * 1024 } });
  });
  afterAll(async () => {
    await lathe.stop();
    await origin.close();
  });

  it("streams bodies byte-exact to the client (small and spooled-to-disk sizes)", async () => {
    for (const n of [0, 1, 1000, 300_000, 3_000_000]) {
      const r = await viaProxy(lathe.proxyUrl, `${origin.url}/bytes/${n}`);
      expect(r.status).toBe(200);
      expect(r.body.equals(bytesOf(n, n))).toBe(true);
    }
  });

  it("forwards chunked bodies, request bodies, HEAD, 204 and 304", async () => {
    const c = await viaProxy(lathe.proxyUrl, `${origin.url}/chunked/50000`);
    expect(c.body.equals(bytesOf(50000, 50007))).toBe(true);
    const t = await viaProxy(lathe.proxyUrl, `${origin.url}/chunked/3000?trailers`);
    expect(t.body.equals(bytesOf(3000, 3007))).toBe(true);
    const post = await viaProxy(lathe.proxyUrl, `${origin.url}/echo`, { method: "POST", body: "name=lathe&x=1", headers: { Host: `127.0.0.1:${origin.port}`, "Content-Type": "application/x-www-form-urlencoded", "Content-Length": "14" } });
    expect(post.body.toString()).toBe("name=lathe&x=1");
    const chunkedPost = await new Promise<string>((resolve, reject) => {
      const p = new URL(lathe.proxyUrl);
      const req = http.request({ host: p.hostname, port: p.port, method: "PUT", path: `${origin.url}/echo`, headers: { Host: `127.0.0.1:${origin.port}`, "Transfer-Encoding": "chunked" }, agent: false }, (res) => {
        const parts: Buffer[] = [];
        res.on("data", (d: Buffer) => parts.push(d));
        res.on("end", () => resolve(Buffer.concat(parts).toString()));
      });
      req.on("error", reject);
      req.write("part one;");
      req.end("part two");
    });
    expect(chunkedPost).toBe("part one;part two");
    const head = await viaProxy(lathe.proxyUrl, `${origin.url}/bytes/1234`, { method: "HEAD" });
    expect(head.status).toBe(200);
    expect(head.body.length).toBe(0);
    const nc = await viaProxy(lathe.proxyUrl, `${origin.url}/status/204`);
    expect(nc.status).toBe(204);
    const nm = await viaProxy(lathe.proxyUrl, `${origin.url}/status/304`);
    expect(nm.status).toBe(304);
  });

  it("keeps the client connection alive and pools upstream connections", async () => {
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const before = origin.seen.length;
    for (let i = 0; i < 20; i++) {
      const r = await viaProxy(lathe.proxyUrl, `${origin.url}/text/${100 + i}`, { agent });
      expect(r.body.length).toBe(100 + i);
    }
    agent.destroy();
    expect(origin.seen.length - before).toBe(20);
  });

  it("records every exchange as response + request with valid digests and linkage", async () => {
    records = await finish();
    expect(records[0]!.type).toBe("warcinfo");
    for (const r of records) expect(checkDigests(r)).toEqual([]);
    const { response, request } = captureOf(records, `${origin.url}/bytes/3000000`);
    expect(response.body!.equals(bytesOf(3_000_000, 3_000_000))).toBe(true);
    expect(response.get("WARC-IP-Address")).toBe("127.0.0.1");
    expect(response.getAll("WARC-Protocol")).toEqual(["http/1.1"]);
    expect(response.get("WARC-Cipher-Suite")).toBeUndefined();
    expect(response.get("Content-Type")).toBe("application/http;msgtype=response");
    expect(request.get("Content-Type")).toBe("application/http;msgtype=request");
    expect(request.httpHead!.startsWith("GET /bytes/3000000 HTTP/1.1\r\n")).toBe(true);
    expect(request.get("WARC-Date")).toBe(response.get("WARC-Date"));
    expect(response.get("WARC-Date")).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/);
    expect(request.get("WARC-Payload-Digest")).toBeUndefined();
    // The request record follows its response directly.
    const i = records.indexOf(response);
    expect(records[i + 1]).toBe(request);
    // The zero-length body has the digest of zero bytes.
    expect(captureOf(records, `${origin.url}/bytes/0`).response.get("WARC-Payload-Digest")).toBe("sha1:3I42H3S6NNFQ2MSVX7XZKYAYSCX5QBYJ");
  });

  it("stores chunked responses de-chunked with X-Orig-Transfer-Encoding and trailers kept", () => {
    const { response } = captureOf(records, `${origin.url}/chunked/50000`);
    expect(response.httpHead).toMatch(/\r\nX-Orig-Transfer-Encoding: chunked\r\n/);
    expect(response.httpHead).not.toMatch(/\r\nTransfer-Encoding:/i);
    expect(response.httpHead).not.toMatch(/\r\nContent-Length:/i);
    expect(response.body!.equals(bytesOf(50000, 50007))).toBe(true);
    const t = captureOf(records, `${origin.url}/chunked/3000?trailers`).response;
    expect(t.httpHead).toMatch(/\r\nX-Orig-Trailer-X-Checksum: [0-9a-f]{40}\r\n\r\n$/);
    expect(t.body!.equals(bytesOf(3000, 3007))).toBe(true);
  });

  it("records request bodies, de-chunked when the client sent them chunked", () => {
    const post = captureOf(records, `${origin.url}/echo`);
    const posts = records.filter((r) => r.type === "request" && r.get("WARC-Target-URI") === `${origin.url}/echo`);
    expect(posts.map((p) => p.body!.toString()).sort()).toEqual(["name=lathe&x=1", "part one;part two"]);
    for (const p of posts) expect(p.get("WARC-Payload-Digest")).toMatch(/^sha1:[A-Z2-7]{32}$/);
    const chunked = posts.find((p) => p.httpHead!.startsWith("PUT"))!;
    expect(chunked.httpHead).toMatch(/\r\nX-Orig-Transfer-Encoding: chunked\r\n/);
    expect(post.response.body!.length).toBeGreaterThan(0);
  });

  it("records HEAD, 204 and 304 responses as heads only", () => {
    const head = records.find((r) => r.type === "request" && r.httpHead!.startsWith("HEAD /bytes/1234"))!;
    const resp = records.find((r) => r.get("WARC-Record-ID") === head.get("WARC-Concurrent-To"))!;
    expect(resp.body!.length).toBe(0);
    expect(resp.httpHead).toMatch(/Content-Length: 1234/);
    expect(resp.get("WARC-Payload-Digest")).toBe("sha1:3I42H3S6NNFQ2MSVX7XZKYAYSCX5QBYJ");
    for (const code of [204, 304]) {
      const r = captureOf(records, `${origin.url}/status/${code}`).response;
      expect(r.httpHead!.startsWith(`HTTP/1.1 ${code} `)).toBe(true);
      expect(r.body!.length).toBe(0);
    }
  });

  it("closes every file under its final name", () => {
    const files = warcFiles(lathe.dir);
    expect(files.length).toBeGreaterThan(0);
    for (const f of files) expect(f).toMatch(/lathe-\d{17}-\d{5}-[A-Za-z0-9.-]+\.warc\.gz$/);
  });
});

describe("header fidelity and faults", () => {
  let raw: Awaited<ReturnType<typeof startRawOrigin>>;
  beforeAll(async () => {
    raw = await startRawOrigin((socket, head) => {
      const path = head.split(" ")[1]!;
      if (path === "/odd") {
        socket.write("HTTP/1.1 200 Fine\r\nx-lower: a\r\nX-UPPER: b\r\nSet-Cookie: one=1\r\nset-cookie: two=2\r\nX-Dup: 1\r\nX-Dup: 2\r\nContent-Length: 2\r\n\r\nok");
      } else if (path === "/reset-head") {
        socket.write("HTTP/1.1 200 OK\r\nContent-Le");
        socket.destroy();
      } else if (path === "/cut") {
        socket.write("HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n" + "y".repeat(300));
        setTimeout(() => socket.destroy(), 20);
      } else if (path === "/close-delimited") {
        socket.end("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil the end");
      } else if (path === "/silent") {
        // never answers
      } else if (path === "/interim") {
        socket.write("HTTP/1.1 103 Early Hints\r\nLink: </x.css>; rel=preload\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfinal");
      } else if (path === "/smuggle") {
        socket.write("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n");
      }
    });
    lathe = await startTestLathe({ upstream: { headTimeoutMs: 300, connectTimeoutMs: 300 }, proxy: { maxHeaderBytes: 4096 } });
  });
  afterAll(async () => {
    await lathe.stop();
    await raw.close();
  });

  it("gives the client names, case, order and duplicates as the origin sent them", async () => {
    const r = await viaProxy(lathe.proxyUrl, `${raw.url}/odd`);
    expect(r.statusMessage).toBe("Fine");
    // Node adds its own hop-by-hop Connection/Keep-Alive toward the client; everything else is the origin's.
    const endToEnd = r.rawHeaders.filter((_, i, a) => !/^(connection|keep-alive)$/i.test(a[i - (i % 2)]!));
    expect(endToEnd).toEqual(["x-lower", "a", "X-UPPER", "b", "Set-Cookie", "one=1", "set-cookie", "two=2", "X-Dup", "1", "X-Dup", "2", "Content-Length", "2"]);
  });

  it("answers 502 for upstream failures, naming the host, and carries on", async () => {
    const refused = await viaProxy(lathe.proxyUrl, "http://127.0.0.1:1/x");
    expect(refused.status).toBe(502);
    expect(refused.body.toString()).toMatch(/127\.0\.0\.1:1 refused/);
    const dns = await viaProxy(lathe.proxyUrl, "http://no-such-host.invalid/x");
    expect(dns.status).toBe(502);
    expect(dns.body.toString()).toMatch(/no-such-host\.invalid/);
    const reset = await viaProxy(lathe.proxyUrl, `${raw.url}/reset-head`);
    expect(reset.status).toBe(502);
    expect(reset.body.toString()).toMatch(/closed before responding/);
    // The same host works right after its failure: nothing is blacklisted.
    const ok = await viaProxy(lathe.proxyUrl, `${raw.url}/odd`);
    expect(ok.status).toBe(200);
  });

  it("answers 504 when the origin never responds", async () => {
    const r = await viaProxy(lathe.proxyUrl, `${raw.url}/silent`);
    expect(r.status).toBe(504);
    expect(r.body.toString()).toMatch(/no response within/);
  });

  it("answers 400 for malformed requests and 431 for oversize header sections", async () => {
    const bad = await rawExchange(lathe.proxyUrl, "GARBAGE\r\n\r\n");
    expect(bad).toMatch(/^HTTP\/1\.1 400 /);
    const rel = await rawExchange(lathe.proxyUrl, "GET /relative HTTP/1.1\r\nHost: x\r\n\r\n");
    expect(rel).toMatch(/^HTTP\/1\.1 400 /);
    const big = await rawExchange(lathe.proxyUrl, `GET ${raw.url}/odd HTTP/1.1\r\nHost: x\r\nX-Big: ${"a".repeat(8000)}\r\n\r\n`);
    expect(big).toMatch(/^HTTP\/1\.1 431 /);
  });

  it("relays a smuggling-shaped response as 502 and records it wire-exact", async () => {
    const r = await viaProxy(lathe.proxyUrl, `${raw.url}/smuggle`);
    expect(r.status).toBe(502);
  });

  it("records cut-off, close-delimited and interim-response exchanges correctly", async () => {
    await viaProxy(lathe.proxyUrl, `${raw.url}/cut`).catch(() => undefined);
    const cd = await viaProxy(lathe.proxyUrl, `${raw.url}/close-delimited`);
    expect(cd.body.toString()).toBe("until the end");
    const interim = await viaProxy(lathe.proxyUrl, `${raw.url}/interim`);
    expect(interim.body.toString()).toBe("final");
    // The origin's 103 Early Hints reach the client before the final response.
    const wire = await rawExchange(lathe.proxyUrl, `GET ${raw.url}/interim HTTP/1.1\r\nHost: ${new URL(raw.url).host}\r\nConnection: close\r\n\r\n`);
    expect(wire).toMatch(/^HTTP\/1\.1 103 Early Hints\r\n(?:[^\r]*\r\n)*?link: <\/x\.css>; rel=preload\r\n(?:[^\r]*\r\n)*\r\nHTTP\/1\.1 200 OK\r\n/i);
    await lathe.stop();
    const recs = await readAllWarcs(lathe.dir);
    for (const r of recs) expect(checkDigests(r)).toEqual([]);
    const odd = captureOf(recs, `${raw.url}/odd`).response;
    expect(odd.httpHead).toBe("HTTP/1.1 200 Fine\r\nx-lower: a\r\nX-UPPER: b\r\nSet-Cookie: one=1\r\nset-cookie: two=2\r\nX-Dup: 1\r\nX-Dup: 2\r\nContent-Length: 2\r\n\r\n");
    const cut = captureOf(recs, `${raw.url}/cut`).response;
    expect(cut.get("WARC-Truncated")).toBe("disconnect");
    expect(cut.body!.toString()).toBe("y".repeat(300));
    const closeDelimited = captureOf(recs, `${raw.url}/close-delimited`).response;
    expect(closeDelimited.get("WARC-Truncated")).toBeUndefined();
    expect(closeDelimited.body!.toString()).toBe("until the end");
    const fin = captureOf(recs, `${raw.url}/interim`).response;
    expect(fin.httpHead!.startsWith("HTTP/1.1 200 OK\r\n")).toBe(true);
    const smuggle = captureOf(recs, `${raw.url}/smuggle`).response;
    expect(smuggle.get("WARC-Truncated")).toBe("unspecified");
    expect(smuggle.httpHead).toMatch(/\r\nTransfer-Encoding: chunked\r\n/);
    expect(recs.some((r) => r.get("WARC-Target-URI") === `${raw.url}/reset-head`)).toBe(false);
    expect(recs.some((r) => r.get("WARC-Target-URI") === `${raw.url}/silent`)).toBe(false);
  });
});
