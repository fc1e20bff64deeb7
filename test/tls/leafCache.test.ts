import { describe, it, expect, beforeAll, afterAll } from "vitest";
import { X509Certificate } from "node:crypto";
import net from "node:net";
import tls from "node:tls";
import { ProxyError } from "../../src/core/errors.js";
import { LeafCache } from "../../src/tls/leafCache.js";
import { DAY_MS, memoryCa, run, tempDir, writeIn, type MemoryCa, removeTempDirs } from "./fixtures.js";

afterAll(removeTempDirs);

/**
 * Serves TLS the way proxy/ will after a CONNECT: a plain socket wrapped in a server-side
 * TLSSocket whose default context is the CONNECT host's leaf and whose SNICallback picks the
 * leaf for the name the client sends. Answers one HTTP response naming the SNI it saw.
 */
function mitmServer(cache: LeafCache, connectHost: string): Promise<{ port: number; close: () => Promise<void> }> {
  const server = net.createServer((socket) => {
    const t = new tls.TLSSocket(socket, {
      isServer: true,
      secureContext: cache.get(connectHost),
      SNICallback: cache.sniCallback,
      ALPNProtocols: ["http/1.1"],
    });
    t.on("error", () => t.destroy());
    t.once("data", () => {
      const body = `sni=${(t as unknown as { servername?: string | false }).servername || "-"}`;
      t.end(`HTTP/1.1 200 OK\r\ncontent-length: ${body.length}\r\nconnection: close\r\n\r\n${body}`);
    });
  });
  return new Promise((resolve) => {
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as net.AddressInfo;
      resolve({ port, close: () => new Promise<void>((r) => server.close(() => r())) });
    });
  });
}

function connect(port: number, opts: tls.ConnectionOptions): Promise<tls.TLSSocket> {
  return new Promise((resolve, reject) => {
    const s = tls.connect({ host: "127.0.0.1", port, ...opts }, () => resolve(s));
    s.once("error", reject);
  });
}

