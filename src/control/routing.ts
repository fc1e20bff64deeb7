/**
 * Which route answers a request: the path templates of openapi.ts's table (and the caller's extra
 * routes) matched segment by segment, then the path parameters and query checked.
 */
import { badRequest } from "./apiErrors.js";
import { ROUTES, type HttpMethod, type RouteDef } from "./openapi.js";
import type { ExtraRoute } from "./routeTypes.js";

export interface CompiledRoute {
  method: HttpMethod;
  segments: Array<{ literal: string } | { param: string }>;
  auth: boolean;
  def: RouteDef | null;
  extra: ExtraRoute | null;
}

export interface RouteHit {
  route: CompiledRoute;
  /** Still percent-encoded: decodeParams() them once the request may proceed. */
  params: Record<string, string>;
}

function compile(path: string): CompiledRoute["segments"] {
  return path
    .split("/")
    .slice(1)
    .map((s) => (/^\{[A-Za-z_][A-Za-z0-9_]*\}$/.test(s) ? { param: s.slice(1, -1) } : { literal: s }));
}

/** The path parameters (still percent-encoded) if `parts` matches; null otherwise. */
function matchPath(route: CompiledRoute, parts: string[]): Record<string, string> | null {
  if (parts.length !== route.segments.length) return null;
  const params: Record<string, string> = {};
  for (let i = 0; i < parts.length; i++) {
    const seg = route.segments[i]!;
    const part = parts[i]!;
    if ("literal" in seg) {
      if (seg.literal !== part) return null;
    } else {
      if (part === "") return null;
      params[seg.param] = part;
    }
  }
  return params;
}

/** Every route of the table, then the caller's. */
export function compileRoutes(extras: readonly ExtraRoute[]): CompiledRoute[] {
  return [
    ...ROUTES.map((def) => ({ method: def.method, segments: compile(def.path), auth: def.auth, def, extra: null })),
    ...extras.map((x) => ({ method: x.method, segments: compile(x.path), auth: x.auth, def: null, extra: x })),
  ];
}

/** The route for `method` on `pathname` (if any), and the methods the path allows (none: no such path). */
export function findRoute(routes: readonly CompiledRoute[], method: string, pathname: string): { hit: RouteHit | undefined; allowed: string[] } {
  const parts = pathname.split("/").slice(1);
  const onPath: RouteHit[] = [];
  for (const route of routes) {
    const params = matchPath(route, parts);
    if (params) onPath.push({ route, params });
  }
  const hit = onPath.find((m) => m.route.method === method);
  return { hit, allowed: [...new Set(onPath.map((m) => m.route.method))] };
}

/** The path and query of a request target (origin-form, or absolute-form reduced to its path). */
export function requestTarget(url: string | undefined): { pathname: string; query: URLSearchParams } {
  let rawPath = url ?? "/";
  if (!rawPath.startsWith("/")) {
    try {
      const u = new URL(rawPath);
      rawPath = u.pathname + u.search;
    } catch {
      rawPath = "/";
    }
  }
  const qi = rawPath.indexOf("?");
  const pathname = qi < 0 ? rawPath : rawPath.slice(0, qi);
  const query = new URLSearchParams(qi < 0 ? "" : rawPath.slice(qi + 1));
  return { pathname, query };
}

export function decodeParams(raw: Record<string, string>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(raw)) {
    try {
      out[k] = decodeURIComponent(v);
    } catch {
      throw badRequest(k, "invalid percent-encoding in the path");
    }
  }
  return out;
}

/** Only the route's documented query parameters, each at most once, the required ones present. */
export function checkQuery(def: RouteDef, query: URLSearchParams): void {
  const known = new Map((def.query ?? []).map((q) => [q.name, q]));
  const seen = new Set<string>();
  for (const k of query.keys()) {
    if (!known.has(k)) throw badRequest(k, known.size ? `unknown query parameter; known: ${[...known.keys()].join(", ")}` : "unknown query parameter; this route takes none");
    if (seen.has(k)) throw badRequest(k, "given more than once");
    seen.add(k);
  }
  for (const q of known.values()) if (q.required && !seen.has(q.name)) throw badRequest(q.name, "required query parameter");
}
