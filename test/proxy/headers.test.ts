import { describe, expect, it } from "vitest";
import { fieldsObject, forwardRequestHeaders, forwardResponseHeaders, type ForwardOptions } from "../../src/proxy/headers.js";

/*
 * The forwarding functions skip work (no Set for `Connection: keep-alive`, no lower-casing of a
 * name no dropped name is as long as) for speed (#25). These plain versions, lower-casing every
 * name, are the rule they must keep to, field for field.
 */
const HOP_BY_HOP = new Set(["connection", "keep-alive", "proxy-connection", "proxy-authorization", "proxy-authenticate", "te", "trailer", "upgrade"]);

function plainTokens(raw: string[]): Set<string> {
  const tokens = new Set<string>();
  for (let i = 0; i < raw.length; i += 2) {
    const n = raw[i]!.toLowerCase();
    if (n === "connection" || n === "proxy-connection") for (const t of raw[i + 1]!.split(",")) tokens.add(t.trim().toLowerCase());
  }
  return tokens;
}

function plainRequest(raw: string[], o: ForwardOptions): string[] {
  const named = plainTokens(raw);
  const out: string[] = [];
  let hasHost = false;
  let framed = false;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!;
    const value = raw[i + 1]!;
    const lower = name.toLowerCase();
    if (lower === "warcprox-meta") continue;
    if (o.upgrade && (lower === "upgrade" || lower === "connection")) {
      out.push(name, value);
      continue;
    }
    if (HOP_BY_HOP.has(lower) || (named.has(lower) && lower !== "transfer-encoding" && lower !== "content-length")) continue;
    if (lower === "host") {
      if (hasHost) continue;
      hasHost = true;
      out.push(name, value.toLowerCase() === o.authority.toLowerCase() ? value : o.authority);
      continue;
    }
    if (lower === "transfer-encoding" || lower === "content-length") framed = true;
    out.push(name, value);
  }
  if (!hasHost) out.unshift("Host", o.authority);
  if (!framed && !o.unframedBody && !["GET", "HEAD", "DELETE", "OPTIONS", "TRACE", "CONNECT"].includes(o.method.toUpperCase())) out.push("Content-Length", "0");
  return out;
}

function plainResponse(raw: string[]): string[] {
  const named = plainTokens(raw);
  const out: string[] = [];
  for (let i = 0; i < raw.length; i += 2) {
    const lower = raw[i]!.toLowerCase();
    if (HOP_BY_HOP.has(lower) || lower === "transfer-encoding" || named.has(lower) || lower === "warcprox-meta") continue;
    out.push(raw[i]!, raw[i + 1]!);
  }
  return out;
}

const REQUESTS: string[][] = [
  ["Host", "127.0.0.1:40123", "User-Agent", "proxybench", "Accept", "*/*", "Connection", "keep-alive"],
  ["host", "EXAMPLE.com", "Connection", "Keep-Alive, X-Trace", "X-Trace", "1", "x-trace", "2", "Accept", "*/*"],
  ["Host", "a", "Host", "b", "Proxy-Connection", "keep-alive", "Proxy-Authorization", "Basic eA==", "TE", "trailers"],
  ["Connection", " Upgrade ,  HTTP2-Settings ", "Upgrade", "h2c", "HTTP2-Settings", "AAA", "Host", "example.com"],
  ["Connection", "close", "Connection", "Content-Length, Transfer-Encoding, Cookie", "Content-Length", "3", "Transfer-Encoding", "chunked", "Cookie", "a=b"],
  ["Warcprox-Meta", '{"warc-prefix":"x"}', "WARCPROX-META", "{}", "Keep-Alive", "timeout=5", "Trailer", "X", "Referer", "http://x/"],
  ["Connection", "", "Connection", ",,", "A-Very-Long-Field-Name-Beyond-Thirty-Two-Chars", "v", "Accept-Language", "fr"],
  ["Connection", "A-Very-Long-Field-Name-Beyond-Thirty-Two-Chars", "A-Very-Long-Field-Name-Beyond-Thirty-Two-Chars", "v", "X", "y"],
  ["PROXY-CONNECTION", "X-Gone", "x-gone", "1", "User-Agent", "u", "Via", "1.1 p"],
  [],
];

const OPTIONS: ForwardOptions[] = [
  { authority: "127.0.0.1:40123", method: "GET" },
  { authority: "example.com", method: "POST" },
  { authority: "example.com", method: "put", unframedBody: true },
  { authority: "Example.COM", method: "GET", upgrade: true },
];

const RESPONSES: string[][] = [
  ["Content-Type", "application/octet-stream", "Content-Length", "10000", "Date", "Mon, 07 Dec 2026 17:20:01 GMT", "Connection", "keep-alive", "Keep-Alive", "timeout=5"],
  ["Transfer-Encoding", "chunked", "Connection", "close", "Close", "x", "Trailer", "Expires", "Expires", "0"],
  ["Connection", "Keep-Alive", "Connection", "X-Hop , Set-Cookie", "Set-Cookie", "a=1", "set-cookie", "b=2", "X-Hop", "h", "Vary", "*"],
  ["Proxy-Connection", "keep-alive", "Proxy-Authenticate", "Basic", "Upgrade", "h2c", "TE", "x", "Warcprox-Meta", "{}", "Server", "s"],
  ["Connection", "Content-Type", "Content-Type", "text/html", "Content-Length", "4"],
  ["A-Very-Long-Field-Name-Beyond-Thirty-Two-Chars", "v", "Link", "</a>; rel=preload"],
  [],
];

describe("header forwarding", () => {
  it("forwards the same request fields as the plain rule", () => {
    for (const raw of REQUESTS) for (const o of OPTIONS) expect(forwardRequestHeaders(raw, o)).toEqual(plainRequest(raw, o));
  });

  it("forwards the same response fields as the plain rule", () => {
    for (const raw of RESPONSES) expect(forwardResponseHeaders(raw)).toEqual(plainResponse(raw));
  });

  it("drops the fields a Connection token names, whatever their case and spacing", () => {
    expect(forwardResponseHeaders(["Connection", " keep-alive ,X-A", "x-a", "1", "X-B", "2"])).toEqual(["X-B", "2"]);
    expect(forwardRequestHeaders(["Host", "h", "Connection", "X-A", "X-A", "1"], { authority: "h", method: "GET" })).toEqual(["Host", "h"]);
  });

  it("builds a fields object with and without names to skip", () => {
    expect(fieldsObject(["Link", "a", "link", "b", "X", "y"])).toEqual({ link: ["a", "b"], x: "y" });
    expect(fieldsObject(["Link", "a", "Connection", "c"], new Set(["connection"]))).toEqual({ link: "a" });
  });
});
