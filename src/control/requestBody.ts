/** Request bodies of the control API: bounded JSON objects, and raw uploads streamed on. */
import type { IncomingMessage } from "node:http";
import { PassThrough } from "node:stream";
import { errorMessage } from "../core/errors.js";
import { ApiError, badRequest } from "./apiErrors.js";
import { JSON_BODY_LIMIT } from "./openapi.js";

const isObject = (v: unknown): v is Record<string, unknown> => !!v && typeof v === "object" && !Array.isArray(v);

function mediaType(v: string | undefined): string {
  return (v ?? "").split(";")[0]!.trim().toLowerCase();
}

function hasBody(req: IncomingMessage): boolean {
  const cl = req.headers["content-length"];
  if (cl !== undefined) return cl.trim() !== "0";
  return req.headers["transfer-encoding"] !== undefined;
}

/** The whole body, failing with 413 as soon as it passes JSON_BODY_LIMIT bytes. */
function readBounded(req: IncomingMessage): Promise<Buffer> {
  // Events rather than for-await: leaving a for-await early would destroy the request, and with
  // it the socket the error answer has to go out on.
  return new Promise<Buffer>((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const done = (e: Error | null) => {
      req.off("data", onData);
      req.off("end", onEnd);
      req.off("error", onError);
      if (e) reject(e);
      else resolve(Buffer.concat(chunks));
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > JSON_BODY_LIMIT) done(new ApiError("ERR_PAYLOAD_TOO_LARGE", `JSON bodies are limited to ${JSON_BODY_LIMIT} bytes`));
      else chunks.push(chunk);
    };
    const onEnd = () => done(null);
    const onError = (e: Error) => done(e);
    req.on("data", onData);
    req.on("end", onEnd);
    req.on("error", onError);
  });
}

/** UTF-8 JSON text that must be an object. */
function parseJsonObject(data: Buffer): Record<string, unknown> {
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(data);
  } catch {
    throw badRequest("(body)", "is not valid UTF-8");
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (e) {
    throw badRequest("(body)", `invalid JSON: ${errorMessage(e)}`);
  }
  if (!isObject(value)) throw badRequest("(body)", "must be a JSON object");
  return value;
}

/** Read a JSON body of at most JSON_BODY_LIMIT bytes. `optional`: no body → {}. */
export async function readJson(req: IncomingMessage, optional: boolean): Promise<unknown> {
  if (!hasBody(req)) {
    if (optional) return {};
    throw badRequest("(body)", "a JSON object is required");
  }
  if (mediaType(req.headers["content-type"]) !== "application/json") {
    throw new ApiError("ERR_UNSUPPORTED_MEDIA_TYPE", `the request body must be application/json, got ${JSON.stringify(req.headers["content-type"] ?? "(none)")}`);
  }
  const declared = Number(req.headers["content-length"] ?? NaN);
  if (declared > JSON_BODY_LIMIT) throw new ApiError("ERR_PAYLOAD_TOO_LARGE", `JSON bodies are limited to ${JSON_BODY_LIMIT} bytes; this one declares ${declared}`);
  const data = await readBounded(req);
  if (data.length === 0) {
    if (optional) return {};
    throw badRequest("(body)", "a JSON object is required");
  }
  return parseJsonObject(data);
}

/**
 * The request body as a stream of its own: the facade may stop reading (or destroy its stream)
 * without destroying the request, so an error answer can still be sent. Back-pressure passes
 * through; a client that aborts the upload errors the stream.
 */
export function bodyStream(req: IncomingMessage): PassThrough {
  const out = new PassThrough();
  req.pipe(out);
  req.once("error", (e) => out.destroy(e));
  req.once("close", () => {
    if (!req.complete) out.destroy(new ApiError("ERR_BAD_REQUEST", "the client aborted the upload"));
  });
  out.once("close", () => req.unpipe(out));
  return out;
}
