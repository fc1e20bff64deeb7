/**
 * WebSocket pass-through: a loopback RFC 6455 echo origin (HTTP and HTTPS), reached through lathe
 * by a hand-written client (absolute-form upgrade, and origin-form inside CONNECT tunnels, plain
 * and TLS) and by undici's WebSocket with a ProxyAgent. Messages must flow both ways unchanged;
 * the WARC must hold the handshake as a 101 response record (head only) + its request record.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { randomBytes } from "node:crypto";
import net from "node:net";
import tls from "node:tls";
import { ProxyAgent, WebSocket as UndiciWebSocket } from "undici";
import { originCerts } from "../helpers/certs.js";
import { WS_GREETING, WsFrameReader, bytesOf, startWsOrigin, wsAccept, wsFrame, type WsFrame, type WsOrigin } from "../helpers/origin.js";
import { startTestLathe, type TestLathe } from "../helpers/lathe.js";
import { captureOf, checkDigests, readAllWarcs, type ReadRecord } from "../helpers/warcs.js";
import { within } from "./util.js";

const STEP_MS = 10_000;

interface RawWs {
  /** The 101 head as the client received it. */
  head: string;
  send(opcode: number, data: Buffer | string): void;
  next(): Promise<WsFrame>;
  close(): Promise<void>;
}

/** Upgrade on an already-open socket (to lathe, or inside a tunnel), then speak frames on it. */
function wsOver(socket: net.Socket, requestTarget: string, host: string): Promise<RawWs> {
  const key = randomBytes(16).toString("base64");
  return within(
    STEP_MS,
    new Promise<RawWs>((resolve, reject) => {
      const reader = new WsFrameReader();
      const frames: WsFrame[] = [];
      const waiters: Array<(f: WsFrame) => void> = [];
      let headBuf = Buffer.alloc(0);
      let head: string | null = null;
      const deliver = (fs: WsFrame[]) => {
        for (const f of fs) {
          const w = waiters.shift();
          if (w) w(f);
          else frames.push(f);
        }
      };
      socket.on("error", reject);
      socket.on("data", (d: Buffer) => {
        if (head !== null) return deliver(reader.push(d));
        headBuf = Buffer.concat([headBuf, d]);
        const end = headBuf.indexOf("\r\n\r\n");
        if (end < 0) return;
        head = headBuf.subarray(0, end + 4).toString("latin1");
        const rest = headBuf.subarray(end + 4);
        if (!/^HTTP\/1\.1 101 /.test(head)) return reject(new Error(`no upgrade: ${head}`));
        const accept = /\r\nsec-websocket-accept: *([^\r]+)/i.exec(head)?.[1];
        if (accept !== wsAccept(key)) return reject(new Error(`bad Sec-WebSocket-Accept in ${head}`));
        resolve({
          head,
          send: (opcode, data) => socket.write(wsFrame(opcode, data, true)),
          next: () => within(STEP_MS, new Promise<WsFrame>((r) => (frames.length ? r(frames.shift()!) : waiters.push(r))), "a websocket frame"),
          close: () =>
            within(
              STEP_MS,
              new Promise<void>((r) => {
                socket.once("close", () => r());
                socket.write(wsFrame(8, Buffer.from([0x03, 0xe8]), true));
                socket.end();
              }),
              "websocket close",
            ).finally(() => socket.destroy()),
        });
        if (rest.length) deliver(reader.push(rest));
      });
      socket.write(
        `GET ${requestTarget} HTTP/1.1\r\nHost: ${host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: ${key}\r\nSec-WebSocket-Version: 13\r\nOrigin: http://${host}\r\n\r\n`,
      );
    }),
    `websocket handshake for ${requestTarget}`,
  );
}

function connectTo(port: number): Promise<net.Socket> {
  return within(
    STEP_MS,
    new Promise((resolve, reject) => {
      const s = net.connect(port, "127.0.0.1", () => resolve(s));
      s.once("error", reject);
    }),
    "connect to lathe",
  );
}

