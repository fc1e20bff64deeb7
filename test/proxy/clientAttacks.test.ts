/**
 * Issue #7, faults and attacks from clients, over raw sockets: slow headers, tunnels that never
 * start TLS, thousands of idle connections, malformed request lines, request smuggling,
 * oversize headers and Warcprox-Meta, invalid JSON, and path tricks in every name that becomes
 * a file. Each asserts what the client gets, that the connection is closed, and that nothing
 * reached the origin.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import http from "node:http";
import net from "node:net";
import tls from "node:tls";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { deflateSync } from "node:zlib";
import { type Origin, startHttpOrigin, startRawOrigin } from "../helpers/origin.js";
import { type TestLathe, startTestLathe } from "../helpers/lathe.js";
import { rawExchange, viaProxy } from "../helpers/client.js";
import { readAllWarcs } from "../helpers/warcs.js";
import { loadConfig } from "../../src/cli/loadConfig.js";

interface RawResult {
  data: string;
  /** The server closed the connection (as opposed to our own deadline). */
  closedByServer: boolean;
  ms: number;
}

/** Write `bytes`, then (optionally) drip `drip` one byte every `everyMs`; collect until the server closes or `deadline`. */
function rawSession(port: number, bytes: string | Buffer, o: { drip?: string; everyMs?: number; deadline?: number } = {}): Promise<RawResult> {
  return new Promise((resolve) => {
    const started = Date.now();
    const s = net.connect(port, "127.0.0.1");
    const chunks: Buffer[] = [];
    let mine = false;
    let dripTimer: NodeJS.Timeout | null = null;
    const deadline = setTimeout(() => {
      mine = true;
      s.destroy();
    }, o.deadline ?? 3000);
    s.on("data", (d) => chunks.push(d));
    s.on("error", () => undefined);
    s.on("close", () => {
      clearTimeout(deadline);
      if (dripTimer) clearInterval(dripTimer);
      resolve({ data: Buffer.concat(chunks).toString("latin1"), closedByServer: !mine, ms: Date.now() - started });
    });
    s.on("connect", () => {
      if (bytes.length) s.write(bytes);
      if (o.drip) {
        let i = 0;
        dripTimer = setInterval(() => {
          if (!s.writable) return;
          s.write(o.drip![i++ % o.drip!.length]!);
        }, o.everyMs ?? 100);
      }
    });
  });
}

const openFds = () => readdirSync("/proc/self/fd").length;

