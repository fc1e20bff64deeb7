/** Answers lathe gives instead of the origin's, on whatever protocol the client speaks. */
import type { RuleAnswer } from "../warcprox/limits.js";
import type { WarcproxMetaError } from "../warcprox/warcproxMeta.js";
import type { ClientLeg } from "./clientLeg.js";

/** A site whose certificate failed verification, in a session that refuses such sites. */
export function sendCertErrorPage(client: ClientLeg, uri: string, verdict: string): void {
  const esc = (x: string) => x.replace(/[&<>"]/g, (c) => `&#${c.charCodeAt(0)};`);
  const body = Buffer.from(
    `<!doctype html><html><head><meta charset="utf-8"><title>Certificate error: ${esc(verdict)}</title></head><body>` +
      `<h1>lathe: this site's certificate is not valid</h1><p>The certificate of <code>${esc(uri)}</code> failed verification: ` +
      `<strong>${esc(verdict)}</strong>.</p><p>Nothing was recorded. To record such sites anyway, start the session with <code>--accept-invalid-certs</code>.</p></body></html>\n`,
  );
  client.answer({ status: 502, headers: ["Content-Type", "text/html; charset=utf-8", "Content-Length", String(body.length), "Cache-Control", "no-store", "X-Lathe-Error", "1"] }, body);
}

/** A warcprox rule answer (420, 430, 403): exact status line, headers and body, then close. */
export function sendRuleAnswer(client: ClientLeg, a: RuleAnswer): void {
  const headers: string[] = [];
  for (const [n, v] of a.headers) headers.push(n, v);
  client.answer({ status: a.status, reason: a.reason, headers }, client.head.method === "HEAD" ? undefined : Buffer.from(a.body), { close: true });
}

/** An invalid Warcprox-Meta: 400 with warcprox's reason, then close. */
export function rejectMeta(client: ClientLeg, e: WarcproxMetaError): void {
  const body = Buffer.from(`${e.message}\n`, "utf8");
  client.answer({ status: 400, reason: e.reason, headers: ["Content-Type", "text/plain;charset=utf-8", "Connection", "close", "Content-Length", String(body.length)] }, body, { close: true });
}
