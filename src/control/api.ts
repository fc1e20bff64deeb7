/**
 * The REST control API (decisions.md §5) on node:http: collections, sessions, associated
 * resources, status, Prometheus metrics, the CA certificate and the OpenAPI document. It only
 * translates HTTP to the ControlFacade and back; the route table in openapi.ts drives both the
 * router and the document, so the two cannot disagree.
 *
 * Access (access.ts): with a token configured every route except `GET /ca.pem` and
 * `GET /openapi.json` requires `Authorization: Bearer <token>` (compared in constant time).
 * Cross-site browser requests are refused always, and without a token a Host that is not an IP
 * address or `localhost` is refused (DNS rebinding), so a web page cannot drive an unprotected API.
 */
import type { IncomingMessage, Server, ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { Logger } from "../core/log.js";
import { ControlAccess } from "./access.js";
import { ApiError } from "./apiErrors.js";
import type { ControlFacade } from "./facade.js";
import { HANDLERS } from "./handlers.js";
import { closeGracefully, createHttpServer, listenOn } from "./httpShell.js";
import { buildOpenApi } from "./openapi.js";
import { send, sendStream } from "./reply.js";
import { readJson } from "./requestBody.js";
import type { ExtraRoute } from "./routeTypes.js";
import { type RouteHit, checkQuery, compileRoutes, decodeParams, findRoute, requestTarget } from "./routing.js";

export type { ExtraRoute, RequestContext } from "./routeTypes.js";

export interface ControlServerOptions {
  /** Bearer token; null = none required (the caller allows that on loopback only). */
  token: string | null;
  log: Logger;
  extraRoutes?: readonly ExtraRoute[];
}

export interface ControlServer {
  server: Server;
  listen(port: number, host: string): Promise<AddressInfo>;
  /** Stop accepting, let requests in flight finish for up to `graceMs`, then cut the rest. */
  close(graceMs?: number): Promise<void>;
  /** The OpenAPI document this server serves. */
  openapi: Record<string, unknown>;
}

export function createControlServer(facade: ControlFacade, opts: ControlServerOptions): ControlServer {
  const access = new ControlAccess(opts.token);
  const extras = opts.extraRoutes ?? [];
  const openapi = buildOpenApi({ version: facade.version, tokenConfigured: access.tokenConfigured, extra: extras });
  const openapiText = JSON.stringify(openapi, null, 2) + "\n";
  const routes = compileRoutes(extras);

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const method = req.method ?? "GET";
    const { pathname, query } = requestTarget(req.url);
    access.refuseForeign(req);
    const { hit, allowed } = findRoute(routes, method, pathname);
    // Before 404 and 405: without the token, an unknown path or method tells nothing either.
    if (!hit || hit.route.auth) access.requireToken(req);
    if (!allowed.length) throw new ApiError("ERR_NOT_FOUND", `no route ${pathname}; see /openapi.json`);
    if (!hit) {
      const allow = allowed.join(", ");
      throw new ApiError("ERR_METHOD_NOT_ALLOWED", `${method} is not allowed on ${pathname}; allowed: ${allow}`, { headers: { allow } });
    }
    await answer(facade, hit, { req, res, query, openapi, openapiText });
  };

  const server = createHttpServer(opts.log, handle);
  return {
    server,
    openapi,
    listen: (port, host) => listenOn(server, port, host),
    close: (graceMs = 2_000) => closeGracefully(server, graceMs),
  };
}

/** A request on its way to its route, with the document the server serves. */
interface PendingRequest {
  req: IncomingMessage;
  res: ServerResponse;
  query: URLSearchParams;
  openapi: Record<string, unknown>;
  openapiText: string;
}

/** Run the route: an extra route answers itself; a table route gets its checked query and JSON body, and its handler's reply is sent. */
async function answer(facade: ControlFacade, hit: RouteHit, c: PendingRequest): Promise<void> {
  const { req, res, query } = c;
  const params = decodeParams(hit.params);
  if (hit.route.extra) {
    await hit.route.extra.handle({ req, res, params, query });
    return;
  }
  const def = hit.route.def!;
  checkQuery(def, query);
  const body = def.body?.kind === "json" ? await readJson(req, def.body.optional) : undefined;
  const reply = await HANDLERS[def.id]!(facade, { req, res, params, query, body, openapi: c.openapi, openapiText: c.openapiText });
  if (reply.stream) await sendStream(res, { ...reply, stream: reply.stream });
  else send(req, res, reply);
}
