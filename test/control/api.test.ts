/**
 * The REST control API over real HTTP, against a fake facade: collections are the real
 * CollectionRegistry (temp SQLite), sessions and resources are faked in memory.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import http from "node:http";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Readable } from "node:stream";
import { CollectionRegistry, InputError, type Collection, type CollectionInput } from "../../src/archive/collections.js";
import type { SessionSummary } from "../../src/archive/sessions.js";
import { resolveConfig } from "../../src/config/validate.js";
import { ProxyError } from "../../src/core/errors.js";
import { silentLogger, type Logger } from "../../src/core/log.js";
import { createControlServer, type ControlServer, type ExtraRoute } from "../../src/control/api.js";
import type { ControlFacade, FleetAnswer, ResourceInput, SessionInfo, WaczDownload, WrittenResource } from "../../src/control/facade.js";
import { WaczError } from "../../src/wacz/waczError.js";
import { renderMetrics } from "../../src/control/metrics.js";
import { ROUTES } from "../../src/control/openapi.js";
import { Politeness } from "../../src/politeness/politeness.js";

// ---------------------------------------------------------------------------------------------
// The fake facade

interface ReceivedResource {
  input: Omit<ResourceInput, "body">;
  bytes: Buffer;
  chunks: number;
}

function fakeWacz(filename: string): WaczDownload {
  const bytes = Buffer.from("PK\x05\x06" + "\0".repeat(18), "latin1");
  const prepared = { size: bytes.length, files: 0, lines: 0, pages: 0, pageRule: "html" as const, write: (sink: (b: Buffer) => Promise<void>) => sink(bytes), dispose: async () => {} };
  return { prepared, filename, leftOut: [] };
}

class FakeFacade implements ControlFacade {
  readonly version = "0.0.0-test";
  readonly collections: CollectionRegistry;
  readonly sessions = new Map<string, { info: SessionInfo; closed: boolean }>();
  readonly resources: ReceivedResource[] = [];
  /** Thrown by the next writeResource before it reads the body. */
  failNextWrite: unknown = null;
  /** Called on every body chunk writeResource receives. */
  onChunk: ((n: number) => void) | null = null;
  statusError: unknown = null;
  fleetError: unknown = null;
  #serial = 0;

  constructor(dbPath: string) {
    this.collections = new CollectionRegistry(dbPath, resolveConfig({ warc: { prefix: "crawl" } }));
  }

  createCollection(input: CollectionInput): Collection {
    return this.collections.create(input);
  }
  async updateCollection(name: string, input: CollectionInput): Promise<Collection> {
    return this.collections.update(name, input);
  }
  async deleteCollection(name: string): Promise<void> {
    if ([...this.sessions.values()].some((s) => !s.closed && s.info.collection === name)) throw new InputError("name", "has open sessions");
    this.collections.delete(name);
  }
  async openSession(input: { collection?: string; port?: number }): Promise<SessionInfo> {
    const collection = input.collection ?? "default";
    if (!this.collections.get(collection)) throw new ProxyError("ERR_DENIED", `no collection ${JSON.stringify(collection)}`);
    const id = `s-${String(++this.#serial).padStart(12, "0")}`;
    const port = input.port || 40000 + this.#serial;
    const info: SessionInfo = {
      id,
      collection,
      createdAt: new Date(0).toISOString(),
      closedAt: null,
      captures: 0,
      revisits: 0,
      failed: 0,
      skipped: 0,
      bytes: 0,
      files: [],
      proxy: { host: "127.0.0.1", port },
      proxyUrl: `http://127.0.0.1:${port}`,
      username: id,
    };
    this.sessions.set(id, { info, closed: false });
    return { ...info, password: "pw-" + id };
  }
  listSessions(): SessionInfo[] {
    // Deliberately leaks a password: the API must strip it.
    return [...this.sessions.values()].filter((s) => !s.closed).map((s) => ({ ...s.info, password: "leak" }));
  }
  getSession(id: string): SessionInfo | null {
    const s = this.sessions.get(id);
    return s && !s.closed ? { ...s.info, password: "leak" } : null;
  }
  async closeSession(id: string): Promise<SessionSummary> {
    const s = this.sessions.get(id);
    if (!s || s.closed) throw new ProxyError("ERR_DENIED", `no session ${JSON.stringify(id)}`);
    s.closed = true;
    const { proxy: _p, proxyUrl: _u, username: _n, password: _w, ...summary } = s.info;
    return { ...summary, captures: 3, files: ["crawl-1.warc.gz"], closedAt: new Date(1000).toISOString() };
  }
  // A stand-in package: the WACZ routes on a real lathe are test/control/wacz.test.ts's.
  async collectionWacz(name: string): Promise<WaczDownload> {
    if (!this.collections.get(name)) throw new ProxyError("ERR_DENIED", `no collection ${JSON.stringify(name)}`);
    return fakeWacz(`${name}.wacz`);
  }
  async sessionWacz(id: string): Promise<WaczDownload> {
    const s = this.sessions.get(id);
    if (!s) throw new ProxyError("ERR_DENIED", `no session ${JSON.stringify(id)}`);
    if (!s.closed) throw new WaczError("conflict", `session ${id} is still open`);
    return fakeWacz(`${id}.wacz`);
  }
  async writeResource(input: ResourceInput): Promise<WrittenResource> {
    if (this.failNextWrite) {
      const e = this.failNextWrite;
      this.failNextWrite = null;
      throw e;
    }
    if (!this.collections.get(input.collection)) throw new ProxyError("ERR_DENIED", `no collection ${JSON.stringify(input.collection)}`);
    if (input.uri !== undefined && /^https?:/i.test(input.uri)) throw new InputError("uri", "a resource never gets an http(s) URI");
    const chunks: Buffer[] = [];
    for await (const c of input.body as Readable) {
      chunks.push(c as Buffer);
      this.onChunk?.(chunks.length);
    }
    const bytes = Buffer.concat(chunks);
    const { body: _b, ...rest } = input;
    this.resources.push({ input: rest, bytes, chunks: chunks.length });
    const uri = input.uri ?? `urn:${input.kind}:${input.page}`;
    return { recordId: `<urn:uuid:00000000-0000-4000-8000-${String(this.resources.length).padStart(12, "0")}>`, filename: "crawl-1.warc.gz", offset: 1234, length: bytes.length + 500, uri };
  }
  status(): Record<string, unknown> {
    if (this.statusError) throw this.statusError;
    return { collections: this.collections.list().map((c) => c.name), sessions: this.listSessions().length };
  }
  async fleet(): Promise<FleetAnswer> {
    if (this.fleetError) throw this.fleetError;
    const at = new Date(0).toISOString();
    const one = { id: "h:8000", hostname: "h", pid: 42, proxy: "127.0.0.1:8000", control: null, version: this.version, startedAt: at, heartbeatAt: at, load: { inFlight: 0, capturesPerSec: 0 } };
    return { shared: false, instances: [one] };
  }
  metrics(): string {
    return renderMetrics([{ name: "lathe_captures_total", help: "Captures written.", type: "counter", labels: { collection: "default" }, value: 7 }]);
  }
  politeness() {
    return { ...new Politeness().report(), policies: Object.fromEntries(this.collections.list().map((c) => [c.name, c.politeness])) };
  }
  caPem(): string {
    return "-----BEGIN CERTIFICATE-----\nMIIBfake\n-----END CERTIFICATE-----\n";
  }
}

