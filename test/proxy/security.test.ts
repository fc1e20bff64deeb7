/**
 * Issue #7, security: lathe is not an open proxy, refuses loops and protected destinations
 * (after DNS), keeps credentials and cookies out of its logs, keeps the CA key to itself and
 * never mints a wildcard at a public suffix. Real sockets throughout.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import dns from "node:dns";
import http from "node:http";
import net from "node:net";
import tls from "node:tls";
import { X509Certificate, createPublicKey } from "node:crypto";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { networkInterfaces } from "node:os";
import { type Origin, startHttpOrigin, startHttpsOrigin, startRawOrigin } from "../helpers/origin.js";
import { originCerts } from "../helpers/certs.js";
import { type TestLathe, startTestLathe } from "../helpers/lathe.js";
import { rawExchange, viaProxy } from "../helpers/client.js";
import { readAllWarcs } from "../helpers/warcs.js";
import { createLogger } from "../../src/core/log.js";
import { leafName } from "../../src/tls/leaf.js";

/** Send raw bytes from a chosen local address; resolve with what came back and whether it closed. */
function rawFrom(port: number, localAddress: string, bytes: string, ms = 1500): Promise<{ data: string; closed: boolean }> {
  return new Promise((resolve) => {
    const s = net.connect({ port, host: "127.0.0.1", localAddress });
    let data = "";
    const t = setTimeout(() => {
      s.destroy();
      resolve({ data, closed: false });
    }, ms);
    s.on("data", (d) => (data += d.toString("latin1")));
    s.on("error", () => undefined);
    s.on("close", () => {
      clearTimeout(t);
      resolve({ data, closed: true });
    });
    s.on("connect", () => s.write(bytes));
  });
}

/** CONNECT through the proxy, then TLS with `servername`; resolves with the peer certificate or the error. */
function tlsThrough(proxyPort: number, connectTo: string, servername: string | undefined, ca: string): Promise<tls.PeerCertificate | Error> {
  return new Promise((resolve) => {
    const s = net.connect(proxyPort, "127.0.0.1");
    s.on("error", (e) => resolve(e));
    s.write(`CONNECT ${connectTo} HTTP/1.1\r\nHost: ${connectTo}\r\n\r\n`);
    s.once("data", (d) => {
      if (!/^HTTP\/1\.1 200/.test(d.toString())) return resolve(new Error(d.toString()));
      const t = tls.connect({ socket: s, ca, servername, rejectUnauthorized: false, ...(servername === undefined ? {} : {}) }, () => {
        const cert = t.getPeerCertificate();
        t.destroy();
        resolve(cert);
      });
      t.on("error", (e) => resolve(e));
    });
  });
}