describe("slow and idle clients", () => {
  let origin: Origin;
  let lathe: TestLathe;
  beforeAll(async () => {
    origin = await startHttpOrigin();
    lathe = await startTestLathe({ proxy: { headersTimeoutMs: 500, keepAliveTimeoutMs: 600, tlsHandshakeTimeoutMs: 500 } });
  });
  afterAll(async () => {
    await lathe.stop();
    await origin.close();
  });

  it("slowloris: headers dripped a byte at a time get 408 and the connection closed after proxy.headersTimeoutMs", async () => {
    const before = origin.seen.length;
    const r = await rawSession(lathe.address.port, `GET ${origin.url}/text/10 HTTP/1.1\r\nHost: x\r\n`, { drip: "X-Slow: aaaaaaaaaaaaaaaaaaaaaaa\r\n", everyMs: 50, deadline: 5000 });
    expect(r.closedByServer).toBe(true);
    expect(r.data).toMatch(/^HTTP\/1\.1 408 /);
    expect(r.ms).toBeGreaterThanOrEqual(450);
    expect(r.ms).toBeLessThan(2500);
    expect(origin.seen.length).toBe(before);
  });

  it("a connection that never sends a byte is closed after proxy.headersTimeoutMs", async () => {
    const r = await rawSession(lathe.address.port, "", { deadline: 5000 });
    expect(r.closedByServer).toBe(true);
    expect(r.ms).toBeGreaterThanOrEqual(450);
    expect(r.ms).toBeLessThan(2500);
  });

  it("a CONNECT that never starts its TLS handshake is closed after proxy.tlsHandshakeTimeoutMs; so is one that stalls mid-handshake", async () => {
    const silent = await rawSession(lathe.address.port, `CONNECT example.test:443 HTTP/1.1\r\nHost: example.test:443\r\n\r\n`, { deadline: 5000 });
    expect(silent.data).toMatch(/^HTTP\/1\.1 200 /);
    expect(silent.closedByServer).toBe(true);
    expect(silent.ms).toBeGreaterThanOrEqual(450);
    expect(silent.ms).toBeLessThan(2500);
    // The first bytes of a ClientHello record, then nothing.
    const stalled = await rawSession(lathe.address.port, Buffer.concat([Buffer.from(`CONNECT example.test:443 HTTP/1.1\r\nHost: example.test:443\r\n\r\n`), Buffer.from([0x16, 0x03, 0x01, 0x02, 0x00, 0x01])]), { deadline: 5000 });
    expect(stalled.closedByServer).toBe(true);
    expect(stalled.ms).toBeLessThan(2500);
  });

  it("a tunnel whose TLS is up but which sends no request is closed after proxy.headersTimeoutMs", async () => {
    const started = Date.now();
    const closedAfter = await new Promise<number>((resolve, reject) => {
      const s = net.connect(lathe.address.port, "127.0.0.1");
      s.on("error", reject);
      s.write("CONNECT example.test:443 HTTP/1.1\r\nHost: example.test:443\r\n\r\n");
      s.once("data", () => {
        const t = tls.connect({ socket: s, servername: "example.test", ca: lathe.ca.caCertPem });
        t.on("error", () => undefined);
        t.on("close", () => resolve(Date.now() - started));
        setTimeout(() => reject(new Error("tunnel still open after 5 s")), 5000).unref();
      });
    });
    expect(closedAfter).toBeLessThan(2500);
  });

  it("an idle keep-alive connection is closed after proxy.keepAliveTimeoutMs", async () => {
    const r = await rawSession(lathe.address.port, `GET ${origin.url}/text/10 HTTP/1.1\r\nHost: x\r\n\r\n`, { deadline: 5000 });
    expect(r.data).toMatch(/^HTTP\/1\.1 200 /);
    expect(r.data).toMatch(/\r\nConnection: keep-alive\r\n/i);
    expect(r.closedByServer).toBe(true);
    expect(r.ms).toBeGreaterThanOrEqual(550);
    expect(r.ms).toBeLessThan(2500);
  });

  it("2,000 idle connections: another client is served meanwhile, then timeouts close them all and free their descriptors", async () => {
    const N = 2000;
    // Long enough for all of them to be opened first, even on a busy machine.
    const l = await startTestLathe({ proxy: { headersTimeoutMs: 12_000 } });
    try {
      const baseline = openFds();
      const sockets: net.Socket[] = [];
      let closedByServer = 0;
      const closedKind = [0, 0];
      // Opened in batches, each one waited for until lathe has accepted it (both ends of every
      // connection are in this process), so that all N are held by lathe, not by the listen backlog.
      for (let batch = 0; batch < N / 250; batch++) {
        await new Promise<void>((resolve, reject) => {
          let connected = 0;
          for (let j = 0; j < 250; j++) {
            const i = batch * 250 + j;
            const s = net.connect(l.address.port, "127.0.0.1");
            s.on("error", reject);
            s.resume(); // read the 408, so that the close is seen
            s.on("connect", () => {
              // Half say nothing at all, half start a request and stop.
              if (i % 2) s.write(`GET ${origin.url}/text/1 HTTP/1.1\r\nHost: x\r\n`);
              if (++connected === 250) resolve();
            });
            s.on("close", () => {
              closedByServer++;
              closedKind[i % 2]!++;
            });
            sockets.push(s);
          }
        });
        const want = baseline + 2 * sockets.length - 20;
        const until = Date.now() + 5000;
        while (openFds() < want && Date.now() < until) await new Promise((res) => setTimeout(res, 20));
      }
      expect(openFds()).toBeGreaterThanOrEqual(baseline + 2 * N - 20);
      const r = await viaProxy(l.proxyUrl, `${origin.url}/text/100`);
      expect(r.status).toBe(200);
      expect(r.body.length).toBe(100);
      expect(closedByServer).toBe(0); // they were all still open while it was served
      const deadline = Date.now() + 25_000;
      while (closedByServer < N && Date.now() < deadline) await new Promise((res) => setTimeout(res, 100));
      expect(closedKind, "closed: [silent, partial request]").toEqual([N / 2, N / 2]);
      // Both ends closed: the descriptors are back (a little slack for other work in the process).
      await new Promise((res) => setTimeout(res, 200));
      expect(openFds()).toBeLessThan(baseline + 50);
    } finally {
      await l.stop();
    }
  }, 90_000);
});