// ---------------------------------------------------------------------------------------------
// A small HTTP client

interface Res {
  status: number;
  headers: http.IncomingHttpHeaders;
  text: string;
  json: any;
}

function call(port: number, method: string, path: string, opts: { headers?: Record<string, string | number>; body?: string | Buffer; agent?: http.Agent } = {}): Promise<Res> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: "127.0.0.1", port, method, path, headers: opts.headers ?? {}, agent: opts.agent ?? false }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => {
        const text = Buffer.concat(chunks).toString("utf8");
        let json: unknown;
        if (text !== "" && /json/.test(res.headers["content-type"] ?? "")) json = JSON.parse(text);
        resolve({ status: res.statusCode!, headers: res.headers, text, json });
      });
      res.on("error", reject);
    });
    req.on("error", reject);
    req.end(opts.body);
  });
}

const JSON_HEADERS = { "content-type": "application/json" };

function expectError(r: Res, status: number, code: string, field?: string): void {
  expect(r.status, r.text).toBe(status);
  expect(r.headers["content-type"]).toBe("application/json; charset=utf-8");
  expect(Object.keys(r.json)).toEqual(["error"]);
  expect(r.json.error.code).toBe(code);
  expect(typeof r.json.error.message).toBe("string");
  if (field !== undefined) {
    expect(r.json.error.field).toBe(field);
    expect(r.json.error.message.startsWith(field)).toBe(true);
  }
}

// ---------------------------------------------------------------------------------------------
// A minimal JSON Schema (2020-12 subset) validator for the OpenAPI document's schemas

function validate(doc: any, schema: any, value: unknown, at = "$"): string[] {
  if (schema === true || schema === undefined) return [];
  if (schema === false) return [`${at}: not allowed`];
  if (schema.$ref) {
    const name = String(schema.$ref).replace("#/components/schemas/", "");
    const target = doc.components.schemas[name];
    if (!target) return [`${at}: dangling $ref ${schema.$ref}`];
    return validate(doc, target, value, at);
  }
  const errs: string[] = [];
  for (const sub of schema.allOf ?? []) errs.push(...validate(doc, sub, value, at));
  if (schema.const !== undefined && value !== schema.const) errs.push(`${at}: must be ${JSON.stringify(schema.const)}`);
  if (schema.enum && !schema.enum.includes(value)) errs.push(`${at}: ${JSON.stringify(value)} not in enum`);
  if (schema.type) {
    const types: string[] = Array.isArray(schema.type) ? schema.type : [schema.type];
    const actual = value === null ? "null" : Array.isArray(value) ? "array" : typeof value === "number" ? (Number.isInteger(value) ? "integer" : "number") : typeof value;
    const ok = types.some((t) => t === actual || (t === "number" && actual === "integer"));
    if (!ok) return [...errs, `${at}: type ${actual}, want ${types.join("|")}`];
  }
  if (typeof value === "string" && schema.pattern && !new RegExp(schema.pattern, "u").test(value)) errs.push(`${at}: does not match ${schema.pattern}`);
  if (typeof value === "number") {
    if (schema.minimum !== undefined && value < schema.minimum) errs.push(`${at}: below ${schema.minimum}`);
    if (schema.maximum !== undefined && value > schema.maximum) errs.push(`${at}: above ${schema.maximum}`);
  }
  if (Array.isArray(value)) {
    if (schema.minItems !== undefined && value.length < schema.minItems) errs.push(`${at}: fewer than ${schema.minItems} items`);
    value.forEach((v, i) => errs.push(...validate(doc, schema.items, v, `${at}[${i}]`)));
  } else if (value && typeof value === "object") {
    const o = value as Record<string, unknown>;
    for (const k of schema.required ?? []) if (!(k in o)) errs.push(`${at}: missing ${k}`);
    for (const [k, v] of Object.entries(o)) {
      if (schema.properties && k in schema.properties) errs.push(...validate(doc, schema.properties[k], v, `${at}.${k}`));
      else if (schema.additionalProperties !== undefined) errs.push(...validate(doc, schema.additionalProperties, v, `${at}.${k}`));
    }
  }
  return errs;
}

/** Check an answer against the document: documented status, media type and body schema. */
function checkAgainstDoc(doc: any, method: string, template: string, r: Res): void {
  const op = doc.paths[template]?.[method.toLowerCase()];
  expect(op, `${method} ${template} documented`).toBeDefined();
  const documented = op.responses[String(r.status)];
  expect(documented, `${method} ${template} answered ${r.status}, documented: ${Object.keys(op.responses).join(",")}: ${r.text}`).toBeDefined();
  if (!documented.content) {
    expect(r.text).toBe("");
    return;
  }
  const ct = (r.headers["content-type"] ?? "").split(";")[0]!.trim();
  const key = Object.keys(documented.content).find((k) => k.split(";")[0]!.trim() === ct);
  expect(key, `${method} ${template} ${r.status}: content-type ${r.headers["content-type"]} documented as ${Object.keys(documented.content)}`).toBeDefined();
  const schema = documented.content[key!].schema;
  const value = ct === "application/json" ? r.json : r.text;
  expect(validate(doc, schema, value), `${method} ${template} ${r.status} body`).toEqual([]);
}

// ---------------------------------------------------------------------------------------------

const dirs: string[] = [];
const logged: Array<{ level: string; event: string; fields: unknown }> = [];
const recordingLog: Logger = {
  debug() {},
  info() {},
  warn(event, fields) {
    logged.push({ level: "warn", event, fields });
  },
  error(event, fields) {
    logged.push({ level: "error", event, fields });
  },
  child() {
    return recordingLog;
  },
};