describe("not an open proxy", () => {
  for (const host of ["0.0.0.0", "::"]) {
    it(`refuses to start on ${host} without proxy.auth "required" or proxy.allowClients, saying what to set`, async () => {
      const err = await startTestLathe({ proxy: { host } }).then(
        async (l) => {
          await l.stop();
          return null;
        },
        (e: Error & { code?: string }) => e,
      );
      expect(err).not.toBeNull();
      expect(err!.code).toBe("ERR_CONFIG");
      expect(err!.message).toMatch(/proxy\.auth/);
      expect(err!.message).toMatch(/proxy\.allowClients/);
    });
  }

  it("starts on 0.0.0.0 with proxy.auth required (unauthenticated requests get 407), or with an allow-list", async () => {
    const a = await startTestLathe({ proxy: { host: "0.0.0.0", auth: "required" } });
    try {
      const origin = await startHttpOrigin();
      const r = await viaProxy(`http://127.0.0.1:${a.address.port}`, `${origin.url}/text/10`);
      expect(r.status).toBe(407);
      expect(origin.seen).toHaveLength(0);
      await origin.close();
    } finally {
      await a.stop();
    }
    const b = await startTestLathe({ proxy: { host: "0.0.0.0", allowClients: ["127.0.0.0/8"] } });
    await b.stop();
  });

  it("off loopback without an allow-list, a session's own port also requires that session's credentials", async () => {
    const origin = await startHttpOrigin();
    const exposed = await startTestLathe({ proxy: { host: "0.0.0.0", auth: "required" } });
    try {
      const s = await exposed.facade.openSession({});
      const port = `http://127.0.0.1:${s.proxy.port}`;
      const creds = `Basic ${Buffer.from(`${s.username}:${s.password}`).toString("base64")}`;
      const none = await viaProxy(port, `${origin.url}/text/10`);
      expect(none.status).toBe(407);
      const wrong = await viaProxy(port, `${origin.url}/text/10`, { headers: { Host: "x", "Proxy-Authorization": `Basic ${Buffer.from(`${s.username}:nope`).toString("base64")}` } });
      expect(wrong.status).toBe(407);
      expect(origin.seen).toHaveLength(0);
      const ok = await viaProxy(port, `${origin.url}/text/10`, { headers: { Host: "x", "Proxy-Authorization": creds } });
      expect(ok.status).toBe(200);
      // A tunnel authenticated on its CONNECT serves its requests without them.
      const tunnel = await rawExchange(
        port,
        `CONNECT ${origin.host}:${origin.port} HTTP/1.1\r\nProxy-Authorization: ${creds}\r\n\r\nGET /text/3 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`,
      );
      expect(tunnel).toMatch(/^HTTP\/1\.1 200 Connection Established\r\n\r\nHTTP\/1\.1 200 OK/);
      const noCreds = await rawExchange(port, `CONNECT ${origin.host}:${origin.port} HTTP/1.1\r\n\r\n`);
      expect(noCreds).toMatch(/^HTTP\/1\.1 407 /);
      await exposed.facade.closeSession(s.id);
    } finally {
      await exposed.stop();
    }
    // With an allow-list (or on loopback) the session port is the credential, as before.
    const listed = await startTestLathe({ proxy: { host: "0.0.0.0", auth: "required", allowClients: ["127.0.0.1/32"] } });
    try {
      const s = await listed.facade.openSession({});
      const r = await viaProxy(`http://127.0.0.1:${s.proxy.port}`, `${origin.url}/text/10`);
      expect(r.status).toBe(200);
      await listed.facade.closeSession(s.id);
    } finally {
      await listed.stop();
      await origin.close();
    }
  });

  it("rejects a malformed allow-list entry at configuration time", async () => {
    await expect(startTestLathe({ proxy: { allowClients: ["10.0.0.0/33"] } })).rejects.toThrow(/proxy\.allowClients\[0\]/);
    await expect(startTestLathe({ upstream: { denyAddresses: ["metadata"] } })).rejects.toThrow(/upstream\.denyAddresses\[0\]/);
  });

  it("closes connections from addresses outside proxy.allowClients before reading a byte; allowed ones are served", async () => {
    const origin = await startHttpOrigin();
    const lathe = await startTestLathe({ proxy: { allowClients: ["127.0.0.2/32"] } });
    try {
      const req = `GET ${origin.url}/text/10 HTTP/1.1\r\nHost: ${origin.host}:${origin.port}\r\nConnection: close\r\n\r\n`;
      const refused = await rawFrom(lathe.address.port, "127.0.0.1", req);
      expect(refused.closed).toBe(true);
      expect(refused.data).toBe("");
      expect(origin.seen).toHaveLength(0);
      const served = await rawFrom(lathe.address.port, "127.0.0.2", req);
      expect(served.data).toMatch(/^HTTP\/1\.1 200 /);
      expect(origin.seen).toHaveLength(1);
    } finally {
      await lathe.stop();
      await origin.close();
    }
  });
});

