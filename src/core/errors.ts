/**
 * One error type for the whole proxy. `code` is stable (tests, logs and API answers rely on it);
 * `message` says what went wrong and, where it can, what to do about it.
 */
export type ErrorCode =
  | "ERR_CONFIG"
  | "ERR_CA"
  | "ERR_UPSTREAM_DNS"
  | "ERR_UPSTREAM_CONNECT"
  | "ERR_UPSTREAM_TIMEOUT"
  | "ERR_UPSTREAM_CLOSED"
  | "ERR_UPSTREAM_PARSE"
  | "ERR_TLS_HANDSHAKE"
  | "ERR_TLS_CERT_INVALID"
  | "ERR_HTTP_PARSE"
  | "ERR_HEADERS_TOO_LARGE"
  | "ERR_WARC_WRITE"
  | "ERR_WARC_RECOVERY"
  | "ERR_SPOOL"
  | "ERR_DENIED"
  | "ERR_SHARED_UNAVAILABLE"
  | "ERR_INTERNAL";

export class ProxyError extends Error {
  readonly code: ErrorCode;
  override readonly cause?: unknown;
  constructor(code: ErrorCode, message: string, cause?: unknown) {
    super(message);
    this.name = "ProxyError";
    this.code = code;
    if (cause !== undefined) this.cause = cause;
  }
}

export function isProxyError(e: unknown): e is ProxyError {
  return e instanceof ProxyError;
}

/** The `code` of a Node system error (ECONNREFUSED, ENOTFOUND, ...), if it has one. */
export function systemCode(e: unknown): string | undefined {
  if (e && typeof e === "object" && "code" in e && typeof (e as { code: unknown }).code === "string") {
    return (e as { code: string }).code;
  }
  return undefined;
}

export function errorMessage(e: unknown): string {
  if (e instanceof Error) return e.message;
  return String(e);
}
