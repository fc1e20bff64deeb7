/**
 * WARC file names from a template (warc-files.md §1). Pure: the caller supplies the instant,
 * serial, host and token.
 */
import { ProxyError } from "../core/errors.js";
import { timestamp17 } from "./date.js";

export const DEFAULT_TEMPLATE = "{prefix}-{timestamp17}-{serial}-{hostname}";
export const TEMPLATE_FIELDS = [
  "prefix",
  "timestamp17",
  "timestamp14",
  "serial",
  "hostname",
  "shorthostname",
  "pid",
  "port",
  "randomtoken",
] as const;
export type TemplateField = (typeof TEMPLATE_FIELDS)[number];

export interface NameParts {
  prefix: string;
  /** The instant the file is opened, µs since the epoch. */
  openedMicros: bigint;
  serial: number;
  /** Raw `os.hostname()`; sanitized here. */
  hostname: string;
  pid: number;
  port?: number;
  randomtoken: string;
}

/** The field names a template uses, in order (with repeats). */
export function templateFields(template: string): string[] {
  return [...template.matchAll(/\{([^}]*)\}/g)].map((m) => m[1]!);
}

/** Why a template is unusable, or null. Config validation has its own copy of these rules. */
export function templateProblem(template: string, havePort = true): string | null {
  const names = templateFields(template);
  const unknown = names.find((n) => !(TEMPLATE_FIELDS as readonly string[]).includes(n));
  if (unknown !== undefined) return `unknown field {${unknown}}`;
  if (!names.includes("serial")) return "must contain {serial}, so that file names never collide";
  if (/[/\\]/.test(template)) return "must not contain a path separator";
  if (!havePort && names.includes("port")) return "uses {port} but no port is known";
  return null;
}

/** Characters outside [A-Za-z0-9.-] become '-', so a host name is always a safe file name part. */
export function sanitizeHostname(h: string): string {
  return h.replace(/[^A-Za-z0-9.-]/g, "-");
}

/** 5 digits, zero-padded; wider past 99999 (never truncated, so names stay unique). */
export function formatSerial(n: number): string {
  return String(n).padStart(5, "0");
}

/** 8 chars [a-z0-9] from random bytes (drawn once per writer). */
export function randomToken(bytes: Uint8Array): string {
  const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789";
  let s = "";
  for (let i = 0; i < 8; i++) s += alphabet[bytes[i % bytes.length]! % alphabet.length];
  return s;
}

export function expandTemplate(template: string, p: NameParts): string {
  const host = sanitizeHostname(p.hostname);
  const ts17 = timestamp17(p.openedMicros);
  const values: Record<TemplateField, () => string> = {
    prefix: () => p.prefix,
    timestamp17: () => ts17,
    timestamp14: () => ts17.slice(0, 14),
    serial: () => formatSerial(p.serial),
    hostname: () => host,
    shorthostname: () => host.split(".")[0]!,
    pid: () => String(p.pid),
    port: () => {
      if (p.port === undefined) throw new ProxyError("ERR_CONFIG", "warc.filenameTemplate: uses {port} but no port is known");
      return String(p.port);
    },
    randomtoken: () => p.randomtoken,
  };
  return template.replace(/\{([^}]*)\}/g, (_, name: string) => {
    const f = values[name as TemplateField];
    if (!f) throw new ProxyError("ERR_CONFIG", `warc.filenameTemplate: unknown field {${name}}`);
    return f();
  });
}

/** Final file name: the expanded template plus `.warc.gz` or `.warc`. */
export function warcFileName(template: string, p: NameParts, gzip: boolean): string {
  return expandTemplate(template, p) + (gzip ? ".warc.gz" : ".warc");
}