/** CONNECT through lathe; with `ca`, TLS inside the tunnel (trusting lathe's CA). */
async function tunnelTo(lathe: TestLathe, port: number, ca?: string): Promise<net.Socket> {
  const s = await connectTo(lathe.address.port);
  await within(
    STEP_MS,
    new Promise<void>((resolve, reject) => {
      s.once("error", reject);
      s.write(`CONNECT 127.0.0.1:${port} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n\r\n`);
      s.once("data", (d) => (/^HTTP\/1\.1 200/.test(d.toString("latin1")) ? resolve() : reject(new Error(d.toString("latin1")))));
    }),
    "CONNECT answer",
  );
  if (!ca) return s;
  return within(
    STEP_MS,
    new Promise<net.Socket>((resolve, reject) => {
      const t = tls.connect({ socket: s, host: "127.0.0.1", ca }, () => resolve(t));
      t.once("error", reject);
    }),
    "TLS in the tunnel",
  );
}

async function echoRoundTrip(ws: RawWs, tag: string): Promise<void> {
  const greeting = await ws.next();
  expect(greeting.opcode).toBe(1);
  expect(greeting.masked).toBe(false);
  expect(greeting.payload.toString()).toBe(WS_GREETING);
  ws.send(1, `text from ${tag}`);
  const e1 = await ws.next();
  expect(e1.opcode).toBe(1);
  expect(e1.payload.toString()).toBe(`text from ${tag}`);
  // A binary message large enough for the 64-bit length form, both ways.
  const big = bytesOf(70_000, 99);
  ws.send(2, big);
  const e2 = await ws.next();
  expect(e2.opcode).toBe(2);
  expect(e2.payload.equals(big)).toBe(true);
  ws.send(9, "ping");
  const pong = await ws.next();
  expect(pong.opcode).toBe(10);
  expect(pong.payload.toString()).toBe("ping");
  await ws.close();
}

/** undici's WebSocket through a ProxyAgent: resolves with the messages once `n` arrived. */
function undiciEcho(url: string, agent: ProxyAgent, message: string): Promise<string[]> {
  return within(
    STEP_MS,
    new Promise<string[]>((resolve, reject) => {
      const ws = new UndiciWebSocket(url, { dispatcher: agent });
      const got: string[] = [];
      ws.addEventListener("open", () => ws.send(message));
      ws.addEventListener("message", (e) => {
        got.push(String(e.data));
        if (got.length === 2) ws.close(1000);
      });
      ws.addEventListener("error", (e) => reject(new Error(`websocket error on ${url}: ${(e as unknown as { message?: string }).message ?? e.type}`)));
      ws.addEventListener("close", () => (got.length === 2 ? resolve(got) : reject(new Error(`closed early on ${url}, got ${JSON.stringify(got)}`))));
    }),
    `undici websocket ${url}`,
  );
}