describe("malformed and smuggling requests", () => {
  let origin: Origin;
  let lathe: TestLathe;
  beforeAll(async () => {
    origin = await startHttpOrigin();
    lathe = await startTestLathe({});
  });
  afterAll(async () => {
    await lathe.stop();
    await origin.close();
  });

  /** Expect `status`, the connection closed by lathe, and nothing forwarded. */
  async function refused(bytes: string, status: number, label: string): Promise<string> {
    const before = origin.seen.length;
    const r = await rawSession(lathe.address.port, bytes, { deadline: 3000 });
    expect(r.data.split("\r\n")[0], label).toMatch(new RegExp(`^HTTP/1\\.1 ${status} `));
    expect(r.closedByServer, `${label}: connection closed`).toBe(true);
    expect(origin.seen.length, `${label}: nothing forwarded`).toBe(before);
    return r.data;
  }

  it("malformed request lines get 400 and the connection closed", async () => {
    const u = `${origin.url}/echo`;
    const lines: Record<string, string> = {
      garbage: "GARBAGE\r\n\r\n",
      "control bytes": "\x00\x01\x02\x03\r\n\r\n",
      "no target": "GET\r\n\r\n",
      "lower-case method": `get ${u} HTTP/1.1\r\nHost: x\r\n\r\n`,
      "space in target": `GET ${u}/a b HTTP/1.1\r\nHost: x\r\n\r\n`,
      "bad version": `GET ${u} HTTP/1.x\r\nHost: x\r\n\r\n`,
      "leading space on a field": `GET ${u} HTTP/1.1\r\n Host: x\r\n\r\n`,
      "origin-form": "GET /relative HTTP/1.1\r\nHost: x\r\n\r\n",
      "userinfo in target": `GET http://user:pw@127.0.0.1:${origin.port}/ HTTP/1.1\r\nHost: x\r\n\r\n`,
      "bad port": `GET http://127.0.0.1:99999/ HTTP/1.1\r\nHost: x\r\n\r\n`,
      "CONNECT without port": "CONNECT example.test HTTP/1.1\r\nHost: example.test\r\n\r\n",
    };
    for (const [label, bytes] of Object.entries(lines)) await refused(bytes, 400, label);
    await refused(`GET ${u} HTTP/9.9\r\nHost: x\r\n\r\n`, 400, "HTTP/9.9");
    await refused(`GET ${u} HTTP/2.0\r\nHost: x\r\n\r\n`, 505, "HTTP/2.0 in an HTTP/1 request line");
    const body = await refused(`GET ${u}\r\n\r\n`, 505, "HTTP/0.9");
    expect(body).toMatch(/HTTP\/0\.9 is not supported/);
  });

  it("smuggling attempts get 400, the connection is closed and nothing reaches the origin", async () => {
    const u = `${origin.url}/echo`;
    const smuggled = `GET ${origin.url}/text/1?smuggled HTTP/1.1\r\nHost: x\r\n\r\n`;
    const cases: Record<string, string> = {
      "Content-Length and Transfer-Encoding": `POST ${u} HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n${smuggled}`,
      "Transfer-Encoding then Content-Length": `POST ${u} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: ${smuggled.length + 5}\r\n\r\n0\r\n\r\n${smuggled}`,
      "two differing Content-Lengths": `POST ${u} HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nContent-Length: 40\r\n\r\nabcd${smuggled}`,
      "Content-Length list": `POST ${u} HTTP/1.1\r\nHost: x\r\nContent-Length: 4, 40\r\n\r\nabcd`,
      "signed Content-Length": `POST ${u} HTTP/1.1\r\nHost: x\r\nContent-Length: +4\r\n\r\nabcd`,
      "Transfer-Encoding: chunked, identity": `POST ${u} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n${smuggled}`,
      "Transfer-Encoding: identity, chunked": `POST ${u} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: identity, chunked\r\n\r\n0\r\n\r\n`,
      "Transfer-Encoding: xchunked": `POST ${u} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: xchunked\r\n\r\n0\r\n\r\n`,
      "Transfer-Encoding twice": `POST ${u} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n\r\n0\r\n\r\n`,
      "space before the colon": `POST ${u} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding : chunked\r\nContent-Length: 4\r\n\r\nabcd`,
      "obs-fold": `GET ${u} HTTP/1.1\r\nHost: x\r\nX-A: a\r\n b\r\n\r\n`,
      "obs-fold into Transfer-Encoding": `POST ${u} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding:\r\n chunked\r\n\r\n0\r\n\r\n`,
      "bare LF line ends": `GET ${u} HTTP/1.1\nHost: x\n\n`,
      "bare LF inside the header section": `GET ${u} HTTP/1.1\r\nHost: x\nX-A: b\r\n\r\n`,
      "bare CR": `GET ${u} HTTP/1.1\rHost: x\r\n\r\n`,
      "NUL in a field value": `GET ${u} HTTP/1.1\r\nHost: x\r\nX-A: a\x00b\r\n\r\n`,
      "invalid chunk size": `POST ${u} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n\r\n`,
      "bare LF after a chunk extension": `POST ${u} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3;\nabc\r\n0\r\n\r\n`,
    };
    for (const [label, bytes] of Object.entries(cases)) await refused(bytes, 400, label);
    expect(origin.seen.some((s) => s.path.includes("smuggled"))).toBe(false);
    // Control: the same requests, well-formed, do go through.
    const ok = await rawSession(lathe.address.port, `POST ${u} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n4\r\nabcd\r\n0\r\n\r\n`);
    expect(ok.data).toMatch(/^HTTP\/1\.1 200 [\s\S]*abcd$/);
  });

  it("records none of them", async () => {
    const l = await startTestLathe({});
    await rawSession(l.address.port, `POST ${origin.url}/echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n`);
    await rawSession(l.address.port, `POST ${origin.url}/echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: identity, chunked\r\n\r\n0\r\n\r\n`);
    await l.stop();
    expect((await readAllWarcs(l.dir)).filter((r) => r.type !== "warcinfo")).toEqual([]);
  });
});

