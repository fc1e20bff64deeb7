/**
 * Faults from the origin (issue #7; decisions.md §1 and the fault table of §2): for each one,
 * what the client gets, what the WARC holds and what the crawl log says; and after each one a
 * normal request to the same origin and to another origin still works (no poisoned pool, no host
 * remembered as bad). Timeouts are shortened through config so the file runs in seconds; the
 * "byte a second" trickle is a byte every 350 ms against a 1 s idle timeout (same shape).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import http from "node:http";
import net from "node:net";
import tls from "node:tls";
import https from "node:https";
import { readFileSync, readdirSync } from "node:fs";
import { createPrivateKey, X509Certificate } from "node:crypto";
import { dirname, join } from "node:path";
import type { AddressInfo } from "node:net";
import { ProxyAgent, fetch as undiciFetch } from "undici";
import { originCerts } from "../helpers/certs.js";
import { bytesOf, startHttpOrigin, startHttpsOrigin, startRawOrigin, type Origin } from "../helpers/origin.js";
import { startTestLathe, type TestLathe } from "../helpers/lathe.js";
import { captureOf, checkDigests, readAllWarcs, type ReadRecord } from "../helpers/warcs.js";
import { caMaterial, leafKeyMaterial, mintLeaf } from "../../src/tls/leaf.js";

interface Got {
  status?: number;
  statusMessage?: string;
  rawHeaders: string[];
  body: Buffer;
  /** The response ended cleanly (all its framing received). */
  complete: boolean;
  error?: string;
  ms: number;
}

/** GET `url` through the proxy; resolves with whatever arrived, complete or not. */
function get(proxyUrl: string, url: string, o: { agent?: http.Agent; timeoutMs?: number } = {}): Promise<Got> {
  const p = new URL(proxyUrl);
  const t0 = Date.now();
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let settled = false;
    const done = (g: Omit<Got, "ms" | "body">) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve({ ...g, body: Buffer.concat(chunks), ms: Date.now() - t0 });
    };
    const req = http.request({ host: p.hostname, port: p.port, path: url, headers: { Host: new URL(url).host }, agent: o.agent ?? false, maxHeaderSize: 8 << 20 }, (res) => {
      res.on("data", (c: Buffer) => chunks.push(c));
      const finish = (error?: string) => done({ status: res.statusCode, statusMessage: res.statusMessage, rawHeaders: res.rawHeaders, complete: res.complete, ...(error ? { error } : {}) });
      res.on("end", () => finish());
      res.on("error", (e) => finish(e.message));
      res.on("close", () => finish("closed"));
    });
    req.maxHeadersCount = 0; // no 2000-field cap: the client must see every field lathe forwards
    const timer = setTimeout(() => {
      req.destroy();
      done({ rawHeaders: [], complete: false, error: "client timeout: neither an answer nor a close" });
    }, o.timeoutMs ?? 15_000);
    req.on("error", (e) => done({ rawHeaders: [], complete: false, error: e.message }));
    req.end();
  });
}

/** A normal response sent after a malformed one on the same connection: seen only if the connection were reused. */
const POISON = "HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nPOISON";
const HEADERS_10K = Array.from({ length: 10_000 }, (_, i) => `X-H-${i}: v${i}\r\n`).join("");
const HEADERS_10K_OVER = Array.from({ length: 10_000 }, (_, i) => `X-H-${i}: ${"v".repeat(110)}\r\n`).join(""); // > 1 MiB
const LONG_VALUE = "L".repeat(100 * 1024);

/** Requests each origin connection has answered (for /stale). */
const served = new WeakMap<net.Socket, number>();

