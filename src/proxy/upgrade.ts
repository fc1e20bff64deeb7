/**
 * `Upgrade` requests (WebSocket): the handshake is recorded as a request/response pair, then the
 * two sockets are joined and the upgraded stream passes through unrecorded (warc-records.md §2).
 * The upstream socket is created outside the keep-alive pool: it will never be reused.
 */
import http, { type IncomingMessage } from "node:http";
import https from "node:https";
import type { Socket } from "node:net";
import { classifyUpstreamError } from "../upstream/errors.js";
import { tapOf } from "../upstream/tap.js";
import type { ProxyContext } from "./context.js";
import { countOutcome } from "./archiveCapture.js";
import { type Captures, discardCaptures, startCaptures } from "./captures.js";
import { countInflight } from "./inflight.js";
import { requestOptions } from "./http1Upstream.js";
import { refusal } from "./refusal.js";
import { forwardRequestHeaders } from "./headers.js";
import { sendPlainOnSocket } from "./respond.js";
import { type RequestPolicy, requestPolicy } from "./requestPolicy.js";
import { PROXY_AUTH_REQUIRED, sessionOf } from "./sessionOf.js";
import { type Target, authorityOf, targetUri } from "./target.js";

export function handleUpgrade(ctx: ProxyContext, req: IncomingMessage, client: Socket, head: Buffer, t: Target): void {
  client.on("error", () => client.destroy());
  const session = sessionOf(ctx, req.socket, req.rawHeaders);
  if (session === "invalid") return sendPlainOnSocket(client, 407, PROXY_AUTH_REQUIRED);
  let policy: RequestPolicy;
  try {
    policy = requestPolicy(ctx.config, ctx.collections, req.rawHeaders, session);
  } catch (e) {
    return sendPlainOnSocket(client, 400, `lathe: ${(e as Error).message}`);
  }
  const refused = refusal(ctx, t.host, policy.session, t.port);
  if (refused) return sendPlainOnSocket(client, refused.status, refused.message);
  relayUpgrade(ctx, req, client, head, t, policy);
}

function relayUpgrade(ctx: ProxyContext, req: IncomingMessage, client: Socket, head: Buffer, t: Target, policy: RequestPolicy): void {
  const uri = targetUri(t);
  const method = req.method ?? "GET";
  const done = countInflight(ctx, policy.session);
  // Finalized without lenient renames below, so captured without them too.
  const caps = startCaptures(ctx, { noBody: false, lenient: false });
  const upReq = upgradeRequest(ctx, t, method, forwardRequestHeaders(req.rawHeaders, { authority: authorityOf(t), method, upgrade: true }));
  upReq.on("socket", (s: Socket) => feedCaptures(ctx, s, caps));
  const record = () => recordHandshake(ctx, uri, method, caps, policy).finally(done);
  upReq.on("upgrade", (_res: IncomingMessage, upSocket: Socket, upHead: Buffer) => {
    // The 101 head exactly as the origin sent it.
    const raw = caps.response.rawHeadBytes();
    client.write(raw ?? Buffer.from("HTTP/1.1 101 Switching Protocols\r\n\r\n"));
    if (upHead.length) client.write(upHead);
    if (head.length) upSocket.write(head);
    const tap = tapOf(upSocket);
    if (tap) tap.current = null;
    joinSockets(client, upSocket);
    void record();
  });
  upReq.on("response", (res: IncomingMessage) => {
    relayRefusedUpgrade(client, res);
    res.on("end", () => void record());
  });
  upReq.on("error", (e) => {
    const f = classifyUpstreamError(e, `${t.host}:${t.port}`, caps.sentAt ? "head" : "connect");
    ctx.log.warn("upstream-failed", { uri, code: f.error.code, error: f.error.message });
    sendPlainOnSocket(client, f.status, `lathe: ${f.error.message}`);
    discardCaptures(caps);
    done();
  });
  req.pipe(upReq);
}

function upgradeRequest(ctx: ProxyContext, t: Target, method: string, headers: string[]): http.ClientRequest {
  const agent = t.scheme === "https" ? ctx.connector.httpsFresh : ctx.connector.httpFresh;
  const opts = requestOptions(t, method, headers, { agent, maxHeaderSize: ctx.config.upstream.maxHeaderBytes });
  return t.scheme === "https" ? https.request(opts) : http.request(opts);
}

function feedCaptures(ctx: ProxyContext, socket: Socket, caps: Captures): void {
  const tap = tapOf(socket);
  if (!tap) return;
  caps.tap = tap;
  tap.current = {
    onWrite: (b) => {
      caps.sentAt ??= ctx.clock.nowMicros();
      caps.request.feed(b);
    },
    onRead: (b) => caps.response.feed(b),
  };
}

/** The handshake as a request/response pair (the upgraded stream itself is not recorded). */
async function recordHandshake(ctx: ProxyContext, uri: string, method: string, caps: Captures, policy: RequestPolicy): Promise<void> {
  const tap = caps.tap;
  if (tap) tap.current = null;
  const { chunked } = ctx.config.warc;
  const request = await caps.request.finalize(chunked, "clean");
  const response = await caps.response.finalize(chunked, "clean");
  if (!request || !response || !tap) {
    await Promise.all([request?.dispose(), response?.dispose()]);
    return;
  }
  const outcome = await ctx.archiver.archive({
    targetUri: uri,
    method,
    dateMicros: caps.sentAt ?? request.firstByteMicros,
    endedMicros: ctx.clock.nowMicros(),
    request,
    response,
    tap,
    series: policy.series,
    version: policy.collection.warcVersion,
    collection: policy.collection,
    session: policy.session?.id,
    clientProtocol: "http/1.1",
    ...(policy.noArchive ? { skip: 'Warcprox-Meta warc-prefix "-"' } : {}),
  });
  countOutcome(ctx, policy, outcome);
}

function joinSockets(client: Socket, upSocket: Socket): void {
  upSocket.pipe(client).pipe(upSocket);
  upSocket.on("error", () => client.destroy());
  client.on("error", () => upSocket.destroy());
  upSocket.on("close", () => client.destroy());
  client.on("close", () => upSocket.destroy());
}

/** Not upgraded: relay the answer and close (close-delimited framing fits any body). */
function relayRefusedUpgrade(client: Socket, res: IncomingMessage): void {
  const lines = [`HTTP/1.1 ${res.statusCode} ${res.statusMessage ?? ""}`];
  for (let i = 0; i < res.rawHeaders.length; i += 2) {
    const n = res.rawHeaders[i]!.toLowerCase();
    if (n === "connection" || n === "transfer-encoding" || n === "keep-alive") continue;
    lines.push(`${res.rawHeaders[i]}: ${res.rawHeaders[i + 1]}`);
  }
  client.write(lines.join("\r\n") + "\r\nConnection: close\r\n\r\n");
  res.pipe(client);
  res.on("error", () => client.destroy());
}
