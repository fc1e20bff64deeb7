import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import type { Config } from "../config/schema.js";
import { resolveConfig } from "../config/validate.js";
import { ProxyError, systemCode } from "../core/errors.js";

export const DEFAULT_CONFIG_FILE = "./proxy.config.json";

/**
 * Defaults ← config file ← flags. The default file may be absent (then the embedded defaults
 * apply); a file named explicitly must exist. Errors name the file and what was wrong.
 */
export function loadConfig(file: string | undefined, overrides: unknown): Config {
  const path = resolve(file ?? DEFAULT_CONFIG_FILE);
  let fromFile: unknown;
  try {
    const text = readFileSync(path, "utf8");
    try {
      fromFile = JSON.parse(text);
    } catch (e) {
      throw new ProxyError("ERR_CONFIG", `config file ${path} is not valid JSON: ${(e as Error).message}`, e);
    }
  } catch (e) {
    if (e instanceof ProxyError) throw e;
    if (systemCode(e) === "ENOENT" && file === undefined) {
      fromFile = undefined;
    } else {
      throw new ProxyError("ERR_CONFIG", `cannot read config file ${path}: ${(e as Error).message}`, e);
    }
  }
  try {
    return resolveConfig(fromFile, overrides);
  } catch (e) {
    if (e instanceof ProxyError) throw new ProxyError("ERR_CONFIG", `${path}: ${e.message}`, e);
    throw e;
  }
}
