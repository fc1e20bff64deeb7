/**
 * Every upstream socket has the same shape (#25). The first TLS connection to an origin offers h2;
 * when the origin picks http/1.1, the socket goes to the keep-alive agent after its handshake,
 * where the agent's own sockets start before it. Node's HTTP client code is optimised on the
 * sockets it meets, so a socket with other own properties, or the same ones in another order,
 * costs deoptimisations on every socket after it. Tested with a real connector and a real HTTPS
 * origin (HTTP/1.1 only).
 */
import https from "node:https";
import type { Socket } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createConnector, type Connector } from "../../src/upstream/connector.js";
import { originCerts } from "../helpers/certs.js";
import { startHttpsOrigin, type Origin } from "../helpers/origin.js";

let origin: Origin;
let connector: Connector;
beforeAll(async () => {
  const certs = originCerts();
  origin = await startHttpsOrigin(certs);
  connector = createConnector({ connectTimeoutMs: 5000, maxSocketsPerHost: 8, rejectInvalidCerts: true, caFile: certs.caFile, http2: true });
});
afterAll(async () => {
  connector.destroy();
  await origin.close();
});

/** A GET through the connector's keep-alive agent; resolves with the socket that carried it. */
function get(path: string): Promise<Socket> {
  return new Promise((resolve, reject) => {
    let socket: Socket | null = null;
    const req = https.request({ host: origin.host, port: origin.port, path, agent: connector.https }, (res) => {
      res.resume();
      res.on("end", () => resolve(socket!));
    });
    req.on("socket", (s: Socket) => (socket = s));
    req.on("error", reject);
    req.end();
  });
}

const shape = (s: Socket) => Reflect.ownKeys(s).map(String);

describe("upstream sockets", () => {
  it("a socket adopted after negotiating http/1.1 has the same own properties, in the same order, as the agent's own", async () => {
    const negotiated = connector.connectTls(origin.host, origin.port, ["h2", "http/1.1"]);
    await new Promise<void>((resolve, reject) => {
      negotiated.once("secureConnect", () => resolve());
      negotiated.once("error", reject);
    });
    expect(negotiated.alpnProtocol).toBe("http/1.1");
    connector.adoptHttps(negotiated, origin.host, origin.port);
    // Two at once: the first request takes the adopted socket, the second makes a new one.
    const [a, b] = await Promise.all([get("/bytes/1000"), get("/bytes/2000")]);
    expect(new Set([a, b]).size).toBe(2);
    expect([a, b]).toContain(negotiated);
    expect(shape(a)).toEqual(shape(b));
  });
});
