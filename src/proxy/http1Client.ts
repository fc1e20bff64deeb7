/** The HTTP/1.1 client leg: node:http's request and response objects behind ClientLeg. */
import type { IncomingMessage, OutgoingHttpHeaders, ServerResponse } from "node:http";
import type { ClientLeg, ResponseHead } from "./clientLeg.js";
import { fieldsObject } from "./headers.js";
import type { Target } from "./target.js";

export function http1ClientLeg(req: IncomingMessage, res: ServerResponse, target: Target): ClientLeg {
  return {
    head: { method: req.method ?? "GET", target, rawHeaders: req.rawHeaders },
    protocol: "http/1.1",
    body: req,
    socket: req.socket,
    hasBody: req.headers["transfer-encoding"] !== undefined || (req.headers["content-length"] ?? "0") !== "0",
    get headSent() {
      return res.headersSent;
    },
    get gone() {
      return res.destroyed || res.writableEnded;
    },
    sendHead: (head) => sendOriginHead(res, head),
    sendInterim: (status, headers) => {
      // Node's HTTP/1.1 server can send one kind of 1xx of its own making: 103, which needs a Link.
      if (status !== 103 || res.headersSent) return;
      const hints = fieldsObject(headers);
      if (hints.link) res.writeEarlyHints(hints as { link: string | string[] });
    },
    write: (chunk) => res.write(chunk),
    onDrain: (cb) => res.on("drain", cb),
    get needsDrain() {
      return res.writableNeedDrain;
    },
    end: (last) => (last ? res.end(last) : res.end()),
    destroy: () => res.destroy(),
    onClose: (cb) => res.on("close", () => cb(res.writableFinished)),
    answer: (head, body, o = {}) => {
      res.sendDate = true;
      if (o.close) res.shouldKeepAlive = false;
      res.writeHead(head.status, head.reason, head.headers as unknown as OutgoingHttpHeaders);
      res.end(body);
    },
    discardBody: () => req.resume(),
  };
}

/** The origin's head as it came: no Date of lathe's own (decisions.md §1). */
function sendOriginHead(res: ServerResponse, head: ResponseHead): void {
  res.sendDate = false;
  const headers = head.headers as unknown as OutgoingHttpHeaders;
  try {
    res.writeHead(head.status, head.reason, headers);
  } catch {
    // A head Node's parser let through but will not send again (e.g. a control character in the
    // reason phrase, found by test/proxy/fuzz.test.ts): the client gets the reason without the
    // characters Node refuses; the record keeps the bytes as received. If it still cannot be
    // sent, this throws and the exchange ends as refused (decisions.md §1).
    res.writeHead(head.status, (head.reason ?? "").replace(/[^\t\x20-\x7e\x80-\xff]/g, ""), headers);
  }
}
