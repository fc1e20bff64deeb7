/**
 * `GET /cdx` on the control port (issue "CDXJ index"; decisions.md §5, §6): pywb's CDX server
 * parameters over the collections' indexes. The answer streams; a bad parameter is a 400 that
 * names it, an unknown collection a 404.
 */
import type { CdxService } from "../index/service.js";
import { CdxQueryError, formatLine, parseCdxQuery } from "../index/query.js";
import type { ExtraRoute } from "./api.js";
import { ApiError, badRequest } from "./apiErrors.js";

const param = (name: string, description: string, schema: Record<string, unknown> = { type: "string" }) => ({ name, in: "query", required: name === "url", description, schema });

export function cdxRoute(cdx: CdxService, collections: { get(name: string): unknown }): ExtraRoute {
  return {
    method: "GET",
    path: "/cdx",
    auth: true,
    operation: {
      operationId: "queryCdx",
      summary: "CDX query (pywb's CDX server parameters) over the collections' CDXJ indexes",
      parameters: [
        param("url", "URL to look up; `example.com/path*` = prefix, `*.example.com` = domain"),
        param("matchType", "exact (default), prefix, host or domain", { type: "string", enum: ["exact", "prefix", "host", "domain"] }),
        param("from", "earliest timestamp, 1–14 digits (padded down)"),
        param("to", "latest timestamp, 1–14 digits (padded up)"),
        param("limit", "at most this many lines", { type: "integer", minimum: 1 }),
        param("sort", "reverse, or closest (with closest=; exact match only)", { type: "string", enum: ["reverse", "closest"] }),
        param("closest", "timestamp the answers are nearest to (sort=closest)"),
        param("output", "cdxj (default: the index lines), json (one object per line) or text (CDX-11 fields, or fl)", { type: "string", enum: ["cdxj", "json", "text"] }),
        param("fl", "comma-separated fields to return (urlkey, timestamp, url, mime, status, digest, length, offset, filename, …)"),
        { ...param("filter", "`[!][=|~]field:expr`: = exact, ~ contains, else a regex matched at the start; ! inverts; repeatable"), explode: true },
        param("related", "true: also the associated resources (urn:<type>:<url>, screenshot:, thumbnail:) of each capture found", { type: "string", enum: ["true", "false"] }),
        param("collection", "one collection (default: all)"),
      ],
      responses: {
        "200": {
          description: "Matching lines, one per line (`application/x-ndjson` for output=json, else text/plain)",
          content: { "text/plain": { schema: { type: "string" } }, "application/x-ndjson": { schema: { type: "string" } } },
        },
      },
    },
    async handle({ res, query }) {
      let q;
      try {
        q = parseCdxQuery(query);
      } catch (e) {
        if (e instanceof CdxQueryError) throw badRequest(e.param, e.message);
        throw e;
      }
      if (q.collection !== null && !collections.get(q.collection)) throw new ApiError("ERR_NOT_FOUND", `no collection ${JSON.stringify(q.collection)}`, { field: "collection" });
      const it = cdx.query(q)[Symbol.asyncIterator]();
      // The first line is read before the head goes out, so a failure still gets a JSON error.
      let next = await it.next();
      res.writeHead(200, {
        "content-type": q.output === "json" ? "application/x-ndjson; charset=utf-8" : "text/plain; charset=utf-8",
        "cache-control": "no-store",
        "x-content-type-options": "nosniff",
      });
      try {
        let buf = "";
        while (!next.done) {
          buf += formatLine(next.value, q);
          if (buf.length >= 64 * 1024) {
            if (!res.write(buf)) await new Promise((r) => {
              res.once("drain", r);
              res.once("close", r);
            });
            buf = "";
          }
          if (res.destroyed) return;
          next = await it.next();
        }
        res.end(buf);
      } finally {
        await it.return?.(undefined);
      }
    },
  };
}
