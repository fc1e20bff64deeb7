/**
 * `GET /api/v1/`: where the start-up banner points a newcomer. It lists the operations of the
 * OpenAPI document this server serves (so it cannot drift from the routes) and links to it. Pure.
 */

export interface ApiIndex {
  title: string;
  version: string;
  /** Where the whole OpenAPI document is. */
  openapi: "/openapi.json";
  routes: Array<{ method: string; path: string; summary: string }>;
}

export function apiIndexOf(doc: Record<string, unknown>): ApiIndex {
  const info = doc.info as { title: string; version: string };
  const paths = doc.paths as Record<string, Record<string, { summary?: string }>>;
  const routes = Object.entries(paths).flatMap(([path, item]) => Object.entries(item).map(([method, op]) => ({ method: method.toUpperCase(), path, summary: op.summary ?? "" })));
  return { title: info.title, version: info.version, openapi: "/openapi.json", routes };
}