describe("oversize headers and Warcprox-Meta", () => {
  let origin: Origin;
  beforeAll(async () => {
    origin = await startHttpOrigin();
  });
  afterAll(async () => {
    await origin.close();
  });

  it("a header section over proxy.maxHeaderBytes gets 431 naming the setting, and the connection closed", async () => {
    const lathe = await startTestLathe({ proxy: { maxHeaderBytes: 16_384 } });
    try {
      const before = origin.seen.length;
      const r = await rawSession(lathe.address.port, `GET ${origin.url}/text/1 HTTP/1.1\r\nHost: x\r\nX-Big: ${"a".repeat(20_000)}\r\n\r\n`);
      expect(r.data).toMatch(/^HTTP\/1\.1 431 /);
      expect(r.data).toMatch(/proxy\.maxHeaderBytes/);
      expect(r.closedByServer).toBe(true);
      // Many small fields add up the same way.
      const many = Array.from({ length: 3000 }, (_, i) => `X-F${i}: v\r\n`).join("");
      const r2 = await rawSession(lathe.address.port, `GET ${origin.url}/text/1 HTTP/1.1\r\nHost: x\r\n${many}\r\n`);
      expect(r2.data).toMatch(/^HTTP\/1\.1 431 /);
      // A huge request line counts too.
      const r3 = await rawSession(lathe.address.port, `GET ${origin.url}/${"p".repeat(20_000)} HTTP/1.1\r\nHost: x\r\n\r\n`);
      expect(r3.data).toMatch(/^HTTP\/1\.1 431 /);
      expect(origin.seen.length).toBe(before);
    } finally {
      await lathe.stop();
    }
  });

  it("with the defaults: a 1 MB Warcprox-Meta and 5,000 fields pass (every field forwarded); a 9 MiB Warcprox-Meta gets 431", async () => {
    const lathe = await startTestLathe({});
    try {
      const meta = JSON.stringify({ "warc-prefix": "big", metadata: { blob: "m".repeat(1_000_000) } });
      const ok = await viaProxy(lathe.proxyUrl, `${origin.url}/text/10`, { headers: { Host: "x", "Warcprox-Meta": meta } });
      expect(ok.status).toBe(200);
      const fields: string[] = ["Host", "x"];
      for (let i = 0; i < 5000; i++) fields.push(`X-F${i}`, "v");
      // An origin that counts the fields it received (Node's own server would stop at 16 KiB).
      const counting = await startRawOrigin((socket, head) => {
        const n = String(head.split("\r\n").filter((l) => l.startsWith("X-F")).length);
        socket.write(`HTTP/1.1 200 OK\r\nContent-Length: ${n.length}\r\n\r\n${n}`);
      });
      const echoed = await viaProxy(lathe.proxyUrl, `${counting.url}/count`, { headers: fields });
      await counting.close();
      expect(echoed.status).toBe(200);
      expect(echoed.body.toString()).toBe("5000");
      const before = origin.seen.length;
      const huge = JSON.stringify({ metadata: { blob: "m".repeat(9 * 1024 * 1024) } });
      const r = await rawSession(lathe.address.port, `GET ${origin.url}/text/10 HTTP/1.1\r\nHost: x\r\nWarcprox-Meta: ${huge}\r\n\r\n`, { deadline: 10_000 });
      expect(r.data).toMatch(/^HTTP\/1\.1 431 /);
      expect(r.closedByServer).toBe(true);
      expect(origin.seen.length).toBe(before);
    } finally {
      await lathe.stop();
    }
  }, 30_000);
});