describe("loops and protected destinations", () => {
  let lathe: TestLathe;
  let origin: Origin; // on 127.0.0.3, which this lathe's deny-list protects
  let allowed: Origin; // on 127.0.0.1
  const names: Record<string, string> = { "metadata.test": "127.0.0.3", "self.test": "127.0.0.1", "both.test": "127.0.0.1" };
  // A resolver for the test names; everything else goes to the system's.
  const lookup = ((host: string, opts: dns.LookupOptions, cb: (...a: unknown[]) => void) => {
    const ip = names[host];
    if (!ip) return dns.lookup(host, opts, cb as never);
    const list = host === "both.test" ? [{ address: "127.0.0.1", family: 4 }, { address: "127.0.0.3", family: 4 }] : [{ address: ip, family: 4 }];
    if (opts.all) cb(null, list);
    else cb(null, list[0]!.address, 4);
  }) as unknown as net.LookupFunction;

  beforeAll(async () => {
    origin = await startHttpOrigin("127.0.0.3");
    allowed = await startHttpOrigin();
    lathe = await startTestLathe({ upstream: { denyAddresses: ["127.0.0.3/32", "169.254.169.254/32"] } }, { lookup });
  });
  afterAll(async () => {
    await lathe.stop();
    await origin.close();
    await allowed.close();
  });

  it("refuses a request to lathe's own proxy port (508), by IP, by name, through localhost and 0.0.0.0", async () => {
    const port = lathe.address.port;
    for (const url of [`http://127.0.0.1:${port}/`, `http://self.test:${port}/x`, `http://localhost:${port}/y`, `http://0.0.0.0:${port}/z`]) {
      const r = await viaProxy(lathe.proxyUrl, url);
      expect(r.status, url).toBe(508);
      expect(r.body.toString(), url).toMatch(/lathe itself \(a request loop\)/);
    }
  });

  it("refuses loops to the control port and to a session's port, and a CONNECT to itself", async () => {
    const control = new URL(lathe.controlUrl!);
    const r = await viaProxy(lathe.proxyUrl, `http://127.0.0.1:${control.port}/api/v1/status`);
    expect(r.status).toBe(508);
    const s = await lathe.facade.openSession({});
    try {
      const viaSession = await viaProxy(lathe.proxyUrl, `http://127.0.0.1:${s.proxy.port}/`);
      expect(viaSession.status).toBe(508);
      // And the session port refuses a request back to the main port.
      const back = await viaProxy(s.proxyUrl, `http://self.test:${lathe.address.port}/`);
      expect(back.status).toBe(508);
    } finally {
      await lathe.facade.closeSession(s.id);
    }
    const c = await rawExchange(lathe.proxyUrl, `CONNECT 127.0.0.1:${lathe.address.port} HTTP/1.1\r\nHost: x\r\n\r\n`);
    expect(c).toMatch(/^HTTP\/1\.1 508 Loop Detected/);
    // A name: the tunnel opens, the request inside it is refused after resolution.
    const named = await rawExchange(
      lathe.proxyUrl,
      `CONNECT self.test:${lathe.address.port} HTTP/1.1\r\nHost: x\r\n\r\nGET / HTTP/1.1\r\nHost: self.test:${lathe.address.port}\r\nConnection: close\r\n\r\n`,
    );
    expect(named).toMatch(/508 Loop Detected/);
  });

  it("refuses a deny-listed address by IP (before connecting) and by a name that resolves to it (403)", async () => {
    const byIp = await viaProxy(lathe.proxyUrl, `${origin.url}/text/10`);
    expect(byIp.status).toBe(403);
    expect(byIp.body.toString()).toMatch(/upstream\.denyAddresses/);
    const byName = await viaProxy(lathe.proxyUrl, `http://metadata.test:${origin.port}/text/10`);
    expect(byName.status).toBe(403);
    expect(byName.body.toString()).toMatch(/metadata\.test \(127\.0\.0\.3\) is in upstream\.denyAddresses/);
    // A name with one allowed and one denied address is refused: the connection could use either.
    const both = await viaProxy(lathe.proxyUrl, `http://both.test:${origin.port}/text/10`);
    expect(both.status).toBe(403);
    const connect = await rawExchange(lathe.proxyUrl, `CONNECT 127.0.0.3:${origin.port} HTTP/1.1\r\nHost: x\r\n\r\n`);
    expect(connect).toMatch(/^HTTP\/1\.1 403 /);
    const meta = await viaProxy(lathe.proxyUrl, "http://169.254.169.254/latest/meta-data/");
    expect(meta.status).toBe(403);
    expect(origin.seen).toHaveLength(0);
    // Other destinations are unaffected.
    const ok = await viaProxy(lathe.proxyUrl, `${allowed.url}/text/10`);
    expect(ok.status).toBe(200);
  });

  it("records none of the refused requests", async () => {
    const l = await startTestLathe({ upstream: { denyAddresses: ["127.0.0.3/32"] } }, { lookup });
    await viaProxy(l.proxyUrl, `http://127.0.0.1:${l.address.port}/`);
    await viaProxy(l.proxyUrl, `http://metadata.test:${origin.port}/text/10`);
    await viaProxy(l.proxyUrl, `${origin.url}/text/10`);
    await l.stop();
    const records = await readAllWarcs(l.dir);
    expect(records.filter((r) => r.type !== "warcinfo")).toEqual([]);
  });

  it("denies the cloud metadata addresses by default", async () => {
    const l = await startTestLathe({});
    try {
      expect(l.config.upstream.denyAddresses).toEqual(expect.arrayContaining(["169.254.169.254/32", "fd00:ec2::254/128"]));
      for (const url of ["http://169.254.169.254/latest/meta-data/", "http://[fd00:ec2::254]/latest/meta-data/", "http://[::ffff:169.254.169.254]/"]) {
        const r = await viaProxy(l.proxyUrl, url);
        expect(r.status, url).toBe(403);
      }
    } finally {
      await l.stop();
    }
  });

  it("bound to 0.0.0.0, a request to any local address on its port is a loop", async () => {
    const l = await startTestLathe({ proxy: { host: "0.0.0.0", allowClients: ["127.0.0.0/8"] } });
    try {
      const proxyUrl = `http://127.0.0.1:${l.address.port}`;
      // Any address of this machine reaches a socket bound to 0.0.0.0.
      const external = Object.values(networkInterfaces()).flat().find((i) => i && i.family === "IPv4" && !i.internal)?.address;
      for (const ip of ["127.0.0.5", "0.0.0.0", ...(external ? [external] : [])]) {
        const r = await viaProxy(proxyUrl, `http://${ip}:${l.address.port}/`);
        expect(r.status, ip).toBe(508);
      }
    } finally {
      await l.stop();
    }
  });
});

