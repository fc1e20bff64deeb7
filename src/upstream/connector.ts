import http from "node:http";
import https from "node:https";
import net from "node:net";
import tls from "node:tls";
import { readFileSync } from "node:fs";
import { ProxyError } from "../core/errors.js";
import type { TlsInfo } from "../warc/records.js";
import { installTap } from "./tap.js";
import { type DestinationGuard, NO_GUARD } from "./destinations.js";
import { H2Pool } from "./h2Pool.js";

export interface ConnectorOptions {
  connectTimeoutMs: number;
  maxSocketsPerHost: number;
  rejectInvalidCerts: boolean;
  /** Extra CA PEM file trusted upstream, in addition to Node's roots. */
  caFile: string | null;
  /** Loop and deny-list checks on the address connected to (README "Security"). */
  guard?: DestinationGuard;
  /** Offer h2 to origins (upstream.http2). */
  http2?: boolean;
}

/**
 * The upstream side: pooled keep-alive agents whose sockets lathe creates itself, so every one
 * carries a byte tap and (for TLS) the facts of its handshake.
 */
export interface Connector {
  http: http.Agent;
  https: https.Agent;
  /** Agents whose sockets are never pooled (upgraded connections are never reused). */
  httpFresh: http.Agent;
  httpsFresh: https.Agent;
  /** The loop and deny-list checks every connection passes (README "Security"). */
  guard: DestinationGuard;
  /**
   * A TLS connection offering ALPN `alpn` (h2 and http/1.1 toward origins that may speak h2),
   * tapped, guarded and timed like the agents' own.
   */
  connectTls(host: string, port: number, alpn: string[]): tls.TLSSocket;
  /** Give a connected TLS socket that chose http/1.1 to the keep-alive agent, for its next request to host:port. */
  adoptHttps(socket: tls.TLSSocket, host: string, port: number): void;
  /** The h2 sessions to origins, when upstream.http2 is on. */
  h2: H2Pool | null;
  destroy(): void;
}

export function createConnector(o: ConnectorOptions): Connector {
  let extraCa: string | null = null;
  if (o.caFile) {
    try {
      extraCa = readFileSync(o.caFile, "utf8");
    } catch (e) {
      throw new ProxyError("ERR_CONFIG", `upstream.caFile: cannot read ${o.caFile}: ${(e as Error).message}`, e);
    }
    if (!extraCa.includes("-----BEGIN CERTIFICATE-----")) {
      throw new ProxyError("ERR_CONFIG", `upstream.caFile: ${o.caFile} holds no PEM certificate`);
    }
  }
  // One context for every upstream connection: building a CA store per connection would parse
  // Node's ~140 root certificates on every handshake.
  const secureContext = tls.createSecureContext(extraCa ? { ca: [...tls.rootCertificates, extraCa] } : {});
  const agentOpts = { keepAlive: true, maxSockets: o.maxSocketsPerHost, maxFreeSockets: 256, scheduling: "lifo" as const };

  const guard = o.guard ?? NO_GUARD;
  /** A socket that fails at once, without connecting, when the destination is refused. */
  const refusedSocket = (host: string, port: number): net.Socket | null => {
    const refused = net.isIP(host) ? guard.check(host, port) : null;
    if (!refused) return null;
    const s = new net.Socket();
    process.nextTick(() => s.destroy(refused));
    return s;
  };

  const plainConnection = (opts: net.NetConnectOpts): net.Socket => {
    const o2 = opts as net.TcpNetConnectOpts;
    const early = refusedSocket(String(o2.host ?? ""), Number(o2.port));
    if (early) return early;
    // Object.assign, not a spread with more properties: those cost ~1 µs each in Node 20's V8.
    const socket = net.connect(Object.assign({}, o2, { noDelay: true, lookup: guard.lookupFor(Number(o2.port)) }));
    const tap = installTap(socket);
    socket.once("connect", () => {
      tap.ip = socket.remoteAddress;
    });
    armConnectTimeout(socket, "connect", o.connectTimeoutMs, opts as { host?: string; port?: number });
    return socket;
  };

  /** Sockets that negotiated http/1.1 on a first contact, waiting for the agent's next connection there. */
  const spares = new Map<string, tls.TLSSocket[]>();
  const takeSpare = (host: string, port: number): tls.TLSSocket | null => {
    const list = spares.get(`${host}:${port}`);
    let s: tls.TLSSocket | undefined;
    while ((s = list?.shift())) if (!s.destroyed) return s;
    spares.delete(`${host}:${port}`);
    return null;
  };

  const tlsConnection = (opts: tls.ConnectionOptions, alpn = ["http/1.1"]): tls.TLSSocket => {
    const host = String(opts.host ?? "");
    const spare = alpn.length === 1 ? takeSpare(host, Number(opts.port)) : null;
    if (spare) return spare;
    const early = refusedSocket(host, Number(opts.port));
    if (early) return early as tls.TLSSocket;
    const identity = identityCheckKeepingCert(opts.checkServerIdentity);
    // Object.assign, not `{ ...opts, … }`: 12 µs against 0.5 per connection in Node 20's V8.
    const socket = tls.connect(Object.assign({}, opts, {
      checkServerIdentity: identity.check,
      lookup: guard.lookupFor(Number(opts.port)),
      // SNI is a DNS name; IP literals get none (RFC 6066 §3).
      servername: net.isIP(host) ? "" : host,
      ALPNProtocols: alpn,
      // Crawler semantics: record invalid certificates and write the verdict down, unless told to refuse.
      rejectUnauthorized: o.rejectInvalidCerts,
      secureContext,
    }));
    // Small heads must not wait for Nagle's algorithm (40 ms stalls with delayed ACKs).
    socket.setNoDelay(true);
    const tap = installTap(socket);
    socket.once("connect", () => {
      tap.ip = socket.remoteAddress;
    });
    socket.once("secureConnect", () => {
      tap.ip = socket.remoteAddress;
      tap.tls = tlsInfoOf(socket, net.isIP(host) ? undefined : host, identity.cert);
    });
    armConnectTimeout(socket, "secureConnect", o.connectTimeoutMs, opts);
    return socket;
  };

  const makeHttp = (keepAlive: boolean) => {
    const a = new http.Agent(Object.assign({}, agentOpts, { keepAlive }));
    a.createConnection = plainConnection as typeof a.createConnection;
    return a;
  };
  const makeHttps = (keepAlive: boolean) => {
    const a = new https.Agent(Object.assign({}, agentOpts, { keepAlive, maxCachedSessions: 100 }));
    a.createConnection = ((opts: tls.ConnectionOptions) => tlsConnection(opts)) as typeof a.createConnection;
    return a;
  };
  const agents = { http: makeHttp(true), https: makeHttps(true), httpFresh: makeHttp(false), httpsFresh: makeHttps(false) };
  const connector: Connector = {
    http: agents.http, https: agents.https, httpFresh: agents.httpFresh, httpsFresh: agents.httpsFresh,
    guard,
    h2: null,
    connectTls: (host, port, alpn) => tlsConnection({ host, port }, alpn),
    adoptHttps(socket, host, port) {
      const key = `${host}:${port}`;
      spares.set(key, [...(spares.get(key) ?? []), socket]);
      // Unused for a while (the request that wanted it went elsewhere): not kept open for nothing.
      setTimeout(() => {
        if (spares.get(key)?.includes(socket)) {
          spares.set(key, spares.get(key)!.filter((s) => s !== socket));
          socket.destroy();
        }
      }, 5000).unref();
    },
    destroy() {
      for (const a of Object.values(agents)) a.destroy();
      for (const list of spares.values()) for (const s of list) s.destroy();
      spares.clear();
      connector.h2?.close();
    },
  };
  if (o.http2) connector.h2 = new H2Pool(connector);
  return connector;
}