async function start(token: string | null, extraRoutes?: ExtraRoute[]): Promise<{ api: ControlServer; facade: FakeFacade; port: number }> {
  const dir = mkdtempSync(join(tmpdir(), "lathe-api-"));
  dirs.push(dir);
  const facade = new FakeFacade(join(dir, "lathe-state.sqlite3"));
  const api = createControlServer(facade, { token, log: recordingLog, ...(extraRoutes ? { extraRoutes } : {}) });
  const addr = await api.listen(0, "127.0.0.1");
  return { api, facade, port: addr.port };
}

afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

describe("control API without a token", () => {
  let api: ControlServer;
  let facade: FakeFacade;
  let port: number;
  beforeAll(async () => ({ api, facade, port } = await start(null)));
  afterAll(async () => {
    await api.close();
    facade.collections.close();
  });

  it("collections: list, create (201 + Location), read, change, delete (204), then 404", async () => {
    const list = await call(port, "GET", "/api/v1/collections");
    expect(list.status).toBe(200);
    expect(list.json.collections.map((c: Collection) => c.name)).toEqual(["default"]);
    expect(list.json.collections[0].prefix).toBe("crawl");
    expect(list.headers["cache-control"]).toBe("no-store");

    const body = JSON.stringify({ name: "news", warcinfo: { operator: "ops@example.org", extra: { project: "elections" } }, dedup: { policy: "url" }, gzip: false });
    const created = await call(port, "POST", "/api/v1/collections", { headers: JSON_HEADERS, body });
    expect(created.status).toBe(201);
    expect(created.headers.location).toBe("/api/v1/collections/news");
    expect(created.json).toMatchObject({ name: "news", prefix: "news", gzip: false, dedup: { policy: "url" }, warcinfo: { operator: "ops@example.org", extra: { project: "elections" } } });
    expect(created.json.compression).toBe("none"); // gzip: false, the alias

    const hybrid = await call(port, "POST", "/api/v1/collections", { headers: JSON_HEADERS, body: JSON.stringify({ name: "media", compression: "hybrid" }) });
    expect(hybrid.status).toBe(201);
    expect(hybrid.json).toMatchObject({ compression: "hybrid", gzip: true });
    const contradiction = await call(port, "PATCH", "/api/v1/collections/media", { headers: JSON_HEADERS, body: JSON.stringify({ compression: "gzip", gzip: false }) });
    expect(contradiction.status).toBe(400);
    expect(contradiction.text).toContain("contradicts");
    expect((await call(port, "DELETE", "/api/v1/collections/media")).status).toBe(204);

    const read = await call(port, "GET", "/api/v1/collections/news");
    expect(read.status).toBe(200);
    expect(read.json).toEqual(created.json);

    const patched = await call(port, "PATCH", "/api/v1/collections/news", { headers: { "content-type": "application/json; charset=utf-8" }, body: JSON.stringify({ warcinfo: { description: "Élections 2026" } }) });
    expect(patched.status).toBe(200);
    expect(patched.json.warcinfo).toMatchObject({ operator: "ops@example.org", description: "Élections 2026" });
    expect((await call(port, "GET", "/api/v1/collections/news")).json.warcinfo.description).toBe("Élections 2026");

    const del = await call(port, "DELETE", "/api/v1/collections/news");
    expect(del.status).toBe(204);
    expect(del.text).toBe("");
    expectError(await call(port, "GET", "/api/v1/collections/news"), 404, "ERR_NOT_FOUND");
    expectError(await call(port, "DELETE", "/api/v1/collections/news"), 404, "ERR_NOT_FOUND");
    expectError(await call(port, "PATCH", "/api/v1/collections/news", { headers: JSON_HEADERS, body: "{}" }), 404, "ERR_NOT_FOUND");
  });

  it("collections: bad input is 400 naming the field; wrong media type 415; too large 413", async () => {
    const post = (body: string | Buffer, headers: Record<string, string | number> = JSON_HEADERS) => call(port, "POST", "/api/v1/collections", { headers, body });
    expectError(await post('{"name": "x",'), 400, "ERR_BAD_REQUEST", "(body)");
    expectError(await post("[1]"), 400, "ERR_BAD_REQUEST", "(body)");
    expectError(await post(Buffer.from([0x7b, 0xff, 0x7d])), 400, "ERR_BAD_REQUEST", "(body)");
    expectError(await call(port, "POST", "/api/v1/collections"), 400, "ERR_BAD_REQUEST", "(body)");
    expectError(await post(JSON.stringify({ name: "a1", bogus: 1 })), 400, "ERR_BAD_REQUEST", "bogus");
    expectError(await post(JSON.stringify({ name: "a1", warcinfo: { operater: "x" } })), 400, "ERR_BAD_REQUEST", "warcinfo.operater");
    expectError(await post(JSON.stringify({ name: "a1", dedup: { policy: "sometimes" } })), 400, "ERR_BAD_REQUEST", "dedup.policy");
    expectError(await post(JSON.stringify({ name: "a1", prefix: "../etc" })), 400, "ERR_BAD_REQUEST", "prefix");
    expectError(await post(JSON.stringify({ name: "Bad Name" })), 400, "ERR_BAD_REQUEST", "name");
    expectError(await post(JSON.stringify({ name: "default" })), 400, "ERR_BAD_REQUEST", "name");
    expectError(await post(JSON.stringify({ name: "a2", prefix: "crawl" })), 400, "ERR_BAD_REQUEST", "prefix");
    expectError(await post(JSON.stringify({ name: "a1" }), { "content-type": "text/plain" }), 415, "ERR_UNSUPPORTED_MEDIA_TYPE");
    expectError(await post(JSON.stringify({ name: "a1" }), {}), 415, "ERR_UNSUPPORTED_MEDIA_TYPE");
    expectError(await post(JSON.stringify({ name: "a1" }), { "content-type": "application/x-www-form-urlencoded" }), 415, "ERR_UNSUPPORTED_MEDIA_TYPE");
    // Declared too large: refused before reading; chunked too large: refused once over the limit.
    const big = Buffer.alloc(1024 * 1024 + 10, 0x20);
    expectError(await post(big, { ...JSON_HEADERS, "content-length": big.length }), 413, "ERR_PAYLOAD_TOO_LARGE");
    expectError(await post(big, { ...JSON_HEADERS, "transfer-encoding": "chunked" }), 413, "ERR_PAYLOAD_TOO_LARGE");
    // A body of exactly 1 MiB is fine (padding whitespace).
    const exact = Buffer.alloc(1024 * 1024, 0x20);
    Buffer.from(JSON.stringify({ name: "padded" })).copy(exact);
    expect((await post(exact)).status).toBe(201);
    expectError(await call(port, "DELETE", "/api/v1/collections/default"), 400, "ERR_BAD_REQUEST", "name");
    expectError(await call(port, "PATCH", "/api/v1/collections/default", { headers: JSON_HEADERS, body: JSON.stringify({ name: "other" }) }), 400, "ERR_BAD_REQUEST", "name");
    expectError(await call(port, "GET", "/api/v1/collections?limit=3"), 400, "ERR_BAD_REQUEST", "limit");
    expectError(await call(port, "GET", "/api/v1/collections/%E0%A4%A"), 400, "ERR_BAD_REQUEST", "name");
    // Nothing half-made.
    expect(facade.collections.list().map((c) => c.name)).toEqual(["default", "padded"]);
  });

  it("an unread body does not break the connection: keep-alive carries on after an early error", async () => {
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    try {
      const big = Buffer.alloc(3 * 1024 * 1024, 0x61);
      const r1 = await call(port, "POST", "/api/v1/collections", { headers: { "content-type": "text/plain", "content-length": big.length }, body: big, agent });
      expectError(r1, 415, "ERR_UNSUPPORTED_MEDIA_TYPE");
      const r2 = await call(port, "GET", "/api/v1/collections", { agent });
      expect(r2.status).toBe(200);
    } finally {
      agent.destroy();
    }
  });

  it("unknown routes are 404, wrong methods 405 with Allow", async () => {
    for (const p of ["/", "/api", "/api/v1/nothing", "/api/v1/collections/", "/api/v1/collections/a/b", "/api/v2/status", "/metrics/", "/status"]) {
      expectError(await call(port, "GET", p), 404, "ERR_NOT_FOUND");
    }
    const put = await call(port, "PUT", "/api/v1/collections", { headers: JSON_HEADERS, body: "{}" });
    expectError(put, 405, "ERR_METHOD_NOT_ALLOWED");
    expect(put.headers.allow).toBe("GET, POST");
    const post = await call(port, "POST", "/api/v1/collections/default");
    expectError(post, 405, "ERR_METHOD_NOT_ALLOWED");
    expect(post.headers.allow).toBe("GET, PATCH, DELETE");
    expect((await call(port, "GET", "/api/v1/sessions/s-1/close")).headers.allow).toBe("POST");
    expect((await call(port, "DELETE", "/ca.pem")).headers.allow).toBe("GET");
    expect((await call(port, "HEAD", "/metrics")).status).toBe(405);
  });

  it("sessions: open (201, password once), list and read without password, close → summary, then 404", async () => {
    const opened = await call(port, "POST", "/api/v1/sessions");
    expect(opened.status).toBe(201);
    expect(opened.json).toMatchObject({ collection: "default", proxy: { host: "127.0.0.1" }, username: opened.json.id, password: `pw-${opened.json.id}` });
    expect(opened.json.proxyUrl).toBe(`http://127.0.0.1:${opened.json.proxy.port}`);
    expect(opened.headers.location).toBe(`/api/v1/sessions/${opened.json.id}`);
    const id = opened.json.id as string;

    await call(port, "POST", "/api/v1/collections", { headers: JSON_HEADERS, body: JSON.stringify({ name: "sess" }) });
    const second = await call(port, "POST", "/api/v1/sessions", { headers: JSON_HEADERS, body: JSON.stringify({ collection: "sess", port: 45678 }) });
    expect(second.status).toBe(201);
    expect(second.json).toMatchObject({ collection: "sess", proxy: { port: 45678 } });

    const list = await call(port, "GET", "/api/v1/sessions");
    expect(list.status).toBe(200);
    expect(list.json.sessions.map((s: SessionInfo) => s.id)).toEqual([id, second.json.id]);
    for (const s of list.json.sessions) expect(s).not.toHaveProperty("password");
    const one = await call(port, "GET", `/api/v1/sessions/${id}`);
    expect(one.status).toBe(200);
    expect(one.json).not.toHaveProperty("password");
    expect(one.json.username).toBe(id);

    expectError(await call(port, "DELETE", "/api/v1/collections/sess"), 400, "ERR_BAD_REQUEST", "name");
    const closed = await call(port, "POST", `/api/v1/sessions/${second.json.id}/close`);
    expect(closed.status).toBe(200);
    expect(closed.json).toMatchObject({ id: second.json.id, collection: "sess", captures: 3, files: ["crawl-1.warc.gz"] });
    expect(closed.json.closedAt).toBe(new Date(1000).toISOString());
    expectError(await call(port, "POST", `/api/v1/sessions/${second.json.id}/close`), 404, "ERR_NOT_FOUND");
    expectError(await call(port, "GET", `/api/v1/sessions/${second.json.id}`), 404, "ERR_NOT_FOUND");
    expect((await call(port, "DELETE", "/api/v1/collections/sess")).status).toBe(204);
  });

  it("sessions: bad input", async () => {
    const open = (body: unknown) => call(port, "POST", "/api/v1/sessions", { headers: JSON_HEADERS, body: typeof body === "string" ? body : JSON.stringify(body) });
    expectError(await open({ collection: "nope" }), 404, "ERR_NOT_FOUND");
    expectError(await open({ collection: 7 }), 400, "ERR_BAD_REQUEST", "collection");
    expectError(await open({ port: 70000 }), 400, "ERR_BAD_REQUEST", "port");
    expectError(await open({ port: 1.5 }), 400, "ERR_BAD_REQUEST", "port");
    expectError(await open({ colection: "default" }), 400, "ERR_BAD_REQUEST", "colection");
    expectError(await open("{nope"), 400, "ERR_BAD_REQUEST", "(body)");
    expectError(await call(port, "POST", "/api/v1/sessions", { headers: { "content-type": "text/plain" }, body: "{}" }), 415, "ERR_UNSUPPORTED_MEDIA_TYPE");
    expectError(await call(port, "GET", "/api/v1/sessions/s-unknown"), 404, "ERR_NOT_FOUND");
  });

  it("resources: by uri and by kind+page, with Content-Type, Content-Length and the Lathe-Context JSON (UTF-8)", async () => {
    const png = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 1, 2, 3]);
    const context = { mode: "parallel", browser: { name: "Chromium", version: "131" }, extra: { note: "café ☕" } };
    const r = await call(port, "POST", `/api/v1/resources?collection=default&uri=${encodeURIComponent("urn:view:https://example.com/page?q=1")}`, {
      headers: { "content-type": "image/png", "content-length": png.length, "lathe-context": Buffer.from(JSON.stringify(context), "utf8").toString("latin1") },
      body: png,
    });
    expect(r.status, r.text).toBe(201);
    expect(r.json).toEqual({ recordId: "<urn:uuid:00000000-0000-4000-8000-000000000001>", filename: "crawl-1.warc.gz", offset: 1234, length: png.length + 500, uri: "urn:view:https://example.com/page?q=1" });
    const got = facade.resources.at(-1)!;
    expect(got.bytes.equals(png)).toBe(true);
    expect(got.input).toEqual({ collection: "default", uri: "urn:view:https://example.com/page?q=1", contentType: "image/png", length: png.length, context });

    const byKind = await call(port, "POST", `/api/v1/resources?kind=text&page=${encodeURIComponent("https://example.com/")}`, { headers: { "content-type": "text/plain; charset=utf-8" }, body: "Hello" });
    expect(byKind.status).toBe(201);
    expect(byKind.json.uri).toBe("urn:text:https://example.com/");
    expect(facade.resources.at(-1)!.input).toEqual({ collection: "default", kind: "text", page: "https://example.com/", contentType: "text/plain; charset=utf-8", length: 5 });
  });

  it("resources: the body is streamed to the facade as it arrives", async () => {
    let firstChunk!: () => void;
    const gotFirst = new Promise<void>((r) => (firstChunk = r));
    facade.onChunk = (n) => {
      if (n === 1) firstChunk();
    };
    try {
      const result = new Promise<Res>((resolve, reject) => {
        const req = http.request({ host: "127.0.0.1", port, method: "POST", path: "/api/v1/resources?uri=urn:video:00001:https://example.com/", headers: { "content-type": "video/mp4", "transfer-encoding": "chunked" }, agent: false }, (res) => {
          const chunks: Buffer[] = [];
          res.on("data", (c: Buffer) => chunks.push(c));
          res.on("end", () => resolve({ status: res.statusCode!, headers: res.headers, text: Buffer.concat(chunks).toString(), json: JSON.parse(Buffer.concat(chunks).toString()) }));
        });
        req.on("error", reject);
        req.write(Buffer.alloc(1000, 1));
        // The second half is sent only once the facade has seen the first: a server that
        // buffered the whole body before calling the facade would hang here.
        gotFirst.then(() => req.end(Buffer.alloc(2000, 2)), reject);
      });
      const r = await result;
      expect(r.status).toBe(201);
      const got = facade.resources.at(-1)!;
      expect(got.bytes.length).toBe(3000);
      expect(got.chunks).toBeGreaterThanOrEqual(2);
      expect(got.input).not.toHaveProperty("length");
    } finally {
      facade.onChunk = null;
    }
  });

  it("resources: errors", async () => {
    const post = (query: string, headers: Record<string, string> = { "content-type": "image/png" }, body = "x") => call(port, "POST", `/api/v1/resources${query}`, { headers, body });
    expectError(await post("?uri=urn:view:https://e.com/", { "content-type": "image/png", "lathe-context": "{mode: parallel}" }), 400, "ERR_BAD_REQUEST", "Lathe-Context");
    expectError(await post(""), 400, "ERR_BAD_REQUEST", "uri");
    expectError(await post("?collection=default"), 400, "ERR_BAD_REQUEST", "uri");
    expectError(await post("?kind=view"), 400, "ERR_BAD_REQUEST", "page");
    expectError(await post("?page=https://e.com/"), 400, "ERR_BAD_REQUEST", "kind");
    expectError(await post("?uri=urn:view:https://e.com/&kind=view"), 400, "ERR_BAD_REQUEST", "kind");
    expectError(await post("?uri=urn:view:https://e.com/&uri=urn:x:y"), 400, "ERR_BAD_REQUEST", "uri");
    expectError(await post("?uri=urn:view:https://e.com/&colection=x"), 400, "ERR_BAD_REQUEST", "colection");
    expectError(await post("?uri=urn:view:https://e.com/", {}), 400, "ERR_BAD_REQUEST", "Content-Type");
    expectError(await post("?uri=https://e.com/shot.png"), 400, "ERR_BAD_REQUEST", "uri");
    expectError(await post("?collection=nope&uri=urn:view:https://e.com/"), 404, "ERR_NOT_FOUND");

    facade.failNextWrite = new ProxyError("ERR_WARC_WRITE", "cannot write WARC file crawl-1.warc.gz.open: ENOSPC");
    const full = await post("?uri=urn:view:https://e.com/");
    expectError(full, 503, "ERR_WARC_WRITE");
    expect(full.headers["retry-after"]).toBe("30");
    expect(full.json.error.message).toMatch(/ENOSPC/);

    // The facade refuses before reading a large body: the answer still arrives, the body is discarded.
    facade.failNextWrite = new InputError("kind", "nope");
    expectError(await call(port, "POST", "/api/v1/resources?uri=urn:x:y", { headers: { "content-type": "video/mp4" }, body: Buffer.alloc(4 * 1024 * 1024) }), 400, "ERR_BAD_REQUEST", "kind");
    expect(facade.resources.some((r) => r.input.uri === "https://e.com/shot.png")).toBe(false);
  });

  it("resources: a client that aborts its upload does not hurt the server", async () => {
    let received!: () => void;
    const gotData = new Promise<void>((r) => (received = r));
    facade.onChunk = () => received();
    const before = facade.resources.length;
    try {
      await new Promise<void>((resolve) => {
        const req = http.request({ host: "127.0.0.1", port, method: "POST", path: "/api/v1/resources?uri=urn:video:00002:https://example.com/", headers: { "content-type": "video/mp4", "content-length": 100000 }, agent: false });
        req.on("error", () => resolve());
        req.on("close", () => resolve());
        req.write(Buffer.alloc(1000));
        void gotData.then(() => req.destroy());
      });
      await new Promise((r) => setTimeout(r, 50));
      expect(facade.resources.length).toBe(before);
      expect((await call(port, "GET", "/api/v1/status")).status).toBe(200);
    } finally {
      facade.onChunk = null;
    }
  });

  it("status, metrics, ca.pem and openapi.json", async () => {
    const s = await call(port, "GET", "/api/v1/status");
    expect(s.status).toBe(200);
    expect(s.json.collections).toContain("default");
    const m = await call(port, "GET", "/metrics");
    expect(m.status).toBe(200);
    expect(m.headers["content-type"]).toBe("text/plain; version=0.0.4; charset=utf-8");
    expect(m.text).toContain('lathe_captures_total{collection="default"} 7\n');
    const ca = await call(port, "GET", "/ca.pem");
    expect(ca.status).toBe(200);
    expect(ca.headers["content-type"]).toBe("application/x-pem-file");
    expect(ca.text).toMatch(/^-----BEGIN CERTIFICATE-----\n/);
    const doc = await call(port, "GET", "/openapi.json");
    expect(doc.status).toBe(200);
    expect(doc.json.openapi).toBe("3.1.0");
    expect(doc.json.info.version).toBe("0.0.0-test");
    expect(doc.json.components.securitySchemes).toBeUndefined();
  });

  it("a facade failure is 500 with a JSON error and logged; ERR_DENIED other than not-found is 403", async () => {
    facade.statusError = new TypeError("boom");
    logged.length = 0;
    const r = await call(port, "GET", "/api/v1/status");
    expectError(r, 500, "ERR_INTERNAL");
    expect(r.json.error.message).not.toMatch(/boom/);
    expect(logged.some((l) => l.level === "error" && l.event === "control.error")).toBe(true);
    facade.statusError = new ProxyError("ERR_DENIED", "collection is read-only");
    expectError(await call(port, "GET", "/api/v1/status"), 403, "ERR_DENIED");
    facade.statusError = null;
  });

  it("refuses cross-site browser requests and, without a token, Hosts open to DNS rebinding", async () => {
    expectError(await call(port, "POST", "/api/v1/resources?uri=urn:x:y", { headers: { origin: "https://evil.example", "content-type": "text/plain" }, body: "x" }), 403, "ERR_FORBIDDEN");
    expectError(await call(port, "GET", "/api/v1/status", { headers: { "sec-fetch-site": "cross-site" } }), 403, "ERR_FORBIDDEN");
    expectError(await call(port, "GET", "/api/v1/status", { headers: { "sec-fetch-site": "same-site" } }), 403, "ERR_FORBIDDEN");
    expectError(await call(port, "GET", "/api/v1/status", { headers: { host: "rebind.evil.example:8001" } }), 403, "ERR_FORBIDDEN");
    expect((await call(port, "GET", "/api/v1/status", { headers: { host: `localhost:${port}`, origin: `http://localhost:${port}`, "sec-fetch-site": "same-origin" } })).status).toBe(200);
    expect((await call(port, "GET", "/api/v1/status", { headers: { host: `[::1]:${port}` } })).status).toBe(200);
  });

  it("a malformed request gets a JSON 400", async () => {
    const net = await import("node:net");
    const text = await new Promise<string>((resolve, reject) => {
      const s = net.connect(port, "127.0.0.1", () => s.write("GET / HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n"));
      let out = "";
      s.on("data", (d) => (out += d.toString()));
      s.on("end", () => resolve(out));
      s.on("error", reject);
    });
    expect(text).toMatch(/^HTTP\/1\.1 400 /);
    expect(text).toMatch(/"code":"ERR_BAD_REQUEST"/);
  });
});

