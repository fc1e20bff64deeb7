/**
 * Who may use the control API. With a token configured every route except the public ones
 * (`GET /ca.pem`, `GET /openapi.json`) requires `Authorization: Bearer <token>` (compared in
 * constant time). Cross-site browser requests are refused always, and without a token a Host
 * that is not an IP address or `localhost` is refused (DNS rebinding), so a web page cannot drive
 * an unprotected API.
 */
import { createHash, timingSafeEqual } from "node:crypto";
import type { IncomingMessage } from "node:http";
import { isIP } from "node:net";
import { ApiError } from "./apiErrors.js";

/** Loopback and IP-literal Host values are safe from DNS rebinding; names other than localhost are not. */
function rebindingSafeHost(host: string | undefined): boolean {
  if (host === undefined) return true;
  let name = host.trim().toLowerCase();
  if (name.startsWith("[")) return name.includes("]") && isIP(name.slice(1, name.indexOf("]"))) === 6;
  name = name.replace(/:\d*$/, "");
  return name === "localhost" || name.endsWith(".localhost") || isIP(name) === 4;
}

function crossSite(req: IncomingMessage): string | null {
  const site = req.headers["sec-fetch-site"];
  if (site === "cross-site" || site === "same-site") return `a ${site} browser request`;
  const origin = req.headers.origin;
  if (origin !== undefined) {
    let host: string;
    try {
      host = new URL(origin).host;
    } catch {
      return `a browser request from origin ${JSON.stringify(origin)}`;
    }
    if (host !== (req.headers.host ?? "").toLowerCase()) return `a browser request from origin ${origin}`;
  }
  return null;
}

export class ControlAccess {
  readonly #tokenDigest: Buffer | null;

  /** `token`: null = none required (the caller allows that on loopback only). */
  constructor(token: string | null) {
    this.#tokenDigest = token !== null ? createHash("sha256").update(token, "utf8").digest() : null;
  }

  get tokenConfigured(): boolean {
    return this.#tokenDigest !== null;
  }

  /** Throws 403 for a cross-site browser request, and, without a token, for a Host open to DNS rebinding. */
  refuseForeign(req: IncomingMessage): void {
    const refused = crossSite(req);
    if (refused) throw new ApiError("ERR_FORBIDDEN", `${refused} is refused: the control API does not serve web pages of other origins`);
    if (!this.#tokenDigest && !rebindingSafeHost(req.headers.host)) {
      throw new ApiError("ERR_FORBIDDEN", `Host ${JSON.stringify(req.headers.host)} is refused without a control token (DNS rebinding); use an IP address or localhost, or configure control.token`);
    }
  }

  /** Throws 401 unless the request carries the token (or none is configured). */
  requireToken(req: IncomingMessage): void {
    const a = this.#authorized(req);
    if (a !== "ok") {
      throw new ApiError("ERR_UNAUTHORIZED", a === "missing" ? "this route requires Authorization: Bearer <control token>" : "wrong bearer token", {
        headers: { "www-authenticate": a === "missing" ? 'Bearer realm="lathe"' : 'Bearer realm="lathe", error="invalid_token"' },
      });
    }
  }

  #authorized(req: IncomingMessage): "ok" | "missing" | "invalid" {
    if (!this.#tokenDigest) return "ok";
    const m = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(req.headers.authorization ?? "");
    if (!m) return "missing";
    // Header bytes arrive as latin1 code units: hash the bytes, so a UTF-8 token matches.
    const given = createHash("sha256").update(Buffer.from(m[1]!, "latin1")).digest();
    return timingSafeEqual(given, this.#tokenDigest) ? "ok" : "invalid";
  }
}