/**
 * Node's host-name check, keeping the peer chain Node builds for it for the TLS record: building
 * it again (getPeerCertificate(true)) cost ~0.4–0.6 ms of CPU per new upstream connection (#25).
 */
function identityCheckKeepingCert(check = tls.checkServerIdentity) {
  const kept: { cert: tls.PeerCertificate | undefined; check: typeof tls.checkServerIdentity } = {
    cert: undefined,
    check: (name, cert) => {
      kept.cert = cert;
      return check(name, cert);
    },
  };
  return kept;
}

function armConnectTimeout(socket: net.Socket, readyEvent: string, ms: number, opts: { host?: string | null; port?: number | string | null }) {
  const t = setTimeout(() => {
    socket.destroy(new ProxyError("ERR_UPSTREAM_TIMEOUT", `connecting to ${opts.host}:${opts.port} timed out after ${ms} ms`));
  }, ms);
  t.unref();
  socket.once(readyEvent, () => clearTimeout(t));
  socket.once("close", () => clearTimeout(t));
}

const PROTOCOL_TOKENS: Record<string, string> = {
  "TLSv1.3": "tls/1.3",
  "TLSv1.2": "tls/1.2",
  "TLSv1.1": "tls/1.1",
  TLSv1: "tls/1.0",
  SSLv3: "ssl/3",
};

/**
 * What the TLS record says of an upstream connection. `checked`: the peer certificate with its
 * chain, as Node handed it to the host-name check (not called for a resumed session or a failed
 * verification: then it is asked for here).
 */
export function tlsInfoOf(socket: tls.TLSSocket, serverName: string | undefined, checked?: tls.PeerCertificate): TlsInfo {
  const proto = socket.getProtocol();
  const cipher = socket.getCipher() as (tls.CipherNameAndProtocol & { standardName?: string }) | undefined;
  const chain: Uint8Array[] = [];
  const seen = new Set<string>();
  let cert = (checked ?? socket.getPeerCertificate(true)) as tls.DetailedPeerCertificate | Record<string, never>;
  while (cert && "raw" in cert && cert.raw) {
    const key = cert.fingerprint256;
    if (seen.has(key)) break;
    seen.add(key);
    chain.push(cert.raw);
    const issuer = cert.issuerCertificate;
    if (!issuer || issuer === cert || issuer.fingerprint256 === key) break;
    cert = issuer;
  }
  const err = socket.authorizationError as unknown as string | Error | null | undefined;
  return {
    protocol: proto ? (PROTOCOL_TOKENS[proto] ?? proto.toLowerCase()) : undefined,
    cipherSuite: cipher?.standardName ?? cipher?.name,
    serverName,
    alpn: socket.alpnProtocol || undefined,
    sessionReused: socket.isSessionReused(),
    verifyResult: socket.authorized ? "ok" : typeof err === "string" ? err : (err?.message ?? "UNKNOWN"),
    chain,
  };
}