describe("control API with a token", () => {
  const TOKEN = "s3cret-token-ÄÖ";
  let api: ControlServer;
  let facade: FakeFacade;
  let port: number;
  beforeAll(async () => ({ api, facade, port } = await start(TOKEN)));
  afterAll(async () => {
    await api.close();
    facade.collections.close();
  });
  const auth = { authorization: `Bearer ${Buffer.from(TOKEN, "utf8").toString("latin1")}` };

  it("401 with WWW-Authenticate: Bearer when the token is missing or wrong; the right one passes", async () => {
    const none = await call(port, "GET", "/api/v1/collections");
    expectError(none, 401, "ERR_UNAUTHORIZED");
    expect(none.headers["www-authenticate"]).toMatch(/^Bearer\b/);
    const wrong = await call(port, "GET", "/api/v1/collections", { headers: { authorization: "Bearer nope" } });
    expectError(wrong, 401, "ERR_UNAUTHORIZED");
    expect(wrong.headers["www-authenticate"]).toMatch(/^Bearer\b.*invalid_token/);
    expectError(await call(port, "GET", "/api/v1/collections", { headers: { authorization: `Basic ${Buffer.from("a:b").toString("base64")}` } }), 401, "ERR_UNAUTHORIZED");
    expectError(await call(port, "GET", "/api/v1/collections", { headers: { authorization: `Bearer ${TOKEN.slice(0, -1)}` } }), 401, "ERR_UNAUTHORIZED");
    const ok = await call(port, "GET", "/api/v1/collections", { headers: auth });
    expect(ok.status).toBe(200);
    expect((await call(port, "GET", "/api/v1/collections", { headers: { authorization: auth.authorization.replace("Bearer", "bearer") } })).status).toBe(200);
  });

  it("every route needs the token except GET /ca.pem and GET /openapi.json", async () => {
    for (const r of ROUTES) {
      const path = r.path.replace("{name}", "default").replace("{id}", "s-x");
      const res = await call(port, r.method, path, r.body?.kind === "json" ? { headers: JSON_HEADERS, body: "{}" } : {});
      if (r.path === "/ca.pem" || r.path === "/openapi.json") expect(res.status, path).toBe(200);
      else expectError(res, 401, "ERR_UNAUTHORIZED");
    }
    expectError(await call(port, "GET", "/metrics"), 401, "ERR_UNAUTHORIZED");
    expect((await call(port, "GET", "/metrics", { headers: auth })).status).toBe(200);
    // Unknown routes and other methods on public paths do not tell anything without the token.
    expectError(await call(port, "GET", "/api/v1/secret"), 401, "ERR_UNAUTHORIZED");
    expectError(await call(port, "GET", "/api/v1/secret", { headers: auth }), 404, "ERR_NOT_FOUND");
    expectError(await call(port, "GET", "/api/v1/collections/%E0%A4%A"), 401, "ERR_UNAUTHORIZED");
    expectError(await call(port, "POST", "/ca.pem"), 401, "ERR_UNAUTHORIZED");
    expectError(await call(port, "POST", "/ca.pem", { headers: auth }), 405, "ERR_METHOD_NOT_ALLOWED");
  });

  it("with a token, any Host is accepted (the token is the protection)", async () => {
    expect((await call(port, "GET", "/api/v1/status", { headers: { ...auth, host: "lathe.internal:8001" } })).status).toBe(200);
  });

  it("the document declares the bearer scheme and which routes are public", async () => {
    const doc = (await call(port, "GET", "/openapi.json")).json;
    expect(doc.components.securitySchemes.bearerAuth).toEqual({ type: "http", scheme: "bearer", description: expect.any(String) });
    expect(doc.security).toEqual([{ bearerAuth: [] }]);
    expect(doc.paths["/ca.pem"].get.security).toEqual([]);
    expect(doc.paths["/openapi.json"].get.security).toEqual([]);
    expect(doc.paths["/metrics"].get.security).toBeUndefined();
    expect(doc.paths["/metrics"].get.responses["401"]).toBeDefined();
    expect(doc.paths["/ca.pem"].get.responses["401"]).toBeUndefined();
  });
});