describe("LeafCache with a real TLS handshake", () => {
  let m: MemoryCa;
  let cache: LeafCache;
  let srv: { port: number; close: () => Promise<void> };
  let dir: string;
  let caFile: string;
  beforeAll(async () => {
    m = await memoryCa();
    cache = new LeafCache({ ca: m.ca, leafKey: m.leafKey, caCertPem: m.certPem });
    srv = await mitmServer(cache, "127.0.0.1");
    dir = await tempDir();
    caFile = await writeIn(dir, "ca.pem", m.certPem);
  });
  afterAll(() => srv.close());

  it.each(["example.test", "xn--bcher-kva.example"])("a Node client trusting only the CA accepts the leaf for SNI %s", async (name) => {
    const s = await connect(srv.port, { servername: name, ca: m.certPem, ALPNProtocols: ["http/1.1"] });
    try {
      expect(s.authorized).toBe(true); // chain verified and checkServerIdentity passed
      const peer = s.getPeerCertificate();
      expect(tls.checkServerIdentity(name, peer)).toBeUndefined();
      expect(peer.subjectaltname).toBe(`DNS:${name}`);
      expect(s.alpnProtocol).toBe("http/1.1");
      expect(["TLSv1.2", "TLSv1.3"]).toContain(s.getProtocol());
      expect(s.getPeerX509Certificate()!.publicKey.export({ type: "spki", format: "der" })).not.toEqual(
        m.cert.publicKey.export({ type: "spki", format: "der" }),
      );
    } finally {
      s.destroy();
    }
  });

  it("gives a client without SNI (IP literal) the CONNECT host's IP leaf", async () => {
    const s = await connect(srv.port, { ca: m.certPem }); // Node sends no SNI for an IP host
    try {
      expect(s.authorized).toBe(true);
      const peer = s.getPeerCertificate();
      expect(peer.subjectaltname).toBe("IP Address:127.0.0.1");
      expect(tls.checkServerIdentity("127.0.0.1", peer)).toBeUndefined();
    } finally {
      s.destroy();
    }
  });

  it("presents leaf + CA (openssl s_client -showcerts)", async () => {
    const r = await run("sh", ["-c", `openssl s_client -connect 127.0.0.1:${srv.port} -servername example.test -showcerts -CAfile "$0" -verify_return_error </dev/null`, caFile]);
    expect(r.stdout).toContain("Verify return code: 0 (ok)");
    const certs = r.stdout.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? [];
    expect(certs.length).toBe(2);
    expect(new X509Certificate(certs[1]!).raw.equals(m.cert.raw)).toBe(true);
    const leafFile = await writeIn(dir, "served.pem", certs[0]!);
    const v = await run("openssl", ["verify", "-CAfile", caFile, leafFile]);
    expect(v.stdout.trim(), v.stderr).toBe(`${leafFile}: OK`);
  });

  it("curl --cacert accepts it for a host name, an IDN and an IP", async () => {
    const host = await run("curl", ["-sS", "--cacert", caFile, "--resolve", `example.test:${srv.port}:127.0.0.1`, `https://example.test:${srv.port}/`]);
    expect(host.stdout, host.stderr).toBe("sni=example.test");
    const idn = await run("curl", ["-sS", "--cacert", caFile, "--resolve", `xn--bcher-kva.example:${srv.port}:127.0.0.1`, `https://bücher.example:${srv.port}/`]);
    expect(idn.stdout, idn.stderr).toBe("sni=xn--bcher-kva.example");
    const ip = await run("curl", ["-sS", "--cacert", caFile, `https://127.0.0.1:${srv.port}/`]);
    expect(ip.stdout, ip.stderr).toBe("sni=-");
  });

  it("fails only that handshake for a name no leaf can carry", async () => {
    await expect(connect(srv.port, { servername: "*.example.test", ca: m.certPem })).rejects.toThrow();
    const s = await connect(srv.port, { servername: "still-fine.example", ca: m.certPem });
    expect(s.authorized).toBe(true);
    s.destroy();
  });

  it("every first contact presents its own leaf and exactly the CA after it, through the one shared context", async () => {
    const c = new LeafCache({ ca: m.ca, leafKey: m.leafKey, caCertPem: m.certPem });
    const s2 = await mitmServer(c, "127.0.0.1");
    try {
      for (let i = 0; i < 4; i++) {
        const name = `first${i}.example`;
        const s = await connect(s2.port, { servername: name, ca: m.certPem });
        try {
          expect(s.authorized).toBe(true); // the leaf verified against the CA and matched the key it signed with
          const peer = s.getPeerCertificate(true);
          expect(peer.subjectaltname).toBe(`DNS:${name}`);
          expect(Buffer.from(peer.issuerCertificate.raw).equals(m.cert.raw)).toBe(true);
          expect(s.getPeerX509Certificate()!.publicKey.export({ type: "spki", format: "der" })).toEqual(m.leafKey.spkiDer);
        } finally {
          s.destroy();
        }
      }
      // What is on the wire after several leaves took turns on the shared context: leaf + CA, the CA once.
      const r = await run("sh", ["-c", `openssl s_client -connect 127.0.0.1:${s2.port} -servername last.example -showcerts -CAfile "$0" -verify_return_error </dev/null`, caFile]);
      expect(r.stdout).toContain("Verify return code: 0 (ok)");
      const certs = (r.stdout.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? []).map((p) => new X509Certificate(p));
      expect(certs.map((x) => x.subjectAltName)).toEqual(["DNS:last.example", m.cert.subjectAltName]);
      expect(certs[1]!.raw.equals(m.cert.raw)).toBe(true);
      expect(c.minted).toBe(6); // the CONNECT host, four names and last.example
    } finally {
      await s2.close();
    }
  });

  it("a TLS socket keeps the leaf it was made with when the next socket gets another name's", async () => {
    const c = new LeafCache({ ca: m.ca, leafKey: m.leafKey, caCertPem: m.certPem });
    const names = ["one.example", "two.example", "three.example"];
    const held: net.Socket[] = [];
    // Every socket is made (one get() each, in turn) before any handshake is read.
    const server = net.createServer((raw) => {
      held.push(raw);
      if (held.length < names.length) return;
      held.forEach((sock, i) => {
        const t = new tls.TLSSocket(sock, { isServer: true, secureContext: c.get(names[i]!) });
        t.on("error", () => t.destroy());
      });
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
    const port = (server.address() as net.AddressInfo).port;
    try {
      // No SNI (IP host): the leaf a client sees is the one its socket was made with.
      const clients: tls.TLSSocket[] = [];
      for (let i = 0; i < names.length; i++) {
        clients.push(tls.connect({ host: "127.0.0.1", port, ca: m.certPem, checkServerIdentity: () => undefined }));
        await new Promise((r) => server.once("connection", r));
      }
      const sans = await Promise.all(clients.map((s) => new Promise<string>((resolve, reject) => {
        s.once("secureConnect", () => resolve(s.getPeerCertificate().subjectaltname));
        s.once("error", reject);
      })));
      clients.forEach((s) => s.destroy());
      expect(sans).toEqual(names.map((n) => `DNS:${n}`));
    } finally {
      await new Promise<void>((r) => server.close(() => r()));
    }
  });

  it("a name contacted again gets a context of its own, built after that handshake", async () => {
    const c = new LeafCache({ ca: m.ca, leafKey: m.leafKey, caCertPem: m.certPem });
    const first = c.get("again.example");
    const second = c.get("again.example");
    expect(second).toBe(first); // the shared context, until its own is built
    expect(c.get("other.example")).toBe(first);
    await new Promise((r) => setImmediate(r));
    const own = c.get("again.example");
    expect(own).not.toBe(first);
    expect(c.get("again.example")).toBe(own);
    expect(c.get("third.example")).toBe(first);
    // The own context presents the leaf and the CA.
    const server = net.createServer((raw) => {
      const t = new tls.TLSSocket(raw, { isServer: true, secureContext: c.get("again.example") });
      t.on("error", () => t.destroy());
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
    try {
      const s = await connect((server.address() as net.AddressInfo).port, { servername: "again.example", ca: m.certPem });
      expect(s.authorized).toBe(true);
      expect(s.getPeerCertificate(true).subjectaltname).toBe("DNS:again.example");
      s.destroy();
    } finally {
      await new Promise<void>((r) => server.close(() => r()));
    }
    expect(c.minted).toBe(3);
  });

  it("an SNI naming the CONNECT host keeps the socket's leaf; another name gets its own", async () => {
    const c = new LeafCache({ ca: m.ca, leafKey: m.leafKey, caCertPem: m.certPem });
    const server = net.createServer((raw) => {
      const t = new tls.TLSSocket(raw, { isServer: true, secureContext: c.get("connect.example"), SNICallback: c.sniCallbackFor("Connect.Example") });
      t.on("error", () => t.destroy());
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
    const port = (server.address() as net.AddressInfo).port;
    try {
      for (const [sni, san] of [["connect.example", "DNS:connect.example"], ["sni.example", "DNS:sni.example"], ["connect.example.", "DNS:connect.example"]] as const) {
        const s = await connect(port, { servername: sni, ca: m.certPem });
        expect(s.authorized).toBe(true);
        expect(s.getPeerCertificate().subjectaltname).toBe(san);
        s.destroy();
      }
    } finally {
      await new Promise<void>((r) => server.close(() => r()));
    }
  });

  it("lets concurrent first contacts for one name share one signature", async () => {
    const fresh = new LeafCache({ ca: m.ca, leafKey: m.leafKey, caCertPem: m.certPem });
    const s2 = await mitmServer(fresh, "127.0.0.1");
    try {
      const socks = await Promise.all(Array.from({ length: 8 }, () => connect(s2.port, { servername: "shared.example", ca: m.certPem })));
      expect(socks.every((s) => s.authorized)).toBe(true);
      const serials = new Set(socks.map((s) => s.getPeerCertificate().serialNumber));
      socks.forEach((s) => s.destroy());
      expect(serials.size).toBe(1);
      expect(fresh.minted).toBe(2); // 127.0.0.1 (the CONNECT host) and shared.example
    } finally {
      await s2.close();
    }
  });
});

describe("LeafCache bookkeeping", () => {
  let m: MemoryCa;
  beforeAll(async () => {
    m = await memoryCa();
  });

  it("caches by SAN, so spellings of one name share a leaf", () => {
    const c = new LeafCache({ ca: m.ca, leafKey: m.leafKey, caCertPem: m.certPem });
    const a = c.get("Example.TEST");
    expect(c.get("example.test.")).toBe(a);
    expect(c.get("[::1]")).toBe(c.get("0:0::1"));
    expect(c.get("bücher.example")).toBe(c.get("xn--bcher-kva.example"));
    expect(c.minted).toBe(3);
    expect(() => c.get("")).toThrow(ProxyError);
  });

  it("evicts the least recently used leaf beyond its bound", () => {
    const c = new LeafCache({ ca: m.ca, leafKey: m.leafKey, caCertPem: m.certPem, maxEntries: 2 });
    const a = c.get("a.test");
    c.get("b.test");
    expect(c.get("a.test")).toBe(a); // a is now the most recent
    c.get("c.test"); // evicts b
    expect(c.size).toBe(2);
    expect(c.minted).toBe(3);
    expect(c.get("a.test")).toBe(a);
    expect(c.minted).toBe(3);
    c.get("b.test"); // minted again, evicting c
    expect(c.minted).toBe(4);
    c.get("a.test");
    expect(c.minted).toBe(4);
    c.get("c.test");
    expect(c.minted).toBe(5);
  });

  it("re-mints when less than a day of validity is left", () => {
    let now = Date.now();
    const c = new LeafCache({ ca: m.ca, leafKey: m.leafKey, caCertPem: m.certPem, now: () => now });
    c.get("example.test");
    const pem1 = c.certPem("example.test");
    now += 395 * DAY_MS; // 2 days left
    c.get("example.test");
    expect(c.certPem("example.test")).toBe(pem1);
    expect(c.minted).toBe(1);
    now += 1.5 * DAY_MS; // half a day left
    c.get("example.test");
    expect(c.certPem("example.test")).not.toBe(pem1);
    expect(c.minted).toBe(2);
    const x1 = new X509Certificate(pem1);
    const x2 = new X509Certificate(c.certPem("example.test"));
    expect(Date.parse(x2.validTo)).toBeGreaterThan(Date.parse(x1.validTo));
  });

  it("rejects a nonsensical bound", () => {
    expect(() => new LeafCache({ ca: m.ca, leafKey: m.leafKey, caCertPem: m.certPem, maxEntries: 0 })).toThrow(RangeError);
  });

  it("costs per new name (printed, not asserted)", () => {
    const c = new LeafCache({ ca: m.ca, leafKey: m.leafKey, caCertPem: m.certPem });
    const n = 300;
    const t0 = performance.now();
    for (let i = 0; i < n; i++) c.get(`h${i}.example.test`);
    const t1 = performance.now();
    for (let i = 0; i < n; i++) c.get(`h${i}.example.test`);
    const t2 = performance.now();
    console.log(`LeafCache.get: ${(((t1 - t0) * 1000) / n).toFixed(1)} µs per new name (mint + SecureContext), ${(((t2 - t1) * 1000) / n).toFixed(1)} µs per hit`);
    expect(c.minted).toBe(n);
  });
});