function rawRoutes(socket: net.Socket, head: string): void {
  const path = head.split(" ")[1]!.split("?")[0]!;
  const before = served.get(socket) ?? 0;
  served.set(socket, before + 1);
  switch (path) {
    case "/stale":
      // The keep-alive race, made certain: a connection that answered before is closed when the
      // next request arrives on it, as if the origin's idle timeout had fired just then.
      if (before > 0) socket.destroy();
      else socket.write("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\nfresh");
      break;
    case "/ok":
      socket.write("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 4\r\n\r\nfine");
      break;
    case "/reset-before-status":
      socket.resetAndDestroy();
      break;
    case "/reset-mid-headers":
      socket.write("HTTP/1.1 200 OK\r\nContent-Type: text/pl");
      setTimeout(() => socket.resetAndDestroy(), 30);
      break;
    case "/reset-mid-body":
      socket.write("HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: 100000\r\n\r\n");
      socket.write(bytesOf(30_000, 9));
      setTimeout(() => socket.resetAndDestroy(), 50);
      break;
    case "/silent":
      break;
    case "/trickle": {
      socket.write("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 6\r\n\r\n");
      let i = 0;
      const t = setInterval(() => {
        if (socket.destroyed) return clearInterval(t);
        socket.write("abcdef"[i]!);
        if (++i === 6) clearInterval(t);
      }, 350);
      break;
    }
    case "/bad-chunk":
      socket.write("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\nzz\r\nworld\r\n0\r\n\r\n" + POISON);
      break;
    case "/conflicting-length":
      socket.write("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\nContent-Length: 7\r\n\r\nhello\r\n" + POISON);
      break;
    case "/extra-bytes":
      // More body than Content-Length says: the surplus must not become the next response.
      socket.write("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\nhello" + POISON);
      break;
    case "/headers-10k":
      socket.write(`HTTP/1.1 200 OK\r\n${HEADERS_10K}Content-Length: 2\r\n\r\nok`);
      break;
    case "/headers-10k-over-limit":
      socket.write(`HTTP/1.1 200 OK\r\n${HEADERS_10K_OVER}Content-Length: 2\r\n\r\nok` + POISON);
      break;
    case "/long-header-line":
      socket.write(`HTTP/1.1 200 OK\r\nX-Long: ${LONG_VALUE}\r\nContent-Length: 4\r\n\r\nlong`);
      break;
    case "/never-ends": {
      socket.write("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n");
      const t = setInterval(() => {
        if (socket.destroyed) return clearInterval(t);
        socket.write("4\r\nmore\r\n");
      }, 100);
      break;
    }
  }
}

const certs = originCerts();
let raw: Origin & { connections: number };
let other: Origin;
let lathe: TestLathe;
let tlsGarbage: net.Server;
let tlsHangup: net.Server;
let selfSigned: Origin;
let expired: https.Server;
let expiredUrl = "";
let garbageUrl = "";
let hangupUrl = "";
let tlsSilent: net.Server;
let silentTlsUrl = "";

const sideSockets = new Set<net.Socket>();
async function listen(s: net.Server): Promise<number> {
  s.on("connection", (c: net.Socket) => {
    sideSockets.add(c);
    c.on("close", () => sideSockets.delete(c));
  });
  await new Promise<void>((r) => s.listen(0, "127.0.0.1", () => r()));
  return (s.address() as AddressInfo).port;
}

/** A request right after a fault: the same origin and another one answer normally. */
async function stillServes(): Promise<void> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  try {
    for (let i = 0; i < 2; i++) {
      const same = await get(lathe.proxyUrl, `${raw.url}/ok?after=${i}`, { agent });
      expect([same.status, same.body.toString(), same.complete]).toEqual([200, "fine", true]);
    }
    const o = await get(lathe.proxyUrl, `${other.url}/text/321`, { agent });
    expect([o.status, o.body.length, o.complete]).toEqual([200, 321, true]);
  } finally {
    agent.destroy();
  }
}

/** Checks run once lathe has stopped and its files are closed. */
const afterStop: Array<{ name: string; check: (recs: ReadRecord[], log: string[][]) => void }> = [];

function crawlLine(log: string[][], url: string): string[] {
  const lines = log.filter((l) => l[3] === url);
  expect(lines.length, `crawl log lines for ${url}`).toBe(1);
  return lines[0]!;
}