describe("WebSocket pass-through", () => {
  const certs = originCerts();
  let wsOrigin: WsOrigin;
  let wssOrigin: WsOrigin;
  let lathe: TestLathe;
  let records: ReadRecord[] = [];
  let stopped = false;

  beforeAll(async () => {
    wsOrigin = await startWsOrigin();
    wssOrigin = await startWsOrigin(certs);
    lathe = await startTestLathe({ upstream: { caFile: certs.caFile, allowHosts: ["127.0.0.1", "localhost"] } });
  });
  afterAll(async () => {
    if (!stopped) await lathe?.stop();
    await wsOrigin?.close();
    await wssOrigin?.close();
  });

  it("ws:// with an absolute-form upgrade request to the proxy", async () => {
    const s = await connectTo(lathe.address.port);
    const ws = await wsOver(s, `${wsOrigin.url}/ws/absolute`, `127.0.0.1:${wsOrigin.port}`);
    expect(ws.head).toBe(wsOrigin.handshakes.get("/ws/absolute")!.toString("latin1"));
    await echoRoundTrip(ws, "absolute");
  });

  it("ws:// inside a CONNECT tunnel (what browsers do)", async () => {
    const s = await tunnelTo(lathe, wsOrigin.port);
    const ws = await wsOver(s, "/ws/tunnel", `127.0.0.1:${wsOrigin.port}`);
    await echoRoundTrip(ws, "tunnel");
  });

  it("wss:// inside a CONNECT tunnel with TLS to lathe's leaf", async () => {
    const s = await tunnelTo(lathe, wssOrigin.port, lathe.ca.caCertPem);
    const ws = await wsOver(s, "/ws/tls", `127.0.0.1:${wssOrigin.port}`);
    await echoRoundTrip(ws, "tls");
  });

  it("undici WebSocket through a ProxyAgent, ws:// and wss://", async () => {
    const agent = new ProxyAgent({ uri: lathe.proxyUrl, requestTls: { ca: lathe.ca.caCertPem } });
    try {
      expect(await undiciEcho(`ws://127.0.0.1:${wsOrigin.port}/ws/undici`, agent, "undici plain")).toEqual([WS_GREETING, "undici plain"]);
      expect(await undiciEcho(`wss://127.0.0.1:${wssOrigin.port}/ws/undici`, agent, "undici tls")).toEqual([WS_GREETING, "undici tls"]);
    } finally {
      await agent.destroy();
    }
    // The origin got every client frame masked, as RFC 6455 requires (lathe passes bytes through).
    expect(wsOrigin.unmasked).toBe(0);
    expect(wssOrigin.unmasked).toBe(0);
    expect(wsOrigin.messages.map((m) => m.data.length > 100 ? `<${m.data.length} bytes>` : m.data.toString())).toEqual([
      "text from absolute",
      "<70000 bytes>",
      "text from tunnel",
      "<70000 bytes>",
      "undici plain",
    ]);
  });

  it("records each handshake as a 101 response (head only) + request with Upgrade: websocket", async () => {
    await lathe.stop();
    stopped = true;
    records = await readAllWarcs(lathe.dir);
    for (const r of records) expect(checkDigests(r)).toEqual([]);
    const cases: Array<[WsOrigin, string, boolean]> = [
      [wsOrigin, "/ws/absolute", false],
      [wsOrigin, "/ws/tunnel", false],
      [wssOrigin, "/ws/tls", true],
      [wsOrigin, "/ws/undici", false],
      [wssOrigin, "/ws/undici", true],
    ];
    for (const [o, path, isTls] of cases) {
      const uri = `${o.url}${path}`;
      const { response, request } = captureOf(records, uri);
      expect(response.httpHead, uri).toMatch(/^HTTP\/1\.1 101 Switching Protocols\r\n/);
      // The head exactly as the origin wrote it, and no body: the greeting frame that arrived
      // in the same packet belongs to the upgraded stream, which is not recorded.
      expect(response.httpHead, uri).toBe(o.handshakes.get(path)!.toString("latin1"));
      expect(response.body!.length, uri).toBe(0);
      expect(response.get("WARC-Payload-Digest"), uri).toBe("sha1:3I42H3S6NNFQ2MSVX7XZKYAYSCX5QBYJ");
      expect(response.get("WARC-IP-Address")).toBe("127.0.0.1");
      expect(request.httpHead!.startsWith(`GET ${path} HTTP/1.1\r\n`), uri).toBe(true);
      expect(request.httpHead, uri).toMatch(/\r\nupgrade: websocket\r\n/i);
      expect(request.httpHead, uri).toMatch(/\r\nconnection: [^\r]*upgrade/i);
      expect(request.httpHead, uri).toMatch(/\r\nsec-websocket-key: [A-Za-z0-9+/=]{24}\r\n/i);
      expect(request.body!.length, uri).toBe(0);
      expect(request.get("WARC-Date")).toBe(response.get("WARC-Date"));
      if (isTls) expect(response.getAll("WARC-Protocol"), uri).toEqual(["http/1.1", expect.stringMatching(/^tls\/1\.[23]$/)]);
      else expect(response.getAll("WARC-Protocol"), uri).toEqual(["http/1.1"]);
      // The upgraded bytes (frames) are nowhere in the WARC.
      expect(request.block.includes(Buffer.from("text from"))).toBe(false);
    }
    const frameText = Buffer.from(WS_GREETING);
    expect(records.some((r) => r.block.includes(frameText))).toBe(false);
  });
});
