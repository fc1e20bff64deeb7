/**
 * HTTP/2 on the client leg (http2.md §1, §3): inside an intercepted tunnel, a client that offers
 * ALPN `h2` gets HTTP/2, each stream is one exchange, recorded from the upstream leg.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { execFile } from "node:child_process";
import http2 from "node:http2";
import { promisify } from "node:util";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { originCerts } from "../helpers/certs.js";
import { bytesOf, startHttpsOrigin, type Origin } from "../helpers/origin.js";
import { startTestLathe, type TestLathe } from "../helpers/lathe.js";
import { checkDigests, readAllWarcs } from "../helpers/warcs.js";
import { joinCookies } from "../../src/proxy/http2Client.js";
import { h2request, h2session, tunnel } from "../helpers/h2client.js";
import { PREFACE, frame, frames } from "../helpers/h2frames.js";

const run = promisify(execFile);

describe("HTTP/2 from the client, inside CONNECT tunnels", () => {
  const certs = originCerts();
  let origin: Origin;
  let lathe: TestLathe;

  beforeAll(async () => {
    origin = await startHttpsOrigin(certs);
    lathe = await startTestLathe({ upstream: { caFile: certs.caFile } });
  });
  afterAll(async () => {
    await lathe.stop();
    await origin.close();
  });

  it("serves 100 concurrent streams on one connection, each recorded with valid digests", async () => {
    const session = await h2session(lathe, origin);
    const sizes = Array.from({ length: 100 }, (_, i) => 1 + i * 997);
    const answers = await Promise.all(sizes.map((n) => h2request(session, { ":path": `/bytes/${n}?h2=${n}` })));
    session.close();
    for (const [i, a] of answers.entries()) {
      expect(a.status).toBe(200);
      expect(a.body.equals(bytesOf(sizes[i]!, sizes[i]!))).toBe(true);
      expect(a.headers["content-type"]).toBe("application/octet-stream");
    }
    const seen = origin.seen.filter((s) => s.path.includes("?h2="));
    expect(seen).toHaveLength(100);
    // Each stream reached the origin as an HTTP/1.1 request with the tunnel's authority as Host.
    for (const s of seen) expect(s.rawHeaders.slice(0, 2)).toEqual(["Host", `127.0.0.1:${origin.port}`]);
  });

  it("honours a lowercase warcprox-meta, joins cookie crumbs, and forwards a body sent without content-length", async () => {
    const session = await h2session(lathe, origin);
    const body = bytesOf(50_000, 3);
    const a = await h2request(session, { ":method": "POST", ":path": "/echo?h2post", "warcprox-meta": JSON.stringify({ "warc-prefix": "h2series" }), cookie: ["a=1", "b=2"] }, body);
    session.close();
    expect(a.status).toBe(200);
    const seen = origin.seen.find((s) => s.path === "/echo?h2post")!;
    expect(seen.body.equals(body)).toBe(true);
    const cookies = seen.rawHeaders.filter((_, i) => i % 2 === 0 && seen.rawHeaders[i]!.toLowerCase() === "cookie");
    expect(cookies).toHaveLength(1);
    expect(seen.rawHeaders[seen.rawHeaders.findIndex((h) => h.toLowerCase() === "cookie") + 1]).toBe("a=1; b=2");
    expect(seen.rawHeaders.map((h) => h.toLowerCase())).not.toContain("warcprox-meta");
  });

  it("answers 421 for an :authority that is not the tunnel's host, and records nothing for it", async () => {
    const session = await h2session(lathe, origin);
    const a = await h2request(session, { ":path": "/text/10?misdirected", ":authority": "example.org" });
    session.close();
    expect(a.status).toBe(421);
    expect(a.body.toString()).toMatch(/is not this tunnel's host/);
    expect(origin.seen.some((s) => s.path.includes("misdirected"))).toBe(false);
  });

  it("survives a client that cancels streams mid-body and keeps serving on the same connection", async () => {
    const session = await h2session(lathe, origin);
    await Promise.all(
      Array.from({ length: 20 }, () =>
        new Promise<void>((resolve) => {
          const r = session.request({ ":path": "/bytes/3000000?cancel" });
          r.once("data", () => r.close(http2.constants.NGHTTP2_CANCEL));
          r.on("close", () => resolve());
          r.on("error", () => undefined);
        }),
      ),
    );
    const a = await h2request(session, { ":path": "/text/100?after-cancel" });
    session.close();
    expect(a.status).toBe(200);
    expect(a.body.length).toBe(100);
  });

  it("stays up through a client that opens 1,000 streams and resets each at once", async () => {
    const session = await h2session(lathe, origin);
    await Promise.all(
      Array.from({ length: 1000 }, (_, i) =>
        new Promise<void>((resolve) => {
          const r = session.request({ ":path": `/bytes/200000?flood=${i}` });
          r.on("error", () => undefined);
          r.on("close", () => resolve());
          r.close(http2.constants.NGHTTP2_CANCEL);
        }),
      ),
    );
    session.destroy();
    const again = await h2session(lathe, origin);
    const a = await h2request(again, { ":path": "/text/100?after-flood" });
    again.close();
    expect(a.status).toBe(200);
    expect(a.body.length).toBe(100);
  });

  it("answers malformed frames and fields with the right h2 error, and keeps serving", async () => {
    const authority = `127.0.0.1:${origin.port}`;
    // A HEADERS block whose HPACK does not decode: the connection is closed, GOAWAY COMPRESSION_ERROR.
    const garbage = await rawH2(lathe, origin.port, frame(0x1, 0x4 | 0x1, 1, Buffer.from([0xff, 0xff, 0xff, 0xff, 0xff])));
    expect(frames(garbage).find((f) => f.type === 0x7)?.payload.readUInt32BE(4)).toBe(0x9);
    // An upper-case field name (malformed in h2): that stream is reset, PROTOCOL_ERROR.
    const block = Buffer.concat([Buffer.from([0x82, 0x84, 0x87, 0x41, authority.length]), Buffer.from(authority), Buffer.from([0x00, 5]), Buffer.from("X-Bad"), Buffer.from([1]), Buffer.from("1")]);
    const upper = await rawH2(lathe, origin.port, frame(0x1, 0x4 | 0x1, 1, block));
    const rst = frames(upper).find((f) => f.type === 0x3 && f.stream === 1);
    expect(rst?.payload.readUInt32BE(0)).toBe(0x1);
    // Neither :authority nor host: malformed for https, the stream is reset (PROTOCOL_ERROR).
    const path = (p: string) => Buffer.from([0x04, p.length, ...Buffer.from(p)]);
    const bare = await rawH2(lathe, origin.port, frame(0x1, 0x4 | 0x1, 1, Buffer.concat([Buffer.from([0x82, 0x87]), path("/text/7?no-authority")])));
    expect(frames(bare).find((f) => f.type === 0x3 && f.stream === 1)?.payload.readUInt32BE(0)).toBe(0x1);
    // A host field instead of :authority names the target as well (RFC 9113 §8.3.1): served.
    const host = Buffer.from([0x0f, 0x17, authority.length, ...Buffer.from(authority)]); // literal, indexed name "host" (38)
    const hosted = await rawH2(lathe, origin.port, frame(0x1, 0x4 | 0x1, 1, Buffer.concat([Buffer.from([0x82, 0x87]), path("/text/7?host-field"), host])));
    expect(frames(hosted).find((f) => f.type === 0x1 && f.stream === 1)?.payload[0]).toBe(0x88); // :status 200 (static index 8)
    expect(origin.seen.some((s) => s.path === "/text/7?host-field")).toBe(true);
    expect(origin.seen.some((s) => s.path === "/text/7?no-authority")).toBe(false);
    // lathe is still up and serving h2.
    const session = await h2session(lathe, origin);
    const a = await h2request(session, { ":path": "/text/10?after-malformed" });
    session.close();
    expect(a.status).toBe(200);
  });

  it("curl --http2 gets HTTP/2 through lathe; --http1.1 gets HTTP/1.1", async () => {
    const caFile = join(lathe.certsDir, "ca-for-curl.pem");
    writeFileSync(caFile, lathe.ca.caCertPem);
    const curl = (flag: string) =>
      run("curl", ["-sS", flag, "-x", lathe.proxyUrl, "--cacert", caFile, "-o", "/dev/null", "-w", "%{http_version} %{http_code}", `${origin.url}/text/500?curl${flag}`]);
    expect((await curl("--http2")).stdout).toBe("2 200");
    expect((await curl("--http1.1")).stdout).toBe("1.1 200");
  });

  it("applies Warcprox-Meta limits (420) and blocks (403) to h2 streams, with warcprox's answers", async () => {
    const session = await h2session(lathe, origin);
    const limit = JSON.stringify({ stats: { buckets: ["h2-bucket"] }, limits: { "h2-bucket/total/urls": 1 } });
    expect((await h2request(session, { ":path": "/text/10?limit-1", "warcprox-meta": limit })).status).toBe(200);
    const over = await h2request(session, { ":path": "/text/10?limit-2", "warcprox-meta": limit });
    expect(over.status).toBe(420);
    expect(over.body.toString()).toMatch(/^request rejected by warcprox: reached limit h2-bucket\/total\/urls=1/);
    const block = JSON.stringify({ blocks: [{ domain: "127.0.0.1", substring: "/private/" }] });
    const blocked = await h2request(session, { ":path": "/private/x", "warcprox-meta": block });
    expect(blocked.status).toBe(403);
    expect(blocked.body.toString()).toMatch(/blocked by rule found in Warcprox-Meta header/);
    session.close();
    expect(origin.seen.some((s) => s.path === "/text/10?limit-2" || s.path === "/private/x")).toBe(false);
  });

  it("records the streams of a tunnel opened with a session's credentials into that session", async () => {
    const f = lathe.facade;
    f.createCollection({ name: "h2col" });
    const s = await f.openSession({ collection: "h2col" });
    const credentials = `Proxy-Authorization: Basic ${Buffer.from(`${s.username}:${s.password}`).toString("base64")}\r\n`;
    const session = await h2session(lathe, origin, credentials);
    for (const n of [11, 12]) expect((await h2request(session, { ":path": `/text/${n}?session` })).status).toBe(200);
    session.close();
    const summary = await f.closeSession(s.id);
    expect(summary).toMatchObject({ collection: "h2col", captures: 2, failed: 0 });
    const records = (await readAllWarcs(lathe.dir)).filter((r) => (r.get("WARC-Target-URI") ?? "").endsWith("?session"));
    expect(records.filter((r) => r.type === "response")).toHaveLength(2);
    for (const r of records) expect(r.file).toMatch(/(^|\/)h2col-/);
  });

  it("writes every capture with valid digests, h2 streams alike", async () => {
    await lathe.stop();
    const records = await readAllWarcs(lathe.dir);
    const uri = (r: (typeof records)[number]) => r.get("WARC-Target-URI") ?? "";
    const responses = records.filter((r) => r.type === "response" && uri(r).includes("?h2="));
    expect(responses).toHaveLength(100);
    for (const r of records.filter((x) => x.type === "response" || x.type === "request")) expect(checkDigests(r)).toEqual([]);
    const posted = records.find((r) => r.type === "request" && uri(r).endsWith("/echo?h2post"))!;
    expect(posted.file).toMatch(/(^|\/)h2series-/);
    expect(records.some((r) => uri(r).includes("misdirected"))).toBe(false);
    // The TLS metadata of the upstream connections says the client spoke h2 (http2.md §2.10);
    // the curl --http1.1 request came in on an HTTP/1.1 tunnel.
    const tlsRecords = records.filter((r) => r.type === "metadata" && r.block.toString("latin1").includes("tls-protocol:"));
    const clientProtocols = new Set(tlsRecords.map((r) => /\r\nclient-protocol: (\S+)\r\n/.exec(r.block.toString("latin1"))?.[1]));
    expect(clientProtocols.has("h2")).toBe(true);
    expect([...clientProtocols].every((p) => p === "h2" || p === "http/1.1")).toBe(true);
  });
});

/** Speak raw h2 through a tunnel: preface, empty SETTINGS, then `bytes`; resolves with what came back in 1 s. */
async function rawH2(lathe: TestLathe, port: number, bytes: Buffer): Promise<Buffer> {
  const t = await tunnel(lathe, port, ["h2"]);
  const chunks: Buffer[] = [];
  t.on("data", (c: Buffer) => chunks.push(c));
  t.on("error", () => undefined);
  t.write(Buffer.concat([PREFACE, frame(0x4, 0, 0, Buffer.alloc(0)), bytes]));
  await new Promise((r) => setTimeout(r, 1000));
  t.destroy();
  return Buffer.concat(chunks);
}

describe("proxy.http2: false", () => {
  it("offers only http/1.1 inside tunnels", async () => {
    const certs = originCerts();
    const origin = await startHttpsOrigin(certs);
    const lathe = await startTestLathe({ proxy: { http2: false }, upstream: { caFile: certs.caFile } });
    try {
      const t = await tunnel(lathe, origin.port, ["h2", "http/1.1"]);
      expect(t.alpnProtocol).toBe("http/1.1");
      t.destroy();
    } finally {
      await lathe.stop();
      await origin.close();
    }
  });
});

describe("joinCookies", () => {
  it.each([
    [["cookie", "a=1"], ["cookie", "a=1"]],
    [["x", "1", "cookie", "a=1", "y", "2", "cookie", "b=2"], ["x", "1", "cookie", "a=1; b=2", "y", "2"]],
    [["Cookie", "a=1", "cookie", "b=2", "cookie", "c=3"], ["Cookie", "a=1; b=2; c=3"]],
    [["x", "1"], ["x", "1"]],
  ])("%j → %j", (input, out) => {
    expect(joinCookies(input)).toEqual(out);
  });
});
