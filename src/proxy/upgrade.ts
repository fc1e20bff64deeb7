import http, { type IncomingMessage } from "node:http";
import https from "node:https";
import type { Socket } from "node:net";
import { MessageCapture } from "../capture/messageCapture.js";
import { classifyUpstreamError } from "../upstream/errors.js";
import { tapOf } from "../upstream/tap.js";
import type { ProxyContext } from "./context.js";
import { countOutcome } from "./archiveCapture.js";
import { refusal } from "./refusal.js";
import { forwardRequestHeaders } from "./headers.js";
import { sendPlainOnSocket } from "./respond.js";
import { type RequestPolicy, requestPolicy } from "./requestPolicy.js";
import { PROXY_AUTH_REQUIRED, sessionOf } from "./sessionOf.js";
import { type Target, authorityOf, targetUri } from "./target.js";

/**
 * `Upgrade` requests (WebSocket): the handshake is recorded as a request/response pair, then the
 * two sockets are joined and the upgraded stream passes through unrecorded (warc-records.md §2).
 * The upstream socket is created outside the keep-alive pool: it will never be reused.
 */
export function handleUpgrade(ctx: ProxyContext, req: IncomingMessage, client: Socket, head: Buffer, t: Target): void {
  const uri = targetUri(t);
  const hostPort = `${t.host}:${t.port}`;
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
  if (refused) {
    sendPlainOnSocket(client, refused.status, refused.message);
    return;
  }
  const begun = ctx.begin();
  const recording = policy.session;
  if (recording) recording.inflight++;
  let finished = false;
  const done = () => {
    if (finished) return;
    finished = true;
    if (recording) recording.inflight--;
    begun();
  };
  const { capture, warc, upstream } = ctx.config;
  const now = () => ctx.clock.nowMicros();
  const spool = { memoryBytes: capture.spoolMemoryBytes, dir: capture.spoolDir };
  const reqCap = new MessageCapture({ kind: "request", digest: warc.digest, spool, maxBodyBytes: 0, now });
  const resCap = new MessageCapture({ kind: "response", digest: warc.digest, spool, maxBodyBytes: capture.maxBodyBytes, now });
  let sentAt: bigint | null = null;
  const headers = forwardRequestHeaders(req.rawHeaders, { authority: authorityOf(t), method: req.method ?? "GET", upgrade: true });
  const agent = t.scheme === "https" ? ctx.connector.httpsFresh : ctx.connector.httpFresh;
  const opts: http.RequestOptions = {
    host: t.host,
    port: t.port,
    method: req.method,
    path: t.path,
    headers: headers as unknown as http.OutgoingHttpHeaders,
    setHost: false,
    agent,
    maxHeaderSize: upstream.maxHeaderBytes,
  };
  const upReq = t.scheme === "https" ? https.request(opts) : http.request(opts);
  let tapSocket: Socket | null = null;
  upReq.on("socket", (s: Socket) => {
    tapSocket = s;
    const tap = tapOf(s);
    if (tap) {
      tap.current = {
        onWrite: (b) => {
          sentAt ??= now();
          reqCap.feed(b);
        },
        onRead: (b) => resCap.feed(b),
      };
    }
  });
  const record = async () => {
    const tap = tapSocket ? tapOf(tapSocket) : undefined;
    if (tap) tap.current = null;
    const request = await reqCap.finalize(warc.chunked, "clean");
    const response = await resCap.finalize(warc.chunked, "clean");
    if (!request || !response || !tap) {
      await Promise.all([request?.dispose(), response?.dispose()]);
      return;
    }
    const outcome = await ctx.archiver.archive({
      targetUri: uri,
      method: req.method ?? "GET",
      dateMicros: sentAt ?? request.firstByteMicros,
      endedMicros: now(),
      request,
      response,
      tap,
      series: policy.series,
      version: policy.collection.warcVersion,
      collection: policy.collection,
      session: policy.session?.id,
      ...(policy.noArchive ? { skip: 'Warcprox-Meta warc-prefix "-"' } : {}),
    });
    countOutcome(ctx, policy, outcome);
  };
  upReq.on("upgrade", (_res: IncomingMessage, upSocket: Socket, upHead: Buffer) => {
    // The 101 head exactly as the origin sent it.
    const raw = resCap.rawHeadBytes();
    client.write(raw ?? Buffer.from("HTTP/1.1 101 Switching Protocols\r\n\r\n"));
    if (upHead.length) client.write(upHead);
    if (head.length) upSocket.write(head);
    const tap = tapOf(upSocket);
    if (tap) tap.current = null;
    upSocket.pipe(client).pipe(upSocket);
    upSocket.on("error", () => client.destroy());
    client.on("error", () => upSocket.destroy());
    upSocket.on("close", () => client.destroy());
    client.on("close", () => upSocket.destroy());
    record().finally(done);
  });
  upReq.on("response", (res: IncomingMessage) => {
    // Not upgraded: relay the answer and close (close-delimited framing fits any body).
    const lines = [`HTTP/1.1 ${res.statusCode} ${res.statusMessage ?? ""}`];
    for (let i = 0; i < res.rawHeaders.length; i += 2) {
      const n = res.rawHeaders[i]!.toLowerCase();
      if (n === "connection" || n === "transfer-encoding" || n === "keep-alive") continue;
      lines.push(`${res.rawHeaders[i]}: ${res.rawHeaders[i + 1]}`);
    }
    client.write(lines.join("\r\n") + "\r\nConnection: close\r\n\r\n");
    res.pipe(client);
    res.on("end", () => {
      record().finally(done);
    });
    res.on("error", () => client.destroy());
  });
  upReq.on("error", (e) => {
    const f = classifyUpstreamError(e, hostPort, sentAt ? "head" : "connect");
    ctx.log.warn("upstream-failed", { uri, code: f.error.code, error: f.error.message });
    sendPlainOnSocket(client, f.status, `lathe: ${f.error.message}`);
    void reqCap.discard();
    void resCap.discard();
    done();
  });
  req.pipe(upReq);
}
