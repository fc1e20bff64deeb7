/**
 * Collections (decisions.md §4): a name, its WARC prefix, warcinfo metadata, dedup policy and
 * buckets, WARC version and compression. Each collection writes its own WARC series. They
 * persist across restarts in `lathe-state.sqlite3` in the WARC directory; `default` always
 * exists and takes its settings from the configuration.
 */
import { existsSync } from "node:fs";
import Database from "better-sqlite3";
import { ProxyError } from "../core/errors.js";
import type { Config } from "../config/schema.js";
import { POLITENESS_DEFAULTS, type PolitenessPolicy, applyPoliteness } from "../config/politeness.js";

/** The warcinfo metadata of a collection: the same fields as the `warcinfo` config section. */
export type WarcinfoFields = Config["warcinfo"];

export interface Collection {
  name: string;
  prefix: string;
  warcinfo: WarcinfoFields;
  dedup: { policy: Config["dedup"]["policy"]; buckets: Config["dedup"]["buckets"] };
  warcVersion: "1.0" | "1.1";
  /** `.warc.gz`, `.warc`, or both by payload (issue #24). */
  compression: Compression;
  /** `compression` is not `none` (the older switch, kept as an alias). */
  gzip: boolean;
  /** Per-host politeness, robots.txt and User-Agent rules (issue #27). */
  politeness: PolitenessPolicy;
}

export type Compression = Config["warc"]["compression"];
const COMPRESSIONS: readonly Compression[] = ["gzip", "none", "hybrid"];

/** What a client may send to create or update a collection (everything but the name optional). */
export interface CollectionInput {
  name?: string;
  prefix?: string;
  warcinfo?: Partial<WarcinfoFields>;
  dedup?: Partial<Collection["dedup"]>;
  warcVersion?: "1.0" | "1.1";
  compression?: Compression;
  /** Alias: true = `gzip`, false = `none`. */
  gzip?: boolean;
  politeness?: Partial<PolitenessPolicy>;
}

export const COLLECTION_NAME = /^[a-z0-9][a-z0-9._-]{0,63}$/;
/** The state database in the WARC directory: collections (here) and sessions (sessionLog.ts). */
export const STATE_FILE = "lathe-state.sqlite3";
const PREFIX = /^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/;
const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
const FIXED = new Set(["software", "format", "conformsTo", "hostname", "ip", "operator", "description", "isPartOf", "robots", "http-header-user-agent", "http-header-from"]);

/** A problem with a client's input: 400 naming the field. */
export class InputError extends ProxyError {
  readonly field: string;
  constructor(field: string, message: string) {
    super("ERR_CONFIG", `${field}: ${message}`);
    this.field = field;
  }
}

function checkText(field: string, v: unknown): string {
  if (typeof v !== "string") throw new InputError(field, `must be a string, got ${JSON.stringify(v)}`);
  if (/[\r\n]/.test(v)) throw new InputError(field, "must not contain CR or LF (warcinfo values are single lines)");
  return v;
}