describe("faults from the origin: what the client gets", () => {
  beforeAll(async () => {
    raw = await startRawOrigin(rawRoutes);
    other = await startHttpOrigin();
    // TLS faults: a server answering the ClientHello with plain text, one hanging up mid-handshake.
    tlsGarbage = net.createServer((s) => {
      s.on("error", () => undefined);
      s.once("data", () => s.end("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n"));
    });
    garbageUrl = `https://127.0.0.1:${await listen(tlsGarbage)}`;
    tlsHangup = net.createServer((s) => {
      s.on("error", () => undefined);
      s.once("data", () => s.resetAndDestroy());
    });
    hangupUrl = `https://127.0.0.1:${await listen(tlsHangup)}`;
    tlsSilent = net.createServer((s) => s.on("error", () => undefined)); // accepts TCP, never speaks TLS
    silentTlsUrl = `https://127.0.0.1:${await listen(tlsSilent)}`;
    selfSigned = await startHttpsOrigin({ ...certs, key: certs.selfSigned.key, cert: certs.selfSigned.cert });
    // An expired leaf from the (trusted) origin CA: minted as if it were 800 days ago.
    const caKey = createPrivateKey(readFileSync(join(dirname(certs.caFile), "ca.key")));
    const ca = caMaterial(Buffer.from(new X509Certificate(certs.caPem).raw), caKey);
    const leaf = mintLeaf(ca, leafKeyMaterial(certs.key), "127.0.0.1", Date.now() - 800 * 86_400_000);
    expired = https.createServer({ key: certs.key, cert: leaf.certPem }, (_q, r) => {
      r.writeHead(200, { "Content-Type": "text/plain", "Content-Length": 7 });
      r.end("expired");
    });
    expiredUrl = `https://127.0.0.1:${await listen(expired)}`;
    lathe = await startTestLathe({
      upstream: { headTimeoutMs: 400, connectTimeoutMs: 400, idleTimeoutMs: 1000, caFile: certs.caFile },
      capture: { maxDurationMs: 3000 },
    });
  });
  afterAll(async () => {
    await lathe?.stop();
    await raw?.close();
    await other?.close();
    await selfSigned?.close();
    for (const s of sideSockets) s.destroy();
    for (const s of [tlsGarbage, tlsHangup, tlsSilent, expired]) {
      (s as Partial<http.Server>).closeAllConnections?.();
      await new Promise((r) => s?.close(r));
    }
  });

  it("reset before the status line: 502 'upstream closed before responding', nothing written, -3", async () => {
    const r = await get(lathe.proxyUrl, `${raw.url}/reset-before-status`);
    expect(r.status).toBe(502);
    expect(r.body.toString()).toMatch(/upstream .* closed before responding/);
    await stillServes();
    afterStop.push({
      name: "reset before the status line",
      check: (recs, log) => {
        expect(recs.some((x) => x.get("WARC-Target-URI") === `${raw.url}/reset-before-status`)).toBe(false);
        expect(crawlLine(log, `${raw.url}/reset-before-status`)[1]).toBe("-3");
      },
    });
  });

  it("reset mid-headers: 502 'upstream closed before responding', nothing written, -3", async () => {
    const r = await get(lathe.proxyUrl, `${raw.url}/reset-mid-headers`);
    expect(r.status).toBe(502);
    expect(r.body.toString()).toMatch(/closed before responding/);
    await stillServes();
    afterStop.push({
      name: "reset mid-headers",
      check: (recs, log) => {
        expect(recs.some((x) => x.get("WARC-Target-URI") === `${raw.url}/reset-mid-headers`)).toBe(false);
        expect(crawlLine(log, `${raw.url}/reset-mid-headers`)[1]).toBe("-3");
      },
    });
  });

  it("reset mid-body: the bytes so far, then the client connection is destroyed; WARC-Truncated: disconnect", async () => {
    const r = await get(lathe.proxyUrl, `${raw.url}/reset-mid-body`);
    expect(r.status).toBe(200);
    expect(r.complete).toBe(false);
    expect(r.body.length).toBeLessThanOrEqual(30_000);
    expect(r.body.equals(bytesOf(30_000, 9).subarray(0, r.body.length))).toBe(true);
    await stillServes();
    afterStop.push({
      name: "reset mid-body",
      check: (recs, log) => {
        const { response } = captureOf(recs, `${raw.url}/reset-mid-body`);
        expect(response.get("WARC-Truncated")).toBe("disconnect");
        expect(response.body!.equals(bytesOf(30_000, 9))).toBe(true);
        const line = crawlLine(log, `${raw.url}/reset-mid-body`);
        expect(line[1]).toBe("200");
        expect(line[11]).toBe("-"); // annotations: a disconnect is not annotated
      },
    });
  });

  it("accepts and never answers: 504 after upstream.headTimeoutMs, nothing written, -4", async () => {
    const r = await get(lathe.proxyUrl, `${raw.url}/silent`);
    expect(r.status).toBe(504);
    expect(r.body.toString()).toMatch(/no response within/);
    expect(r.ms).toBeLessThan(5000);
    await stillServes();
    afterStop.push({
      name: "never answers",
      check: (recs, log) => {
        expect(recs.some((x) => x.get("WARC-Target-URI") === `${raw.url}/silent`)).toBe(false);
        expect(crawlLine(log, `${raw.url}/silent`)[1]).toBe("-4");
      },
    });
  });

  it("trickles: streamed as it comes, complete although it lasts longer than the idle timeout", async () => {
    const p = new URL(lathe.proxyUrl);
    const arrivals: number[] = [];
    const t0 = Date.now();
    const body = await new Promise<string>((resolve, reject) => {
      const req = http.get({ host: p.hostname, port: p.port, path: `${raw.url}/trickle`, headers: { Host: new URL(raw.url).host }, agent: false }, (res) => {
        let s = "";
        res.on("data", (c: Buffer) => {
          s += c.toString();
          arrivals.push(Date.now() - t0);
        });
        res.on("end", () => (res.complete ? resolve(s) : reject(new Error("incomplete"))));
        res.on("error", reject);
      });
      req.on("error", reject);
    });
    expect(body).toBe("abcdef");
    expect(Date.now() - t0).toBeGreaterThan(1000 + 500); // longer than upstream.idleTimeoutMs
    // Streamed byte by byte, not buffered until the end.
    expect(arrivals.length).toBeGreaterThanOrEqual(4);
    expect(arrivals[0]!).toBeLessThan(arrivals[arrivals.length - 1]! - 1000);
    await stillServes();
    afterStop.push({
      name: "trickle",
      check: (recs, log) => {
        const { response } = captureOf(recs, `${raw.url}/trickle`);
        expect(response.get("WARC-Truncated")).toBeUndefined();
        expect(response.body!.toString()).toBe("abcdef");
        expect(crawlLine(log, `${raw.url}/trickle`)[1]).toBe("200");
      },
    });
  });

  it("invalid chunked framing after the head: the client connection is destroyed, never a complete wrong response", async () => {
    const r = await get(lathe.proxyUrl, `${raw.url}/bad-chunk`);
    // The head had been handed to the client's response when the framing broke: the connection
    // is destroyed, so the client sees either no answer or an incomplete 200, never a complete one.
    expect(r.complete).toBe(false);
    expect([undefined, 200]).toContain(r.status);
    expect(r.body.toString()).not.toMatch(/POISON|world/);
    await stillServes();
    afterStop.push({
      name: "invalid chunked framing",
      check: (recs, log) => {
        const { response } = captureOf(recs, `${raw.url}/bad-chunk`);
        // §1: head and body as received, wire-exact, WARC-Truncated: unspecified.
        expect(response.get("WARC-Truncated")).toBe("unspecified");
        expect(response.httpHead).toMatch(/\r\nTransfer-Encoding: chunked\r\n/);
        expect(response.body!.toString("latin1").startsWith("5\r\nhello\r\n")).toBe(true);
        expect(crawlLine(log, `${raw.url}/bad-chunk`)[1]).toBe("200");
      },
    });
  });

  it("conflicting Content-Length: 502 naming the parser error; recorded wire-exact as unspecified", async () => {
    const r = await get(lathe.proxyUrl, `${raw.url}/conflicting-length`);
    expect(r.status).toBe(502);
    expect(r.body.toString()).toMatch(/invalid HTTP response .*HPE_/);
    await stillServes();
    afterStop.push({
      name: "conflicting Content-Length",
      check: (recs, log) => {
        const { response } = captureOf(recs, `${raw.url}/conflicting-length`);
        expect(response.get("WARC-Truncated")).toBe("unspecified");
        expect(response.httpHead).toMatch(/\r\nContent-Length: 5\r\nContent-Length: 7\r\n\r\n$/);
        expect(response.body!.toString("latin1")).not.toMatch(/POISON/);
        expect(crawlLine(log, `${raw.url}/conflicting-length`)[1]).toBe("200");
      },
    });
  });

  it("bytes after the end of a response never become the next response on that connection", async () => {
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    try {
      const r = await get(lathe.proxyUrl, `${raw.url}/extra-bytes`, { agent });
      expect([r.status, r.body.toString(), r.complete]).toEqual([200, "hello", true]);
    } finally {
      agent.destroy();
    }
    await stillServes();
  });

  it("10,000 response headers under upstream.maxHeaderBytes: every one reaches the client, in order", async () => {
    const r = await get(lathe.proxyUrl, `${raw.url}/headers-10k`);
    expect(r.status).toBe(200);
    expect(r.body.toString()).toBe("ok");
    const names = r.rawHeaders.filter((_, i) => i % 2 === 0).filter((n) => n.startsWith("X-H-"));
    expect(names.length).toBe(10_000);
    expect(names[9_999]).toBe("X-H-9999");
    await stillServes();
    afterStop.push({
      name: "10,000 headers",
      check: (recs) => {
        const { response } = captureOf(recs, `${raw.url}/headers-10k`);
        expect(response.httpHead).toBe(`HTTP/1.1 200 OK\r\n${HEADERS_10K}Content-Length: 2\r\n\r\n`);
      },
    });
  });

  it("10,000 response headers over upstream.maxHeaderBytes (1 MiB): 502 naming the limit, -3", async () => {
    const r = await get(lathe.proxyUrl, `${raw.url}/headers-10k-over-limit`);
    expect(r.status).toBe(502);
    expect(r.body.toString()).toMatch(/exceeds upstream\.maxHeaderBytes/);
    await stillServes();
    afterStop.push({
      name: "10,000 headers over the limit",
      check: (recs, log) => {
        // The parser stopped before the header section was complete: nothing is written.
        expect(recs.some((x) => x.get("WARC-Target-URI") === `${raw.url}/headers-10k-over-limit`)).toBe(false);
        expect(crawlLine(log, `${raw.url}/headers-10k-over-limit`)[1]).toBe("-3");
      },
    });
  });

  it("a 100 KB header line is forwarded whole and recorded", async () => {
    const r = await get(lathe.proxyUrl, `${raw.url}/long-header-line`);
    expect(r.status).toBe(200);
    expect(r.body.toString()).toBe("long");
    expect(r.rawHeaders[r.rawHeaders.indexOf("X-Long") + 1]).toBe(LONG_VALUE);
    await stillServes();
    afterStop.push({
      name: "100 KB header line",
      check: (recs) => {
        const { response } = captureOf(recs, `${raw.url}/long-header-line`);
        expect(response.httpHead).toContain(`\r\nX-Long: ${LONG_VALUE}\r\n`);
      },
    });
  });

  it("a response that never ends: the bytes so far, then destroyed at capture.maxDurationMs; WARC-Truncated: time", async () => {
    const r = await get(lathe.proxyUrl, `${raw.url}/never-ends`);
    expect(r.status).toBe(200);
    expect(r.complete).toBe(false);
    expect(r.body.length).toBeGreaterThan(0);
    expect(r.body.toString()).toMatch(/^(more)+$/);
    expect(r.ms).toBeGreaterThanOrEqual(2900);
    expect(r.ms).toBeLessThan(8000);
    await stillServes();
    afterStop.push({
      name: "never ends",
      check: (recs, log) => {
        const { response } = captureOf(recs, `${raw.url}/never-ends`);
        expect(response.get("WARC-Truncated")).toBe("time");
        expect(response.body!.toString()).toMatch(/^(more)+$/);
        const line = crawlLine(log, `${raw.url}/never-ends`);
        expect(line[1]).toBe("200");
        expect(line[11]).toMatch(/timeTrunc/);
      },
    });
  });

  it("TLS handshake failure (plain text, or a hang-up, instead of a ServerHello): 502 naming the error, nothing written, -2", async () => {
    const agent = new ProxyAgent({ uri: lathe.proxyUrl, requestTls: { ca: lathe.ca.caCertPem } });
    try {
      for (const base of [garbageUrl, hangupUrl]) {
        const r = await undiciFetch(`${base}/x`, { dispatcher: agent });
        expect(r.status).toBe(502);
        expect(await r.text()).toMatch(/TLS handshake with 127\.0\.0\.1:\d+ failed: \S+/);
      }
    } finally {
      await agent.close();
    }
    await stillServes();
    afterStop.push({
      name: "TLS handshake failure",
      check: (recs, log) => {
        for (const base of [garbageUrl, hangupUrl]) {
          expect(recs.some((x) => x.get("WARC-Target-URI")?.startsWith(base))).toBe(false);
          expect(crawlLine(log, `${base}/x`)[1]).toBe("-2");
        }
      },
    });
  });

  it("connect timeout (TCP accepted, no TLS handshake within upstream.connectTimeoutMs): 504, nothing written, -2", async () => {
    const agent = new ProxyAgent({ uri: lathe.proxyUrl, requestTls: { ca: lathe.ca.caCertPem } });
    try {
      const r = await undiciFetch(`${silentTlsUrl}/x`, { dispatcher: agent });
      expect(r.status).toBe(504);
      expect(await r.text()).toMatch(/timed out after 400 ms/);
    } finally {
      await agent.close();
    }
    await stillServes();
    afterStop.push({
      name: "connect timeout",
      check: (recs, log) => {
        expect(recs.some((x) => x.get("WARC-Target-URI")?.startsWith(silentTlsUrl))).toBe(false);
        expect(crawlLine(log, `${silentTlsUrl}/x`)[1]).toBe("-2");
      },
    });
  });

  it("self-signed and expired certificates: the response, recorded with the verify result", async () => {
    const agent = new ProxyAgent({ uri: lathe.proxyUrl, requestTls: { ca: lathe.ca.caCertPem } });
    try {
      const a = await undiciFetch(`${selfSigned.url}/text/50`, { dispatcher: agent });
      expect([a.status, (await a.text()).length]).toEqual([200, 50]);
      const b = await undiciFetch(`${expiredUrl}/e`, { dispatcher: agent });
      expect([b.status, await b.text()]).toEqual([200, "expired"]);
    } finally {
      await agent.close();
    }
    await stillServes();
    afterStop.push({
      name: "invalid certificates",
      check: (recs, log) => {
        for (const [url, verdict] of [[`${selfSigned.url}/text/50`, "DEPTH_ZERO_SELF_SIGNED_CERT"], [`${expiredUrl}/e`, "CERT_HAS_EXPIRED"]] as const) {
          const { response } = captureOf(recs, url);
          const meta = recs.find((x) => x.type === "metadata" && x.get("WARC-Concurrent-To") === response.get("WARC-Record-ID"));
          expect(meta?.block.toString()).toContain(`\r\ntls-verify-result: ${verdict}\r\n`);
          expect(crawlLine(log, url)[1]).toBe("200");
        }
      },
    });
  });

  it("a kept-alive connection the origin closes as it is reused: a GET is sent again on a new one (200, recorded once)", async () => {
    await get(lathe.proxyUrl, `${raw.url}/ok?warm`); // lathe now holds a connection that has answered
    const before = raw.connections;
    const r = await get(lathe.proxyUrl, `${raw.url}/stale?get`);
    expect([r.status, r.body.toString(), r.complete]).toEqual([200, "fresh", true]);
    expect(raw.connections).toBe(before + 1); // the reused one was closed; the retry opened one
    await stillServes();
    afterStop.push({
      name: "stale kept-alive connection, GET",
      check: (recs, log) => {
        const responses = recs.filter((x) => x.type === "response" && x.get("WARC-Target-URI") === `${raw.url}/stale?get`);
        expect(responses.map((x) => x.body!.toString())).toEqual(["fresh"]);
        expect(recs.filter((x) => x.type === "request" && x.get("WARC-Target-URI") === `${raw.url}/stale?get`).length).toBe(1);
        expect(crawlLine(log, `${raw.url}/stale?get`)[1]).toBe("200");
      },
    });
  });

  it("the same race under a POST with a body: not sent twice; 502 'closed before responding', nothing written, -3", async () => {
    await get(lathe.proxyUrl, `${raw.url}/ok?warm-post`);
    const p = new URL(lathe.proxyUrl);
    const r = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = http.request({ host: p.hostname, port: p.port, method: "POST", path: `${raw.url}/stale?post`, headers: { Host: new URL(raw.url).host, "Content-Length": "4" }, agent: false }, (res) => {
        let body = "";
        res.on("data", (c: Buffer) => (body += c.toString()));
        res.on("end", () => resolve({ status: res.statusCode!, body }));
      });
      req.on("error", reject);
      req.end("data");
    });
    expect(r.status).toBe(502);
    expect(r.body).toMatch(/closed before responding/);
    expect(raw.seen.filter((x) => x.path === "/stale?post").length).toBe(1);
    await stillServes();
    afterStop.push({
      name: "stale kept-alive connection, POST",
      check: (recs, log) => {
        expect(recs.some((x) => x.get("WARC-Target-URI") === `${raw.url}/stale?post`)).toBe(false);
        expect(crawlLine(log, `${raw.url}/stale?post`)[1]).toBe("-3");
      },
    });
  });

  it("many faults at once do not disturb requests to another origin running alongside", async () => {
    const faults = ["/reset-before-status", "/reset-mid-body", "/bad-chunk", "/conflicting-length", "/silent", "/headers-10k-over-limit"];
    const agent = new http.Agent({ keepAlive: true, maxSockets: 4 });
    try {
      const bad = Promise.all(faults.flatMap((f) => [0, 1].map((i) => get(lathe.proxyUrl, `${raw.url}${f}?together=${i}`))));
      const good = await Promise.all(Array.from({ length: 24 }, (_, i) => get(lathe.proxyUrl, `${other.url}/bytes/${1000 + i}?together`, { agent })));
      for (const [i, g] of good.entries()) {
        expect(g.status).toBe(200);
        expect(g.complete).toBe(true);
        expect(g.body.equals(bytesOf(1000 + i, 1000 + i))).toBe(true);
      }
      for (const b of await bad) expect(b.error ?? "").not.toMatch(/client timeout/);
    } finally {
      agent.destroy();
    }
    await stillServes();
  });
});