describe("logs never contain credentials or cookies", () => {
  it("at debug level, through requests, refusals, failures and tunnels", async () => {
    const lines: string[] = [];
    const log = createLogger({ level: "debug", write: (l) => lines.push(l) });
    const jsonLines: string[] = [];
    const jsonLog = createLogger({ level: "debug", json: true, write: (l) => jsonLines.push(l) });
    const origin = await startHttpOrigin();
    const certs = originCerts();
    const httpsOrigin = await startHttpsOrigin(certs);
    const cookieOrigin = await startRawOrigin((socket) => {
      socket.write("HTTP/1.1 200 OK\r\nSet-Cookie: sid=set-cookie-SECRET-8; HttpOnly\r\nContent-Length: 2\r\n\r\nok");
    });
    for (const [logger] of [[log], [jsonLog]] as const) {
      const lathe = await startTestLathe({ proxy: { auth: "required", defaultUser: "dflt", defaultPassword: "pw-SECRET-1" }, upstream: { caFile: certs.caFile } }, { log: logger });
      try {
        const s = await lathe.facade.openSession({});
        const good = `Basic ${Buffer.from("dflt:pw-SECRET-1").toString("base64")}`;
        const sessionAuth = `Basic ${Buffer.from(`${s.username}:${s.password}`).toString("base64")}`;
        const headers = {
          Host: `${origin.host}:${origin.port}`,
          "Proxy-Authorization": good,
          Authorization: "Bearer auth-SECRET-2",
          Cookie: "sid=cookie-SECRET-3",
        };
        await viaProxy(lathe.proxyUrl, `${origin.url}/text/10`, { headers });
        await viaProxy(lathe.proxyUrl, `${origin.url}/text/10`, { headers: { ...headers, "Proxy-Authorization": sessionAuth } });
        // Wrong credentials (407), a refused host, an unreachable one, a malformed request.
        await viaProxy(lathe.proxyUrl, `${origin.url}/text/10`, { headers: { ...headers, "Proxy-Authorization": `Basic ${Buffer.from("x:wrong-SECRET-4").toString("base64")}` } });
        await viaProxy(lathe.proxyUrl, `http://127.0.0.1:1/`, { headers });
        await rawExchange(lathe.proxyUrl, `GET http://user:userinfo-SECRET-5@${origin.host}:${origin.port}/ HTTP/1.1\r\nHost: x\r\nProxy-Authorization: ${good}\r\n\r\n`, 500);
        await rawExchange(lathe.proxyUrl, `GET ${origin.url}/ HTTP/1.1\r\nProxy-Authorization: ${good}\r\nCookie: a=cookie-SECRET-6\r\nBad Header: x\r\n\r\n`, 500);
        // Set-Cookie from the origin, and a tunnel with credentials.
        await viaProxy(lathe.proxyUrl, `${cookieOrigin.url}/`, { headers });
        await viaProxy(lathe.proxyUrl, `${httpsOrigin.url}/text/5`, { headers });
        const c = await rawExchange(
          lathe.proxyUrl,
          `CONNECT ${origin.host}:${origin.port} HTTP/1.1\r\nProxy-Authorization: ${good}\r\n\r\nGET /text/3 HTTP/1.1\r\nHost: x\r\nCookie: in-tunnel-SECRET-7\r\nConnection: close\r\n\r\n`,
        );
        expect(c).toMatch(/200/);
        await lathe.facade.closeSession(s.id);
      } finally {
        await lathe.stop();
      }
    }
    // The control API with a bearer token, right and wrong.
    const withToken = await startTestLathe({ control: { token: "control-SECRET-9" } }, { log });
    try {
      for (const token of ["control-SECRET-9", "wrong-SECRET-10"]) {
        await new Promise<void>((resolve, reject) => {
          const req = http.request(`${withToken.controlUrl}/api/v1/status`, { headers: { Authorization: `Bearer ${token}`, Cookie: "c=cookie-SECRET-11" } }, (res) => {
            res.resume();
            res.on("end", () => resolve());
          });
          req.on("error", reject);
          req.end();
        });
      }
    } finally {
      await withToken.stop();
    }
    expect(lines.some((l) => l.includes("control.request"))).toBe(true);
    await origin.close();
    await httpsOrigin.close();
    await cookieOrigin.close();
    const all = [...lines, ...jsonLines].join("\n");
    expect(lines.length).toBeGreaterThan(5);
    for (const secret of ["SECRET", Buffer.from("dflt:pw-SECRET-1").toString("base64"), Buffer.from(`x:wrong-SECRET-4`).toString("base64")]) {
      expect(all).not.toContain(secret);
    }
  });

  it("redacts credential-named fields whatever the logger is given", () => {
    const out: string[] = [];
    const log = createLogger({ level: "debug", write: (l) => out.push(l), base: { token: "t-SECRET" } });
    log.info("x", { authorization: "a-SECRET", "Proxy-Authorization": "p-SECRET", cookie: "c-SECRET", "set-cookie": "s-SECRET", password: "pw-SECRET" });
    log.child({ secret: "child-SECRET" }).warn("y");
    expect(out.join("\n")).not.toContain("SECRET");
  });
});

