/**
 * Errors of the REST control API: every failure answers `{"error": {"code", "message"}}` (plus
 * `field` when one input field is to blame) with the HTTP status that says what kind of failure
 * it is. `toApiError` maps what the facade throws onto that.
 */
import { InputError } from "../archive/collections.js";
import { isProxyError } from "../core/errors.js";
import { WaczError } from "../wacz/waczError.js";

export type ApiErrorCode =
  | "ERR_BAD_REQUEST"
  | "ERR_UNAUTHORIZED"
  | "ERR_FORBIDDEN"
  | "ERR_DENIED"
  | "ERR_NOT_FOUND"
  | "ERR_METHOD_NOT_ALLOWED"
  | "ERR_CONFLICT"
  | "ERR_PAYLOAD_TOO_LARGE"
  | "ERR_UNSUPPORTED_MEDIA_TYPE"
  | "ERR_UNPROCESSABLE"
  | "ERR_WARC_WRITE"
  | "ERR_SPOOL"
  | "ERR_SHARED_UNAVAILABLE"
  | "ERR_INTERNAL";

/** Every code with the status it is answered with (the OpenAPI document lists them). */
export const API_ERROR_STATUS: Readonly<Record<ApiErrorCode, number>> = {
  ERR_BAD_REQUEST: 400,
  ERR_UNAUTHORIZED: 401,
  ERR_FORBIDDEN: 403,
  ERR_DENIED: 403,
  ERR_NOT_FOUND: 404,
  ERR_METHOD_NOT_ALLOWED: 405,
  ERR_CONFLICT: 409,
  ERR_PAYLOAD_TOO_LARGE: 413,
  ERR_UNSUPPORTED_MEDIA_TYPE: 415,
  ERR_UNPROCESSABLE: 422,
  ERR_WARC_WRITE: 503,
  ERR_SPOOL: 503,
  ERR_SHARED_UNAVAILABLE: 503,
  ERR_INTERNAL: 500,
};

export interface ErrorBody {
  error: { code: ApiErrorCode; message: string; field?: string };
}

export class ApiError extends Error {
  readonly status: number;
  readonly code: ApiErrorCode;
  readonly field: string | undefined;
  readonly headers: Readonly<Record<string, string>>;
  constructor(code: ApiErrorCode, message: string, opts: { field?: string; headers?: Record<string, string>; cause?: unknown } = {}) {
    super(message);
    this.name = "ApiError";
    this.code = code;
    this.status = API_ERROR_STATUS[code];
    this.field = opts.field;
    this.headers = opts.headers ?? {};
    if (opts.cause !== undefined) this.cause = opts.cause;
  }

  body(): ErrorBody {
    return { error: { code: this.code, message: this.message, ...(this.field !== undefined ? { field: this.field } : {}) } };
  }
}

/** 400 naming the field: the message starts with the field's name. */
export function badRequest(field: string, message: string): ApiError {
  return new ApiError("ERR_BAD_REQUEST", `${field}: ${message}`, { field });
}

/**
 * What a thrown value means for the client. `internal` is true when the failure is lathe's own
 * (500): the caller logs it with its stack.
 */
export function toApiError(e: unknown): { error: ApiError; internal: boolean } {
  if (e instanceof ApiError) return { error: e, internal: false };
  if (e instanceof InputError) return { error: new ApiError("ERR_BAD_REQUEST", e.message, { field: e.field, cause: e }), internal: false };
  if (e instanceof WaczError) return waczApiError(e);
  if (isProxyError(e)) {
    switch (e.code) {
      case "ERR_DENIED":
        if (/^no (collection|session)\b/.test(e.message)) return { error: new ApiError("ERR_NOT_FOUND", e.message, { cause: e }), internal: false };
        return { error: new ApiError("ERR_DENIED", e.message, { cause: e }), internal: false };
      case "ERR_WARC_WRITE":
        return { error: new ApiError("ERR_WARC_WRITE", e.message, { headers: { "retry-after": "30" }, cause: e }), internal: false };
      case "ERR_SPOOL":
        return { error: new ApiError("ERR_SPOOL", e.message, { headers: { "retry-after": "30" }, cause: e }), internal: false };
      case "ERR_SHARED_UNAVAILABLE":
        // The store is probed every second; its answers come back as soon as it does.
        return { error: new ApiError("ERR_SHARED_UNAVAILABLE", e.message, { headers: { "retry-after": "5" }, cause: e }), internal: false };
      default:
        // A ProxyError's message is written for people: pass it on, keep the code in the text.
        return { error: new ApiError("ERR_INTERNAL", `${e.code}: ${e.message}`, { cause: e }), internal: true };
    }
  }
  return { error: new ApiError("ERR_INTERNAL", "internal error; the server log has the details", { cause: e }), internal: true };
}

/** A WACZ that cannot be made: what kind of failure it is for the client. */
function waczApiError(e: WaczError): { error: ApiError; internal: boolean } {
  switch (e.problem) {
    case "not-found":
      return { error: new ApiError("ERR_NOT_FOUND", e.message, { cause: e }), internal: false };
    case "conflict":
      return { error: new ApiError("ERR_CONFLICT", e.message, { cause: e }), internal: false };
    case "damaged":
      return { error: new ApiError("ERR_UNPROCESSABLE", e.message, { cause: e }), internal: false };
    default:
      return { error: new ApiError("ERR_INTERNAL", e.message, { cause: e }), internal: true };
  }
}
