import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { X509Certificate, createHash } from "node:crypto";
import net from "node:net";
import tls from "node:tls";
import { ProxyAgent, fetch as undiciFetch, Agent } from "undici";
import { originCerts } from "../helpers/certs.js";
import { bytesOf, startHttpsOrigin, type Origin } from "../helpers/origin.js";
import { startTestLathe, type TestLathe } from "../helpers/lathe.js";
import { captureOf, checkDigests, readAllWarcs, type ReadRecord } from "../helpers/warcs.js";

/** Open a CONNECT tunnel through lathe and return the TLS socket (trusting lathe's CA). */
function tunnel(lathe: TestLathe, host: string, port: number, servername?: string): Promise<tls.TLSSocket> {
  return new Promise((resolve, reject) => {
    const s = net.connect(lathe.address.port, "127.0.0.1");
    s.once("error", reject);
    s.write(`CONNECT ${host}:${port} HTTP/1.1\r\nHost: ${host}:${port}\r\n\r\n`);
    s.once("data", (d) => {
      if (!/^HTTP\/1\.1 200/.test(d.toString())) return reject(new Error(d.toString()));
      const t = tls.connect({ socket: s, host, ca: lathe.ca.caCertPem, ...(servername ? { servername } : {}) }, () => resolve(t));
      t.once("error", reject);
    });
  });
}