describe("invalid JSON anywhere is a 400 naming the problem", () => {
  let origin: Origin;
  let lathe: TestLathe;
  beforeAll(async () => {
    origin = await startHttpOrigin();
    lathe = await startTestLathe({});
  });
  afterAll(async () => {
    await lathe.stop();
    await origin.close();
  });

  it("Warcprox-Meta: not JSON, not an object, bad compressed_blocks, on a proxied request and on WARCPROX_WRITE_RECORD", async () => {
    const cases: Array<[string, RegExp]> = [
      ["{not json", /invalid Warcprox-Meta header/],
      ["[1,2]", /invalid Warcprox-Meta header/],
      ['{"warc-prefix": 5}', /invalid Warcprox-Meta field warc-prefix/],
      ['{"compressed_blocks": "bm90IHpsaWI="}', /invalid Warcprox-Meta field (compressed_)?blocks/],
      [`{"compressed_blocks": "${deflateSync(Buffer.from("[{not json")).toString("base64")}"}`, /invalid Warcprox-Meta field (compressed_)?blocks/],
    ];
    const before = origin.seen.length;
    for (const [value, reason] of cases) {
      const r = await viaProxy(lathe.proxyUrl, `${origin.url}/text/10`, { headers: { Host: "x", "Warcprox-Meta": value } });
      expect(r.status, value).toBe(400);
      expect(r.statusMessage, value).toMatch(reason);
      expect(r.body.toString().length, value).toBeGreaterThan(5);
    }
    expect(origin.seen.length).toBe(before);
    const body = "hello";
    const wr = await rawExchange(
      lathe.proxyUrl,
      `WARCPROX_WRITE_RECORD screenshot:http://example.test/ HTTP/1.1\r\nWARC-Type: resource\r\nContent-Type: image/png\r\nContent-Length: ${body.length}\r\nWarcprox-Meta: {oops\r\n\r\n${body}`,
    );
    expect(wr).toMatch(/^HTTP\/1\.1 400 request rejected by warcprox: invalid Warcprox-Meta header/);
  });

  it("control API: a body that is not JSON, and a Lathe-Context header that is not JSON", async () => {
    const post = (path: string, body: string, headers: Record<string, string>) =>
      new Promise<{ status: number; json: { error: { code: string; message: string } } }>((resolve, reject) => {
        const req = http.request(`${lathe.controlUrl}${path}`, { method: "POST", headers }, (res) => {
          let t = "";
          res.on("data", (d) => (t += d));
          res.on("end", () => resolve({ status: res.statusCode!, json: JSON.parse(t) }));
        });
        req.on("error", reject);
        req.end(body);
      });
    const a = await post("/api/v1/collections", '{"name": "x",', { "Content-Type": "application/json" });
    expect(a.status).toBe(400);
    expect(a.json.error.message).toMatch(/invalid JSON/);
    const b = await post("/api/v1/resources?collection=default&uri=urn:note:x", "data", { "Content-Type": "text/plain", "Lathe-Context": "{bad" });
    expect(b.status).toBe(400);
    expect(b.json.error.message).toMatch(/Lathe-Context/);
  });

  it("a config file that is not JSON stops start-up naming the file", () => {
    const dir = mkdtempSync(join(tmpdir(), "lathe-badconf-"));
    const file = join(dir, "proxy.config.json");
    writeFileSync(file, '{"proxy": {');
    expect(() => loadConfig(file, {})).toThrow(new RegExp(`config file ${file.replace(/[/.]/g, "\\$&")} is not valid JSON`));
  });
});

