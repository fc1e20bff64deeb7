import { ProxyError, errorMessage, isProxyError, systemCode } from "../core/errors.js";
import { DestinationRefused } from "./destinations.js";

const CERT_CODES = new Set([
  "CERT_HAS_EXPIRED", "CERT_NOT_YET_VALID", "DEPTH_ZERO_SELF_SIGNED_CERT", "SELF_SIGNED_CERT_IN_CHAIN",
  "UNABLE_TO_GET_ISSUER_CERT_LOCALLY", "UNABLE_TO_VERIFY_LEAF_SIGNATURE", "UNABLE_TO_GET_ISSUER_CERT",
  "CERT_REVOKED", "CERT_UNTRUSTED", "CERT_SIGNATURE_FAILURE", "ERR_TLS_CERT_ALTNAME_INVALID", "HOSTNAME_MISMATCH",
  "INVALID_CA", "PATH_LENGTH_EXCEEDED", "INVALID_PURPOSE", "CERT_REJECTED",
]);

/** An upstream failure as the client should hear it: status and a plain reason naming the host. */
export interface UpstreamFailure {
  status: 403 | 502 | 504 | 508;
  error: ProxyError;
  /** Heritrix crawl-log fetch status for the failure (decisions.md §2). */
  fetchStatus: number;
}

export function classifyUpstreamError(e: unknown, hostPort: string, phase: "connect" | "head"): UpstreamFailure {
  if (e instanceof DestinationRefused) {
    // Refused by lathe itself (loop, upstream.denyAddresses): Heritrix's "blocked by a processor".
    return { status: e.status, error: e, fetchStatus: -5000 };
  }
  if (isProxyError(e)) {
    return { status: e.code === "ERR_UPSTREAM_TIMEOUT" ? 504 : 502, error: e, fetchStatus: e.code === "ERR_UPSTREAM_TIMEOUT" ? -4 : -2 };
  }
  const code = systemCode(e) ?? "";
  const msg = errorMessage(e);
  if (code === "ENOTFOUND" || code === "EAI_AGAIN" || code === "EAI_FAIL" || code === "EAI_NODATA") {
    return { status: 502, fetchStatus: -6, error: new ProxyError("ERR_UPSTREAM_DNS", `could not resolve ${hostPort.replace(/:\d+$/, "")} (${code}): check the host name`, e) };
  }
  if (code === "ECONNREFUSED") {
    return { status: 502, fetchStatus: -2, error: new ProxyError("ERR_UPSTREAM_CONNECT", `connection to ${hostPort} refused (ECONNREFUSED)`, e) };
  }
  if (code === "EHOSTUNREACH" || code === "ENETUNREACH" || code === "EADDRNOTAVAIL") {
    return { status: 502, fetchStatus: -2, error: new ProxyError("ERR_UPSTREAM_CONNECT", `cannot reach ${hostPort} (${code})`, e) };
  }
  if (code === "ETIMEDOUT") {
    return { status: 504, fetchStatus: -2, error: new ProxyError("ERR_UPSTREAM_TIMEOUT", `connection to ${hostPort} timed out (ETIMEDOUT)`, e) };
  }
  if (CERT_CODES.has(code)) {
    return { status: 502, fetchStatus: -2, error: new ProxyError("ERR_TLS_CERT_INVALID", `the certificate of ${hostPort} is invalid: ${code} (upstream.rejectInvalidCerts is on)`, e) };
  }
  if (code.startsWith("ERR_SSL") || code === "EPROTO" || code.startsWith("ERR_TLS") || /SSL|TLS/.test(msg)) {
    return { status: 502, fetchStatus: -2, error: new ProxyError("ERR_TLS_HANDSHAKE", `TLS handshake with ${hostPort} failed: ${code || msg}`, e) };
  }
  if (code === "HPE_HEADER_OVERFLOW") {
    return { status: 502, fetchStatus: -3, error: new ProxyError("ERR_UPSTREAM_PARSE", `the response header section of ${hostPort} exceeds upstream.maxHeaderBytes`, e) };
  }
  if (code.startsWith("HPE_")) {
    return { status: 502, fetchStatus: -3, error: new ProxyError("ERR_UPSTREAM_PARSE", `invalid HTTP response from ${hostPort}: ${code} ${msg}`, e) };
  }
  if (code.startsWith("ERR_HTTP2_STREAM") || code === "ERR_HTTP2_GOAWAY_SESSION" || code === "ERR_HTTP2_SESSION_ERROR") {
    // An h2 stream reset (RST_STREAM) or its session gone (GOAWAY) before the response head.
    return { status: 502, fetchStatus: -3, error: new ProxyError("ERR_UPSTREAM_CLOSED", `upstream ${hostPort} reset the stream before responding (${msg})`, e) };
  }
  if (code === "ECONNRESET" || code === "EPIPE" || msg === "socket hang up") {
    return { status: 502, fetchStatus: -3, error: new ProxyError("ERR_UPSTREAM_CLOSED", `upstream ${hostPort} closed before responding`, e) };
  }
  return { status: 502, fetchStatus: phase === "connect" ? -2 : -3, error: new ProxyError("ERR_UPSTREAM_CONNECT", `upstream ${hostPort} failed: ${code ? code + " " : ""}${msg}`, e) };
}
