/**
 * robots.txt fetched for a request of a collection that obeys it: an exchange like any other
 * (forward.ts), recorded into the collection (and series) of the request that needed it, with
 * that request's User-Agent and From — only the client is lathe itself, a leg that keeps the
 * first 500 KiB of the body for the parser. Redirects are followed, five at most (RFC 9309
 * §2.3.1.2), each hop recorded.
 */
import { Readable } from "node:stream";
import type { Socket } from "node:net";
import { ROBOTS_MAX_BYTES, type RobotsResponse } from "../politeness/robotsCache.js";
import type { Admitted } from "../warcprox/limits.js";
import type { ClientLeg, RequestHead, ResponseHead } from "./clientLeg.js";
import type { ProxyContext } from "./context.js";
import { forwardExchange } from "./forward.js";
import { headerValues } from "./headers.js";
import type { RequestPolicy } from "./requestPolicy.js";
import { parseAbsoluteForm } from "./target.js";

const MAX_REDIRECTS = 5;
/** Request fields of the triggering request that go with the robots.txt request: who asks. */
const IDENTIFYING = new Set(["user-agent", "from"]);

export async function fetchRobots(ctx: ProxyContext, trigger: ClientLeg, policy: RequestPolicy, robotsUrl: string, rawHeaders: string[]): Promise<RobotsResponse> {
  const headers: string[] = [];
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) if (IDENTIFYING.has(rawHeaders[i]!.toLowerCase())) headers.push(rawHeaders[i]!, rawHeaders[i + 1]!);
  // Recorded as any capture of the collection; the request's mime-type filters are about what it asked for, not this.
  const robotsPolicy: RequestPolicy = Object.assign({}, policy, { mimeTypeFilters: [], acceptCaptureMetadata: false });
  let url = robotsUrl;
  for (let hop = 0; ; hop++) {
    const target = parseAbsoluteForm(url);
    if (!target) return { kind: "unreachable", error: `cannot fetch ${url}` };
    const res = await new Promise<RobotsLegResult>((resolve) => {
      const leg = new RobotsLeg({ method: "GET", target, rawHeaders: [...headers, "Accept", "text/plain, */*;q=0.5"] }, trigger.socket, resolve);
      forwardExchange(ctx, leg, robotsPolicy, NOT_COUNTED);
    });
    if (res.kind === "unreachable") return res;
    const location = headerValues(res.headers, "location")[0];
    if (res.status < 300 || res.status > 399 || !location || hop === MAX_REDIRECTS) return { kind: "response", status: res.status, body: res.body };
    try {
      url = new URL(location, url).href;
    } catch {
      return { kind: "response", status: res.status, body: res.body };
    }
  }
}

/** robots.txt counts in no Warcprox-Meta limit or stats bucket: the crawler did not ask for it. */
const NOT_COUNTED: Admitted = { ok: true, buckets: [], release: () => undefined };

type RobotsLegResult = { kind: "response"; status: number; headers: string[]; body: string } | { kind: "unreachable"; error: string };

/** lathe as the client of a robots.txt exchange: keeps the status, Location and the first 500 KiB. */
class RobotsLeg implements ClientLeg {
  readonly protocol = "http/1.1";
  readonly body = Readable.from([]);
  readonly hasBody = false;
  readonly needsDrain = false;
  headSent = false;
  gone = false;
  readonly #parts: Buffer[] = [];
  #bytes = 0;
  #head: ResponseHead | null = null;
  readonly #closeCbs: Array<(delivered: boolean) => void> = [];

  constructor(
    readonly head: RequestHead,
    readonly socket: Socket,
    private readonly done: (r: RobotsLegResult) => void,
  ) {}

  sendHead(head: ResponseHead): void {
    this.headSent = true;
    this.#head = head;
  }
  sendInterim(): void {}
  write(chunk: Buffer): boolean {
    if (this.#bytes < ROBOTS_MAX_BYTES) {
      this.#parts.push(chunk);
      this.#bytes += chunk.length;
    }
    return true;
  }
  onDrain(): void {}
  end(last?: Buffer): void {
    if (last) this.write(last);
    const text = Buffer.concat(this.#parts).subarray(0, ROBOTS_MAX_BYTES).toString("utf8").replace(/^\uFEFF/, "");
    this.#close(true, { kind: "response", status: this.#head?.status ?? 0, headers: this.#head?.headers ?? [], body: text });
  }
  destroy(): void {
    this.#close(false, { kind: "unreachable", error: "the response was cut off" });
  }
  onClose(cb: (delivered: boolean) => void): void {
    this.#closeCbs.push(cb);
  }
  answer(head: ResponseHead, body: Buffer | undefined): void {
    // lathe's own answer: the origin could not be reached (502, 504) or may not be (403).
    this.#close(true, { kind: "unreachable", error: `${head.status} ${body?.toString("utf8").trim() ?? ""}` });
  }
  discardBody(): void {}

  #close(delivered: boolean, r: RobotsLegResult): void {
    if (this.gone) return;
    this.gone = true;
    this.done(r);
    for (const cb of this.#closeCbs) cb(delivered);
  }
}