describe("the CA key and leaves", () => {
  let lathe: TestLathe;
  let logText = "";
  beforeAll(async () => {
    lathe = await startTestLathe({}, { log: createLogger({ level: "debug", write: (l) => (logText += l + "\n") }) });
  });
  afterAll(async () => {
    await lathe.stop();
  });

  it("is written 0600 and appears in no other file of certs/ or the WARC directory, nor in the logs", async () => {
    const keyPath = join(lathe.certsDir, "lathe-ca.key");
    expect(statSync(keyPath).mode & 0o777).toBe(0o600);
    const keyPem = readFileSync(keyPath, "utf8");
    const body = keyPem.replace(/-----[^-]+-----/g, "").replace(/\s+/g, "");
    expect(body.length).toBeGreaterThan(100);
    // Traffic through an intercepted tunnel, so leaves are minted and records written.
    const origin = await startHttpOrigin();
    await rawExchange(lathe.proxyUrl, `CONNECT example.test:443 HTTP/1.1\r\nHost: example.test:443\r\n\r\n`, 300);
    await viaProxy(lathe.proxyUrl, `${origin.url}/text/100`);
    await tlsThrough(lathe.address.port, "example.test:443", "example.test", lathe.ca.caCertPem);
    await origin.close();
    const files = [
      ...readdirSync(lathe.certsDir).filter((f) => f !== "lathe-ca.key").map((f) => join(lathe.certsDir, f)),
      ...readdirSync(lathe.dir).map((f) => join(lathe.dir, f)),
    ];
    const fragment = body.slice(40, 100); // a piece of the base64 body, whatever the line breaks
    for (const f of files) {
      if (!statSync(f).isFile()) continue;
      const text = readFileSync(f).toString("latin1").replace(/\s+/g, "");
      expect(text.includes(fragment), f).toBe(false);
    }
    expect(logText.replace(/\s+/g, "").includes(fragment)).toBe(false);
    expect(lathe.ca.caCertPem.includes(fragment)).toBe(false);
  });

  it("leaves are signed by the CA but carry another key", async () => {
    const cert = await tlsThrough(lathe.address.port, "leaf.example.test:443", "leaf.example.test", lathe.ca.caCertPem);
    expect(cert).not.toBeInstanceOf(Error);
    const leaf = new X509Certificate((cert as tls.PeerCertificate).raw);
    const ca = new X509Certificate(lathe.ca.caCertPem);
    expect(leaf.verify(ca.publicKey)).toBe(true);
    expect(leaf.checkIssued(ca)).toBe(true);
    const der = (k: ReturnType<typeof createPublicKey>) => k.export({ type: "spki", format: "der" }).toString("hex");
    expect(der(leaf.publicKey)).not.toBe(der(ca.publicKey));
    const caKey = createPublicKey(readFileSync(join(lathe.certsDir, "lathe-ca.key")));
    expect(der(leaf.publicKey)).not.toBe(der(caKey));
  });

  it("never issues a wildcard: public suffixes and registrable domains get exact-name leaves", async () => {
    for (const host of ["co.uk", "github.io", "example.co.uk", "a.example.co.uk", "user.github.io", "com"]) {
      const cert = await tlsThrough(lathe.address.port, `${host}:443`, host, lathe.ca.caCertPem);
      expect(cert, host).not.toBeInstanceOf(Error);
      expect((cert as tls.PeerCertificate).subjectaltname, host).toBe(`DNS:${host}`);
    }
    // A client asking for a wildcard name (SNI or CONNECT) gets no certificate at all.
    for (const name of ["*.co.uk", "*.github.io", "*.example.co.uk"]) {
      expect(() => leafName(name), name).toThrow();
      const viaSni = await tlsThrough(lathe.address.port, "co.uk:443", name, lathe.ca.caCertPem);
      expect(viaSni, name).toBeInstanceOf(Error);
    }
    const connectWildcard = await tlsThrough(lathe.address.port, "*.co.uk:443", undefined, lathe.ca.caCertPem);
    expect(connectWildcard).toBeInstanceOf(Error);
  });
});