describe("HTTPS through lathe (CONNECT, MITM)", () => {
  let origin: Origin;
  let selfSigned: Origin;
  let lathe: TestLathe;
  let records: ReadRecord[];
  const certs = originCerts();

  beforeAll(async () => {
    origin = await startHttpsOrigin(certs);
    selfSigned = await startHttpsOrigin({ ...certs, key: certs.selfSigned.key, cert: certs.selfSigned.cert });
    lathe = await startTestLathe({ upstream: { caFile: certs.caFile } });
  });
  afterAll(async () => {
    await lathe.stop();
    await origin.close();
    await selfSigned.close();
  });

  it("serves many requests per tunnel with a leaf for the CONNECT host (IP SAN) chained to lathe's CA", async () => {
    const agent = new ProxyAgent({ uri: lathe.proxyUrl, requestTls: { ca: lathe.ca.caCertPem } });
    for (const n of [10, 20000, 2_000_000]) {
      const r = await undiciFetch(`${origin.url}/bytes/${n}`, { dispatcher: agent });
      expect(r.status).toBe(200);
      expect(Buffer.from(await r.arrayBuffer()).equals(bytesOf(n, n))).toBe(true);
    }
    const c = await undiciFetch(`${origin.url}/chunked/40000`, { dispatcher: agent });
    expect(Buffer.from(await c.arrayBuffer()).equals(bytesOf(40000, 40007))).toBe(true);
    await agent.close();

    const t = await tunnel(lathe, "127.0.0.1", origin.port);
    const chain = t.getPeerCertificate(true);
    const leaf = new X509Certificate(chain.raw);
    expect(leaf.subjectAltName).toBe("IP Address:127.0.0.1");
    expect(leaf.checkIssued(new X509Certificate(lathe.ca.caCertPem))).toBe(true);
    expect(t.authorized).toBe(true);
    t.destroy();
  });

  it("honours SNI: a DNS-name SAN for the name the client asks for", async () => {
    const t = await tunnel(lathe, "127.0.0.1", origin.port, "origin.test");
    const leaf = new X509Certificate(t.getPeerCertificate().raw);
    expect(leaf.subjectAltName).toBe("DNS:origin.test");
    t.destroy();
  });

  it("records invalid upstream certificates by default, with the verify result", async () => {
    const agent = new ProxyAgent({ uri: lathe.proxyUrl, requestTls: { ca: lathe.ca.caCertPem } });
    const r = await undiciFetch(`${selfSigned.url}/text/500`, { dispatcher: agent });
    expect(r.status).toBe(200);
    expect((await r.text()).length).toBe(500);
    await agent.close();
  });

  it("writes response, request and one TLS metadata record per upstream connection", async () => {
    await lathe.stop();
    records = await readAllWarcs(lathe.dir);
    for (const r of records) expect(checkDigests(r)).toEqual([]);
    const { response, request } = captureOf(records, `${origin.url}/bytes/2000000`);
    expect(response.body!.equals(bytesOf(2_000_000, 2_000_000))).toBe(true);
    expect(response.getAll("WARC-Protocol")).toEqual(["http/1.1", expect.stringMatching(/^tls\/1\.[23]$/)]);
    expect(response.get("WARC-Cipher-Suite")).toMatch(/^TLS_/);
    expect(request.get("WARC-Cipher-Suite")).toBe(response.get("WARC-Cipher-Suite"));
    expect(request.httpHead!.startsWith("GET /bytes/2000000 HTTP/1.1\r\n")).toBe(true);

    const tlsRecords = records.filter((r) => r.type === "metadata");
    // Requests to the good origin shared one pooled upstream connection; the self-signed one had its own.
    const forOrigin = tlsRecords.filter((r) => r.get("WARC-Target-URI")!.startsWith(origin.url));
    expect(forOrigin.length).toBe(1);
    const meta = forOrigin[0]!;
    const first = records.find((r) => r.get("WARC-Record-ID") === meta.get("WARC-Concurrent-To"))!;
    expect(first.type).toBe("response");
    expect(meta.get("WARC-Date")).toBe(first.get("WARC-Date"));
    expect(meta.get("WARC-Target-URI")).toBe(first.get("WARC-Target-URI"));
    expect(meta.get("Content-Type")).toBe("application/warc-fields");
    expect(meta.get("WARC-Payload-Digest")).toBeUndefined();
    const fields = meta.block.toString("latin1").split("\r\n").filter(Boolean).map((l) => [l.slice(0, l.indexOf(":")), l.slice(l.indexOf(":") + 2)] as const);
    const get = (n: string) => fields.filter(([k]) => k === n).map(([, v]) => v);
    expect(get("tls-verify-result")).toEqual(["ok"]);
    expect(get("tls-protocol")[0]).toMatch(/^tls\/1\.[23]$/);
    expect(get("tls-alpn")).toEqual(["http/1.1"]);
    expect(get("client-protocol")).toEqual(["http/1.1"]);
    expect(get("tls-server-name")).toEqual([]); // IP literal: no SNI sent
    const ders = get("tls-certificate").map((b) => Buffer.from(b, "base64"));
    expect(ders.length).toBeGreaterThanOrEqual(1);
    expect(get("tls-certificate-sha256")).toEqual(ders.map((d) => createHash("sha256").update(d).digest("hex")));
    expect(new X509Certificate(ders[0]!).subjectAltName).toContain("IP Address:127.0.0.1");

    const bad = tlsRecords.find((r) => r.get("WARC-Target-URI")!.startsWith(selfSigned.url))!;
    expect(bad.block.toString()).toMatch(/\r\ntls-verify-result: DEPTH_ZERO_SELF_SIGNED_CERT\r\n/);
  });
});

describe("refusing invalid upstream certificates", () => {
  it("answers 502 naming the verify result when upstream.rejectInvalidCerts is on", async () => {
    const certs = originCerts();
    const selfSigned = await startHttpsOrigin({ ...certs, key: certs.selfSigned.key, cert: certs.selfSigned.cert });
    const lathe = await startTestLathe({ upstream: { rejectInvalidCerts: true } });
    try {
      const agent = new ProxyAgent({ uri: lathe.proxyUrl, requestTls: { ca: lathe.ca.caCertPem } });
      const r = await undiciFetch(`${selfSigned.url}/text/10`, { dispatcher: agent });
      expect(r.status).toBe(502);
      expect(await r.text()).toMatch(/DEPTH_ZERO_SELF_SIGNED_CERT/);
      await agent.close();
    } finally {
      await lathe.stop();
      await selfSigned.close();
    }
    const recs = await readAllWarcs(lathe.dir);
    expect(recs.filter((r) => r.type === "response")).toEqual([]);
  });
});

void Agent;