describe("path tricks in names that become files", () => {
  let origin: Origin;
  let lathe: TestLathe;
  let outer: string;
  beforeAll(async () => {
    origin = await startHttpOrigin();
    outer = mkdtempSync(join(tmpdir(), "lathe-paths-"));
    const warcDir = join(outer, "warcs");
    mkdirSync(warcDir);
    lathe = await startTestLathe({}, { warcDir });
  });
  afterAll(async () => {
    await lathe.stop();
    await origin.close();
  });

  it("warc-prefix: separators, dot names, NUL, spaces and over-long values are 400 naming warc-prefix; no file appears anywhere", async () => {
    const bad = ["../x", "a/b", "a\\b", "..", ".", "/etc/passwd", "..\\..\\x", "a\u0000b", "a b", "x".repeat(201), "", "é"];
    const before = origin.seen.length;
    for (const prefix of bad) {
      const value = JSON.stringify({ "warc-prefix": prefix });
      const r = await rawSession(lathe.address.port, `GET ${origin.url}/text/10 HTTP/1.1\r\nHost: x\r\nWarcprox-Meta: ${value}\r\nConnection: close\r\n\r\n`);
      expect(r.data.split("\r\n")[0], JSON.stringify(prefix)).toMatch(/^HTTP\/1\.1 400 request rejected by warcprox: (slash and backslash are not permitted in warc-prefix|invalid Warcprox-Meta field warc-prefix)$/);
    }
    expect(origin.seen.length).toBe(before);
    // The same for a pushed record.
    const wr = await rawExchange(
      lathe.proxyUrl,
      `WARCPROX_WRITE_RECORD screenshot:http://example.test/ HTTP/1.1\r\nWARC-Type: resource\r\nContent-Type: image/png\r\nContent-Length: 2\r\nWarcprox-Meta: {"warc-prefix": "../escape"}\r\n\r\nhi`,
    );
    expect(wr).toMatch(/^HTTP\/1\.1 400 request rejected by warcprox: slash and backslash are not permitted in warc-prefix/);
    // A valid prefix for comparison, then the listings.
    const ok = await viaProxy(lathe.proxyUrl, `${origin.url}/text/10`, { headers: { Host: "x", "Warcprox-Meta": '{"warc-prefix": "good-prefix"}' } });
    expect(ok.status).toBe(200);
    expect(readdirSync(outer)).toEqual(["warcs"]);
    for (const f of readdirSync(join(outer, "warcs"))) {
      expect(f, f).toMatch(/^(lathe-|good-prefix)|^lathe-(dedup|state)\.sqlite3|\.cdxj|^[a-z-]+$/);
      expect(f).not.toMatch(/escape|passwd|\.\./);
    }
  });

  it("collection names and prefixes through the control API: 400 naming the field, nothing created", async () => {
    const post = (body: unknown) =>
      new Promise<{ status: number; text: string }>((resolve, reject) => {
        const req = http.request(`${lathe.controlUrl}/api/v1/collections`, { method: "POST", headers: { "Content-Type": "application/json" } }, (res) => {
          let t = "";
          res.on("data", (d) => (t += d));
          res.on("end", () => resolve({ status: res.statusCode!, text: t }));
        });
        req.on("error", reject);
        req.end(JSON.stringify(body));
      });
    for (const name of ["../x", "a/b", "..", ".", "a\\b", "a\u0000b", "", "A", "x".repeat(65), "-x", ".hidden"]) {
      const r = await post({ name });
      expect(r.status, JSON.stringify(name)).toBe(400);
      expect(JSON.parse(r.text).error.message, JSON.stringify(name)).toMatch(/name/);
    }
    for (const prefix of ["../x", "a/b", "..", "a\u0000b", ".x", "x".repeat(300)]) {
      const r = await post({ name: "okname", prefix });
      expect(r.status, JSON.stringify(prefix)).toBe(400);
      expect(JSON.parse(r.text).error.message, JSON.stringify(prefix)).toMatch(/prefix/);
    }
    // A name through Warcprox-Meta's lathe.collection is looked up, never created.
    const r = await viaProxy(lathe.proxyUrl, `${origin.url}/text/10`, { headers: { Host: "x", "Warcprox-Meta": '{"lathe": {"collection": "../../x"}}' } });
    expect(r.status).toBe(400);
    expect(lathe.facade.collections.list().map((c) => c.name)).toEqual(["default"]);
    expect(readdirSync(outer)).toEqual(["warcs"]);
    expect(readdirSync(join(outer, "warcs")).filter((f) => f === "x" || f.includes(".."))).toEqual([]);
  });

  it("the crawl log is named from the validated prefix only", async () => {
    const logs = readdirSync(join(outer, "warcs")).filter((f) => f.endsWith(".log"));
    for (const f of logs) expect(f).toMatch(/^[A-Za-z0-9][\w.-]*\.log$/);
    const content = logs.map((f) => readFileSync(join(outer, "warcs", f), "utf8")).join("");
    expect(content).not.toMatch(/escape|passwd/);
  });
});