describe("close()", () => {
  it("ends idle keep-alive connections and resolves", async () => {
    const { api, facade, port } = await start(null);
    const agent = new http.Agent({ keepAlive: true });
    expect((await call(port, "GET", "/api/v1/status", { agent })).status).toBe(200);
    const t0 = Date.now();
    await api.close();
    expect(Date.now() - t0).toBeLessThan(1500);
    expect(api.server.listening).toBe(false);
    await api.close();
    agent.destroy();
    facade.collections.close();
  });
});

describe("the OpenAPI document matches the server", () => {
  const TOKEN = "walk-token";
  const auth = { authorization: `Bearer ${TOKEN}` };
  let api: ControlServer;
  let facade: FakeFacade;
  let port: number;
  let doc: any;
  const extra: ExtraRoute = {
    method: "GET",
    path: "/cdx",
    auth: true,
    operation: { operationId: "cdxQuery", summary: "CDX query", responses: { 200: { description: "CDXJ lines", content: { "text/plain": { schema: { type: "string" } } } } } },
    handle({ res, query }) {
      res.writeHead(200, { "content-type": "text/plain" });
      res.end(`${query.get("url") ?? ""}\n`);
    },
  };
  beforeAll(async () => {
    ({ api, facade, port } = await start(TOKEN, [extra]));
    doc = (await call(port, "GET", "/openapi.json")).json;
  });
  afterAll(async () => {
    await api.close();
    facade.collections.close();
  });

  type Probe = { path: string; headers?: Record<string, string | number>; body?: string | Buffer; expect: number };
  /** A request for every operation (happy path first), and a few errors each. */
  const probes = (): Record<string, Probe[]> => ({
    "get /api/v1/": [{ path: "/api/v1/", expect: 200 }],
    "get /api/v1": [{ path: "/api/v1", expect: 200 }],
    "get /api/v1/collections": [{ path: "/api/v1/collections", expect: 200 }],
    "post /api/v1/collections": [
      { path: "/api/v1/collections", headers: JSON_HEADERS, body: JSON.stringify({ name: "walk", warcVersion: "1.0" }), expect: 201 },
      { path: "/api/v1/collections", headers: JSON_HEADERS, body: JSON.stringify({ name: "walk2", gzip: "yes" }), expect: 400 },
      { path: "/api/v1/collections", headers: { "content-type": "text/csv" }, body: "a,b", expect: 415 },
      { path: "/api/v1/collections", headers: { ...JSON_HEADERS, "content-length": 2 * 1024 * 1024 }, body: Buffer.alloc(2 * 1024 * 1024, 0x20), expect: 413 },
    ],
    "get /api/v1/collections/{name}": [
      { path: "/api/v1/collections/walk", expect: 200 },
      { path: "/api/v1/collections/absent", expect: 404 },
    ],
    "patch /api/v1/collections/{name}": [
      { path: "/api/v1/collections/walk", headers: JSON_HEADERS, body: JSON.stringify({ dedup: { buckets: [{ name: "b1", mode: "ro" }] } }), expect: 200 },
      { path: "/api/v1/collections/walk", headers: JSON_HEADERS, body: JSON.stringify({ dedup: { buckets: [] } }), expect: 400 },
      { path: "/api/v1/collections/absent", headers: JSON_HEADERS, body: "{}", expect: 404 },
      { path: "/api/v1/collections/walk", headers: { "content-type": "text/plain" }, body: "{}", expect: 415 },
    ],
    "post /api/v1/sessions": [
      { path: "/api/v1/sessions", headers: JSON_HEADERS, body: JSON.stringify({ collection: "walk" }), expect: 201 },
      { path: "/api/v1/sessions", headers: JSON_HEADERS, body: JSON.stringify({ collection: "absent" }), expect: 404 },
      { path: "/api/v1/sessions", headers: JSON_HEADERS, body: JSON.stringify({ port: "8080" }), expect: 400 },
    ],
    "get /api/v1/sessions": [{ path: "/api/v1/sessions", expect: 200 }],
    "get /api/v1/sessions/{id}": [
      { path: "/api/v1/sessions/s-000000000001", expect: 200 },
      { path: "/api/v1/sessions/s-absent", expect: 404 },
    ],
    "post /api/v1/resources": [
      { path: "/api/v1/resources?collection=walk&uri=urn:thumbnail:https://example.com/", headers: { "content-type": "image/jpeg", "lathe-context": JSON.stringify({ mode: "replay" }) }, body: "jpeg", expect: 201 },
      { path: "/api/v1/resources?collection=walk&kind=view&page=https://example.com/", headers: { "content-type": "image/png" }, body: "png", expect: 201 },
      { path: "/api/v1/resources?collection=walk&uri=urn:x:y", headers: { "content-type": "image/png", "lathe-context": "not json" }, body: "png", expect: 400 },
      { path: "/api/v1/resources?collection=absent&uri=urn:x:y", headers: { "content-type": "image/png" }, body: "png", expect: 404 },
    ],
    "post /api/v1/sessions/{id}/close": [
      { path: "/api/v1/sessions/s-000000000001/close", expect: 200 },
      { path: "/api/v1/sessions/s-000000000001/close", expect: 404 },
    ],
    "get /api/v1/sessions/{id}/wacz": [
      { path: "/api/v1/sessions/s-000000000001/wacz", expect: 200 },
      { path: "/api/v1/sessions/s-absent/wacz", expect: 404 },
    ],
    "get /api/v1/collections/{name}/wacz": [
      { path: "/api/v1/collections/walk/wacz", expect: 200 },
      { path: "/api/v1/collections/absent/wacz", expect: 404 },
    ],
    "delete /api/v1/collections/{name}": [
      { path: "/api/v1/collections/walk", expect: 204 },
      { path: "/api/v1/collections/walk", expect: 404 },
      { path: "/api/v1/collections/default", expect: 400 },
    ],
    "get /api/v1/status": [{ path: "/api/v1/status", expect: 200 }],
    "get /api/v1/fleet": [{ path: "/api/v1/fleet", expect: 200 }],
    "get /api/v1/politeness": [{ path: "/api/v1/politeness", expect: 200 }],
    "get /metrics": [{ path: "/metrics", expect: 200 }],
    "get /ca.pem": [{ path: "/ca.pem", expect: 200 }],
    "get /openapi.json": [{ path: "/openapi.json", expect: 200 }],
    "get /cdx": [{ path: "/cdx?url=example.com", expect: 200 }],
  });

  const template = (path: string): string | undefined => {
    const p = path.split("?")[0]!;
    return Object.keys(doc.paths).find((t) => new RegExp(`^${t.replace(/\{[^}]+\}/g, "[^/]+")}$`).test(p));
  };

  it("is OpenAPI 3.1 with resolvable references and one operation per route in the table", () => {
    expect(doc.openapi).toBe("3.1.0");
    const refs = JSON.stringify(doc).match(/"#\/components\/schemas\/[^"]+"/g) ?? [];
    for (const r of refs) expect(doc.components.schemas[JSON.parse(r).split("/").pop()], r).toBeDefined();
    const ops = Object.entries(doc.paths).flatMap(([p, item]: [string, any]) => Object.keys(item).map((m) => `${m} ${p}`));
    expect(ops.sort()).toEqual([...ROUTES.map((r) => `${r.method.toLowerCase()} ${r.path}`), "get /cdx"].sort());
    const ids = Object.values(doc.paths).flatMap((item: any) => Object.values(item).map((op: any) => op.operationId));
    expect(new Set(ids).size).toBe(ids.length);
    for (const item of Object.values(doc.paths) as any[]) {
      for (const op of Object.values(item) as any[]) {
        for (const [status, resp] of Object.entries(op.responses) as Array<[string, any]>) {
          if (Number(status) >= 400) expect(resp.content["application/json"].schema).toEqual({ $ref: "#/components/schemas/Error" });
        }
      }
    }
  });

  it("every documented operation answers, with documented statuses, media types and bodies", async () => {
    const table = probes();
    const documented = Object.entries(doc.paths).flatMap(([p, item]: [string, any]) => Object.keys(item).map((m) => `${m} ${p}`));
    expect(Object.keys(table).sort()).toEqual(documented.sort());
    const statusesSeen = new Map<string, Set<number>>();
    // In table order (create before use, delete last).
    for (const [op, list] of Object.entries(table)) {
      const [method, tpl] = op.split(" ") as [string, string];
      for (const p of list) {
        const secured = doc.paths[tpl][method].security === undefined;
        const r = await call(port, method.toUpperCase(), p.path, { headers: { ...(secured ? auth : {}), ...p.headers }, ...(p.body !== undefined ? { body: p.body } : {}) });
        expect(r.status, `${op} ${p.path}: ${r.text}`).toBe(p.expect);
        checkAgainstDoc(doc, method, tpl, r);
        if (!statusesSeen.has(op)) statusesSeen.set(op, new Set());
        statusesSeen.get(op)!.add(r.status);
        // The same request without the token: 401 on secured operations, as documented.
        if (secured) {
          const unauth = await call(port, method.toUpperCase(), p.path, { headers: p.headers ?? {}, ...(p.body !== undefined ? { body: p.body } : {}) });
          expect(unauth.status).toBe(401);
          checkAgainstDoc(doc, method, tpl, unauth);
        }
        // An unknown query parameter: 400, as documented.
        const bad = await call(port, method.toUpperCase(), p.path + (p.path.includes("?") ? "&" : "?") + "zzz=1", { headers: { ...(secured ? auth : {}), ...p.headers }, ...(p.body !== undefined ? { body: p.body } : {}) });
        if (op !== "get /cdx") {
          expect(bad.status, `${op} with ?zzz`).toBe(400);
          checkAgainstDoc(doc, method, tpl, bad);
        }
      }
    }
    // A cross-site request on every operation: 403, as documented.
    for (const op of documented) {
      const [method, tpl] = op.split(" ") as [string, string];
      const r = await call(port, method.toUpperCase(), tpl.replace(/\{[^}]+\}/g, "x"), { headers: { ...auth, origin: "https://evil.example" } });
      expect(r.status, op).toBe(403);
      checkAgainstDoc(doc, method, tpl, r);
    }
    // Every documented success status was produced at least once.
    for (const [op] of Object.entries(table)) {
      const [method, tpl] = op.split(" ") as [string, string];
      const successes = Object.keys(doc.paths[tpl][method].responses).filter((s) => Number(s) < 400).map(Number);
      for (const s of successes) expect(statusesSeen.get(op)!.has(s), `${op} ${s}`).toBe(true);
    }
  });

  it("GET /api/v1/fleet while the shared store is unreachable: 503 ERR_SHARED_UNAVAILABLE with Retry-After, as documented", async () => {
    facade.fleetError = new ProxyError("ERR_SHARED_UNAVAILABLE", "the shared store (PostgreSQL db.example:5432/lathe) is unreachable: connect ECONNREFUSED");
    try {
      const r = await call(port, "GET", "/api/v1/fleet", { headers: auth });
      expectError(r, 503, "ERR_SHARED_UNAVAILABLE");
      expect(r.headers["retry-after"]).toBe("5");
      expect(r.json.error.message).toMatch(/PostgreSQL db\.example:5432\/lathe is unreachable|shared store .* is unreachable/);
      checkAgainstDoc(doc, "GET", "/api/v1/fleet", r);
    } finally {
      facade.fleetError = null;
    }
  });

  it("the server answers no operation that is not documented: other methods are 405 with Allow = the documented ones", async () => {
    const methods = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS", "TRACE"];
    for (const [tpl, item] of Object.entries(doc.paths) as Array<[string, any]>) {
      const path = tpl.replace(/\{[^}]+\}/g, "x");
      const allowed = Object.keys(item).map((m) => m.toUpperCase());
      for (const m of methods) {
        if (allowed.includes(m)) continue;
        const r = await call(port, m, path, { headers: auth });
        expect(r.status, `${m} ${path}`).toBe(405);
        expect(r.headers.allow?.split(", ").sort(), `${m} ${path}`).toEqual(allowed.sort());
        if (m !== "HEAD") expectError(r, 405, "ERR_METHOD_NOT_ALLOWED");
      }
    }
    // Paths near the documented ones are not routes.
    for (const tpl of Object.keys(doc.paths)) {
      const path = tpl.replace(/\{[^}]+\}/g, "x");
      for (const near of [`${path}/`, `${path}/more`, path.toUpperCase(), `${path}.bak`]) {
        if (template(near)) continue;
        expectError(await call(port, "GET", near, { headers: auth }), 404, "ERR_NOT_FOUND");
      }
    }
  });
});
