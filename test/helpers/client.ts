/** Minimal clients that speak to lathe as a proxy, over real sockets. */
import http from "node:http";
import net from "node:net";

export interface ClientResponse {
  status: number;
  statusMessage: string;
  rawHeaders: string[];
  body: Buffer;
}

/** An absolute-form request through the proxy with Node's http client. */
export function viaProxy(
  proxyUrl: string,
  url: string,
  opts: { method?: string; headers?: Record<string, string> | string[]; body?: Buffer | string; agent?: http.Agent } = {},
): Promise<ClientResponse> {
  const p = new URL(proxyUrl);
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: p.hostname,
        port: p.port,
        method: opts.method ?? "GET",
        path: url,
        headers: opts.headers ?? { Host: u.host },
        agent: opts.agent ?? false,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => resolve({ status: res.statusCode!, statusMessage: res.statusMessage!, rawHeaders: res.rawHeaders, body: Buffer.concat(chunks) }));
        res.on("error", reject);
      },
    );
    req.on("error", reject);
    req.end(opts.body);
  });
}

/** Send raw bytes to the proxy and collect everything it answers until it closes (or `ms`). */
export function rawExchange(proxyUrl: string, bytes: string | Buffer, ms = 2000): Promise<string> {
  const p = new URL(proxyUrl);
  return new Promise((resolve, reject) => {
    const s = net.connect(Number(p.port), p.hostname);
    const chunks: Buffer[] = [];
    const t = setTimeout(() => s.destroy(), ms);
    s.on("data", (d) => chunks.push(d));
    s.on("close", () => {
      clearTimeout(t);
      resolve(Buffer.concat(chunks).toString("latin1"));
    });
    s.on("error", (e) => {
      clearTimeout(t);
      if (chunks.length) resolve(Buffer.concat(chunks).toString("latin1"));
      else reject(e);
    });
    s.write(bytes);
  });
}
