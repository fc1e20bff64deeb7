/**
 * Is a request for a page requisite (an image, a style sheet, a script, a font…) rather than a
 * page? `robots: "obey-except-embeds"` lets these through robots.txt, so that a page lathe may
 * record also renders from the archive.
 *
 * How lathe knows: `Sec-Fetch-Dest` (Fetch Metadata), which Chromium and Firefox send on every
 * request to a secure origin (HTTPS, and loopback); without it (plain-HTTP origins, crawlers that
 * do not send it), the first media range of `Accept`: `image/…` or `text/css` — a browser's
 * image and style sheet requests say so, its script requests send only a `*∕*` that page
 * requests (curl, wget) send too, so over plain HTTP scripts count as pages.
 */

/** Sec-Fetch-Dest values of embedded content (Fetch §request destination); `document`, `iframe`, `frame`, `empty` (fetch/XHR) and `report` are not. */
const EMBED_DESTINATIONS = new Set([
  "audio", "audioworklet", "embed", "font", "image", "manifest", "object", "paintworklet",
  "script", "serviceworker", "sharedworker", "style", "track", "video", "worker", "xslt",
]);

export type EmbedEvidence = "sec-fetch-dest" | "accept" | "none";

export function embedOf(rawHeaders: readonly string[]): { embed: boolean; by: EmbedEvidence } {
  let accept: string | undefined;
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]!.toLowerCase();
    if (name === "sec-fetch-dest") return { embed: EMBED_DESTINATIONS.has(rawHeaders[i + 1]!.trim().toLowerCase()), by: "sec-fetch-dest" };
    if (name === "accept" && accept === undefined) accept = rawHeaders[i + 1]!;
  }
  if (accept === undefined) return { embed: false, by: "none" };
  const first = accept.split(",")[0]!.split(";")[0]!.trim().toLowerCase();
  return { embed: first.startsWith("image/") || first === "text/css", by: "accept" };
}
