/** The shapes the control API's router, handlers and extra routes share. */
import type { IncomingMessage, ServerResponse } from "node:http";
import type { ControlFacade } from "./facade.js";
import type { ExtraRouteDoc } from "./openapi.js";

export interface RequestContext {
  req: IncomingMessage;
  res: ServerResponse;
  /** Percent-decoded path parameters. */
  params: Record<string, string>;
  query: URLSearchParams;
}

/** A route the caller adds (e.g. `/cdx`, the live page `/`): documented in /openapi.json, answered by `handle`. */
export interface ExtraRoute extends ExtraRouteDoc {
  /** Writes the whole answer itself; a throw becomes the usual JSON error (if nothing was sent yet). */
  handle(ctx: RequestContext): Promise<void> | void;
}

/** What a handler answers: a JSON value, a text or a stream of known length, with its status and extra headers. */
export interface Reply {
  status: number;
  json?: unknown;
  text?: string;
  /** A body too large for memory (a WACZ), written chunk by chunk; `contentType` says what it is. */
  stream?: ReplyStream;
  contentType?: string;
  headers?: Record<string, string>;
}

export interface ReplyStream {
  /** Exact byte length (Content-Length). */
  length: number;
  /** Write the body through `sink`, whose promise settles when the chunk has gone out. */
  write(sink: (chunk: Buffer) => Promise<void>): Promise<void>;
  /** Called once the answer is over, sent or not. */
  dispose(): Promise<void>;
}

export interface HandlerContext extends RequestContext {
  /** The parsed JSON body, for routes that take one. */
  body: unknown;
  /** The OpenAPI document this server serves, and its text as sent. */
  openapi: Record<string, unknown>;
  openapiText: string;
}

export type Handler = (facade: ControlFacade, c: HandlerContext) => Promise<Reply> | Reply;