describe("faults from the origin: what the WARC and the crawl log hold", () => {
  let recs: ReadRecord[] = [];
  let log: string[][] = [];
  beforeAll(async () => {
    await lathe.stop();
    recs = await readAllWarcs(lathe.dir);
    log = readdirSync(lathe.dir)
      .filter((f) => f.endsWith(".log"))
      .flatMap((f) => readFileSync(join(lathe.dir, f), "utf8").split("\n").filter(Boolean))
      .map((l) => l.split(/ +/));
  });

  it("every record reads back with valid digests, and no record holds another response's bytes", () => {
    expect(recs.length).toBeGreaterThan(10);
    for (const r of recs) expect(checkDigests(r)).toEqual([]);
    // Bytes that followed a refused response on its connection stay in that (wire-exact) record only.
    const refused = [`${raw.url}/bad-chunk`, `${raw.url}/conflicting-length`, `${raw.url}/headers-10k-over-limit`];
    for (const r of recs.filter((x) => x.type === "response" && !refused.some((u) => x.get("WARC-Target-URI")!.startsWith(u)))) {
      expect(r.body!.toString("latin1")).not.toContain("POISON");
    }
    // Every /ok answer recorded is the origin's own "fine".
    for (const r of recs.filter((x) => x.type === "response" && x.get("WARC-Target-URI")!.startsWith(`${raw.url}/ok`))) expect(r.body!.toString()).toBe("fine");
  });

  it("holds, for each fault, what the table says", () => {
    expect(afterStop.length).toBe(16);
    const failures: string[] = [];
    for (const c of afterStop) {
      try {
        c.check(recs, log);
      } catch (e) {
        failures.push(`${c.name}: ${(e as Error).message}`);
      }
    }
    expect(failures).toEqual([]);
  });
});
