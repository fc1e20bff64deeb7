import type { ServerResponse } from "node:http";
import type { Socket } from "node:net";

/** A plain-text answer from lathe itself (errors, refusals). Never cached, says what to do. */
export function sendPlain(res: ServerResponse, status: number, message: string, extra: string[] = []): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const { headers, body } = plainAnswer(message, extra);
  res.sendDate = true;
  res.writeHead(status, headers);
  res.end(body);
}

/** The header fields and body of a plain-text answer from lathe. */
export function plainAnswer(message: string, extra: string[] = []): { headers: string[]; body: Buffer } {
  const body = Buffer.from(`${message}\n`, "utf8");
  return {
    headers: ["Content-Type", "text/plain; charset=utf-8", "Content-Length", String(body.length), "Cache-Control", "no-store", "X-Lathe-Error", "1", ...extra],
    body,
  };
}

const REASONS: Record<number, string> = {
  400: "Bad Request",
  403: "Forbidden",
  407: "Proxy Authentication Required",
  408: "Request Timeout",
  431: "Request Header Fields Too Large",
  502: "Bad Gateway",
  503: "Service Unavailable",
  504: "Gateway Timeout",
  505: "HTTP Version Not Supported",
  508: "Loop Detected",
};

/** The same answer written on a raw socket (client errors before a request object exists, CONNECT). */
export function sendPlainOnSocket(socket: Socket, status: number, message: string): void {
  if (socket.destroyed || !socket.writable) return;
  const body = Buffer.from(`${message}\n`, "utf8");
  socket.end(
    `HTTP/1.1 ${status} ${REASONS[status] ?? "Error"}\r\nContent-Type: text/plain; charset=utf-8\r\n` +
      `Content-Length: ${body.length}\r\nConnection: close\r\nX-Lathe-Error: 1\r\n\r\n${body.toString("utf8")}`,
  );
}