/** Validate and apply `input` over `base` (pure); throws InputError naming the field. */
export function applyInput(base: Collection, input: CollectionInput): Collection {
  if (!input || typeof input !== "object" || Array.isArray(input)) throw new InputError("(body)", "must be a JSON object");
  const known = new Set(["name", "prefix", "warcinfo", "dedup", "warcVersion", "compression", "gzip", "politeness"]);
  for (const k of Object.keys(input)) if (!known.has(k)) throw new InputError(k, `unknown field; known: ${[...known].join(", ")}`);
  const out: Collection = structuredClone(base);
  if (input.prefix !== undefined) {
    if (typeof input.prefix !== "string" || !PREFIX.test(input.prefix)) throw new InputError("prefix", `must be a safe file name part (letters, digits, '.', '_', '-'), got ${JSON.stringify(input.prefix)}`);
    out.prefix = input.prefix;
  }
  if (input.warcinfo !== undefined) {
    const w = input.warcinfo as Record<string, unknown>;
    if (!w || typeof w !== "object" || Array.isArray(w)) throw new InputError("warcinfo", "must be an object");
    for (const [k, v] of Object.entries(w)) {
      if (k === "extra") {
        if (!v || typeof v !== "object" || Array.isArray(v)) throw new InputError("warcinfo.extra", "must be an object of name: value");
        const extra: Record<string, string> = {};
        for (const [n, x] of Object.entries(v as Record<string, unknown>)) {
          if (!TOKEN.test(n)) throw new InputError(`warcinfo.extra.${n}`, "field name must be an HTTP token");
          if (FIXED.has(n)) throw new InputError(`warcinfo.extra.${n}`, "repeats a fixed warcinfo field; set it directly");
          extra[n] = checkText(`warcinfo.extra.${n}`, x);
        }
        out.warcinfo.extra = extra;
      } else if (k in out.warcinfo) {
        (out.warcinfo as unknown as Record<string, string>)[k] = checkText(`warcinfo.${k}`, v);
      } else {
        throw new InputError(`warcinfo.${k}`, "unknown field; known: operator, description, isPartOf, robots, httpHeaderUserAgent, httpHeaderFrom, extra");
      }
    }
  }
  if (input.dedup !== undefined) {
    const d = input.dedup as Record<string, unknown>;
    if (!d || typeof d !== "object" || Array.isArray(d)) throw new InputError("dedup", "must be an object");
    for (const k of Object.keys(d)) if (k !== "policy" && k !== "buckets") throw new InputError(`dedup.${k}`, "unknown field; known: policy, buckets");
    if (d.policy !== undefined) {
      if (!["off", "digest", "url", "url-preferred"].includes(d.policy as string)) throw new InputError("dedup.policy", `must be off, digest, url or url-preferred, got ${JSON.stringify(d.policy)}`);
      out.dedup.policy = d.policy as Collection["dedup"]["policy"];
    }
    if (d.buckets !== undefined) {
      if (!Array.isArray(d.buckets) || d.buckets.length === 0) throw new InputError("dedup.buckets", 'must be a non-empty array of {"name", "mode": "rw" | "ro"}');
      out.dedup.buckets = d.buckets.map((b: unknown, i: number) => {
        const o = b as Record<string, unknown>;
        if (!o || typeof o.name !== "string" || !/^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/.test(o.name)) throw new InputError(`dedup.buckets[${i}].name`, "must be a bucket name");
        if (o.mode !== "rw" && o.mode !== "ro") throw new InputError(`dedup.buckets[${i}].mode`, 'must be "rw" or "ro"');
        return { name: o.name, mode: o.mode };
      });
    }
  }
  if (input.warcVersion !== undefined) {
    if (input.warcVersion !== "1.0" && input.warcVersion !== "1.1") throw new InputError("warcVersion", `must be "1.0" or "1.1", got ${JSON.stringify(input.warcVersion)}`);
    out.warcVersion = input.warcVersion;
  }
  applyCompression(out, input);
  if (input.politeness !== undefined) {
    out.politeness = applyPoliteness(out.politeness, input.politeness, "politeness", (field, why) => {
      throw new InputError(field, why);
    });
  }
  return out;
}

/** `compression`, or its alias `gzip`; both only when they agree. */
function applyCompression(out: Collection, input: CollectionInput): void {
  const { compression, gzip } = input;
  if (compression !== undefined && !COMPRESSIONS.includes(compression)) throw new InputError("compression", `must be "gzip", "none" or "hybrid", got ${JSON.stringify(compression)}`);
  if (gzip !== undefined && typeof gzip !== "boolean") throw new InputError("gzip", "must be true or false");
  if (compression !== undefined && gzip !== undefined && (compression === "none") === gzip) throw new InputError("gzip", `contradicts compression ${JSON.stringify(compression)} (gzip is its older alias: true = "gzip", false = "none")`);
  const next = compression ?? (gzip === undefined ? undefined : gzip ? "gzip" : "none");
  if (next === undefined) return;
  out.compression = next;
  out.gzip = next !== "none";
}

/** A collection stored before `compression` existed takes it from its `gzip`. */
export function withCompression(c: Collection): Collection {
  return c.compression ? c : { ...c, compression: c.gzip ? "gzip" : "none" };
}

export function defaultCollection(config: Config): Collection {
  return {
    name: "default",
    prefix: config.warc.prefix,
    warcinfo: structuredClone(config.warcinfo),
    dedup: { policy: config.dedup.policy, buckets: structuredClone(config.dedup.buckets) },
    warcVersion: config.warc.version,
    compression: config.warc.compression,
    gzip: config.warc.compression !== "none",
    politeness: structuredClone(config.politeness),
  };
}

/**
 * The collections a WARC directory's state database names (read-only, for commands that run
 * beside or after a lathe: `lathe wacz`); `default` always exists.
 */
export function storedCollectionNames(path: string): string[] {
  const names = new Set(["default"]);
  if (!existsSync(path)) return [...names];
  const db = new Database(path, { readonly: true, fileMustExist: true });
  try {
    const has = db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'collections'").get();
    if (has) for (const r of db.prepare("SELECT name FROM collections").all() as Array<{ name: string }>) names.add(r.name);
  } finally {
    db.close();
  }
  return [...names].sort();
}

