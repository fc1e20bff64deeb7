/**
 * `datapackage.json` and `datapackage-digest.json` of a WACZ (WACZ 1.1.1; Frictionless Data
 * Package). Pure. Every hash has the same length (`sha256:` + 64 hex digits), so the manifest's
 * size is known before the hashes are: the packager announces the whole archive's length first.
 */
import type { Sha256 } from "./entryCopy.js";

export const WACZ_VERSION = "1.1.1";

export interface Resource {
  name: string;
  path: string;
  hash: Sha256;
  bytes: number;
}

export interface PackageMeta {
  title: string;
  description?: string;
  /** RFC 3339. */
  created: string;
  /** e.g. `lathe 0.1.0`. */
  software: string;
}

/** Stands in for a hash not computed yet: same length as any real one. */
export const HASH_PLACEHOLDER: Sha256 = "sha256:" + "0".repeat(64);

export function datapackageJson(meta: PackageMeta, resources: Resource[]): Buffer {
  const doc = {
    profile: "data-package",
    resources: resources.map((r) => ({ name: r.name, path: r.path, hash: r.hash, bytes: r.bytes })),
    wacz_version: WACZ_VERSION,
    title: meta.title,
    ...(meta.description !== undefined ? { description: meta.description } : {}),
    created: meta.created,
    software: meta.software,
  };
  return Buffer.from(JSON.stringify(doc, null, 2) + "\n", "utf8");
}

export function datapackageDigestJson(datapackageHash: Sha256): Buffer {
  return Buffer.from(JSON.stringify({ path: "datapackage.json", hash: datapackageHash }, null, 2) + "\n", "utf8");
}