export type CollectionEvent = { kind: "created" | "updated" | "deleted"; before: Collection | null; after: Collection | null };

/** The registry: in memory, written through to SQLite. */
export class CollectionRegistry {
  readonly #db: Database.Database;
  readonly #byName = new Map<string, Collection>();
  readonly #listeners: Array<(e: CollectionEvent) => void> = [];
  readonly #defaults: Collection;

  constructor(path: string, config: Config) {
    try {
      this.#db = new Database(path);
      this.#db.pragma("journal_mode = WAL");
      this.#db.exec("CREATE TABLE IF NOT EXISTS collections(name TEXT PRIMARY KEY, json TEXT NOT NULL) WITHOUT ROWID");
    } catch (e) {
      throw new ProxyError("ERR_CONFIG", `cannot open lathe's state database ${path}: ${(e as Error).message}; move the file away if it is not lathe's`, e);
    }
    this.#defaults = defaultCollection(config);
    for (const row of this.#db.prepare("SELECT name, json FROM collections").all() as Array<{ name: string; json: string }>) {
      const stored = withCompression(JSON.parse(row.json) as Collection);
      // Collections saved before politeness existed have none: the defaults (off).
      stored.politeness = { ...POLITENESS_DEFAULTS, ...stored.politeness, userAgent: { ...POLITENESS_DEFAULTS.userAgent, ...stored.politeness?.userAgent } };
      this.#byName.set(row.name, stored);
    }
    // `default` follows the configuration at every start (its settings come from proxy.config.json).
    if (!this.#byName.has("default")) this.#byName.set("default", this.#defaults);
    else this.#byName.set("default", { ...this.#byName.get("default")!, prefix: this.#defaults.prefix, politeness: this.#defaults.politeness });
  }

  onChange(f: (e: CollectionEvent) => void): void {
    this.#listeners.push(f);
  }

  get(name: string): Collection | null {
    return this.#byName.get(name) ?? null;
  }

  list(): Collection[] {
    return [...this.#byName.values()].sort((a, b) => a.name.localeCompare(b.name));
  }

  create(input: CollectionInput): Collection {
    const name = input?.name;
    if (typeof name !== "string" || !COLLECTION_NAME.test(name)) throw new InputError("name", `must match ${COLLECTION_NAME}, got ${JSON.stringify(name)}`);
    if (this.#byName.has(name)) throw new InputError("name", `collection ${JSON.stringify(name)} exists already`);
    const base: Collection = { ...structuredClone(this.#defaults), name, prefix: name, warcinfo: structuredClone(this.#defaults.warcinfo) };
    const c = applyInput(base, { ...input, name: undefined });
    this.#checkPrefix(c);
    this.#save(c);
    this.#emit({ kind: "created", before: null, after: c });
    return c;
  }

  update(name: string, input: CollectionInput): Collection {
    const before = this.#byName.get(name);
    if (!before) throw new ProxyError("ERR_DENIED", `no collection ${JSON.stringify(name)}`);
    if (input?.name !== undefined && input.name !== name) throw new InputError("name", "a collection cannot be renamed");
    if (name === "default" && input?.prefix !== undefined && input.prefix !== before.prefix) throw new InputError("prefix", "the default collection's prefix comes from warc.prefix in the configuration");
    const after = applyInput(before, { ...input, name: undefined });
    this.#checkPrefix(after);
    this.#save(after);
    this.#emit({ kind: "updated", before, after });
    return after;
  }

  delete(name: string): void {
    if (name === "default") throw new InputError("name", "the default collection cannot be deleted");
    const before = this.#byName.get(name);
    if (!before) throw new ProxyError("ERR_DENIED", `no collection ${JSON.stringify(name)}`);
    this.#db.prepare("DELETE FROM collections WHERE name = ?").run(name);
    this.#byName.delete(name);
    this.#emit({ kind: "deleted", before, after: null });
  }

  close(): void {
    this.#db.close();
  }

  #checkPrefix(c: Collection): void {
    for (const o of this.#byName.values()) {
      if (o.name !== c.name && o.prefix === c.prefix) throw new InputError("prefix", `prefix ${JSON.stringify(c.prefix)} is used by collection ${JSON.stringify(o.name)}`);
    }
  }

  #save(c: Collection): void {
    this.#db.prepare("INSERT INTO collections(name, json) VALUES (?, ?) ON CONFLICT(name) DO UPDATE SET json = excluded.json").run(c.name, JSON.stringify(c));
    this.#byName.set(c.name, c);
  }

  #emit(e: CollectionEvent): void {
    for (const f of this.#listeners) f(e);
  }
}
