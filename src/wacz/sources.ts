/**
 * What a collection or a recording session packages: its closed WARC files in lathe's WARC
 * directory, a title, and where its pages come from.
 *
 * - A collection's files are those `lathe-cdx/files.tsv` attributes to it (the CDX service
 *   writes a line as each file opens, index/service.ts). Files still being written (`.open`) are
 *   left out and reported: the package holds what was closed when it was made.
 * - A session's files are those its summary lists (sessionLog.ts); a session still open is
 *   refused (its files are not final), as is one lathe stopped before closing (its files were
 *   never written down). Its pages are those captured while it was open.
 */
import { existsSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { COLLECTION_NAME, STATE_FILE, storedCollectionNames } from "../archive/collections.js";
import { SessionLog } from "../archive/sessionLog.js";
import type { SessionSummary } from "../archive/sessions.js";
import type { PageSource } from "./pages.js";
import { WaczError } from "./waczError.js";

export interface PackageSource {
  /** Paths of the closed WARC files. */
  files: string[];
  title: string;
  pages: PageSource;
  /** Files still being written, left out (names in the WARC directory). */
  leftOut: string[];
  /** lathe wrote the files, with their indexes beside them (WaczSpec.ownIndexes). */
  ownIndexes: boolean;
}

/** `lathe-cdx/files.tsv`: `WARC file name TAB collection`, one line per file. */
function filesOfCollection(warcDir: string, name: string): string[] {
  let text = "";
  try {
    text = readFileSync(join(warcDir, "lathe-cdx", "files.tsv"), "utf8");
  } catch {
    return [];
  }
  const names = new Set<string>();
  for (const line of text.split("\n")) {
    const [file, coll] = line.split("\t");
    if (file && coll === name) names.add(file);
  }
  return [...names];
}

/** The closed files of a collection known to exist (the control API checks that itself). */
export function collectionSource(warcDir: string, name: string): PackageSource {
  const files: string[] = [];
  const leftOut: string[] = [];
  for (const f of filesOfCollection(warcDir, name)) {
    if (existsSync(join(warcDir, f))) files.push(join(warcDir, f));
    else if (existsSync(join(warcDir, `${f}.open`))) leftOut.push(`${f}.open`);
  }
  if (files.length === 0) {
    const why = leftOut.length > 0 ? `its ${leftOut.length} file(s) are still being written; they close at rollover (warc.idleRolloverMs, warc.maxFileBytes), when its sessions close, or when lathe stops` : `lathe has recorded no WARC file for it in ${warcDir}`;
    throw new WaczError("conflict", `collection ${JSON.stringify(name)} has no closed WARC file to package: ${why}`);
  }
  return { files, title: name, pages: { kind: "detect" }, leftOut, ownIndexes: true };
}

/** A session's package, from its last summary. */
export function sessionSource(warcDir: string, s: SessionSummary): PackageSource {
  if (s.closedAt === null) {
    throw new WaczError(
      "conflict",
      `session ${s.id} is still open (or lathe stopped before closing it, and then which files hold it was never written down): close it first (POST /api/v1/sessions/${s.id}/close), or package its collection ${JSON.stringify(s.collection)}`,
    );
  }
  if (s.files.length === 0) throw new WaczError("conflict", `session ${s.id} recorded nothing: there is no WARC file to package`);
  const files = s.files.map((f) => join(warcDir, f));
  const missing = files.find((f) => !existsSync(f));
  if (missing) throw new WaczError("not-found", `session ${s.id}'s file ${missing} is missing`);
  return { files, title: `session ${s.id} (collection ${s.collection})`, pages: { kind: "detect", from: new Date(s.createdAt), to: new Date(s.closedAt) }, leftOut: [], ownIndexes: true };
}

function checkWarcDir(dir: string): void {
  let isDir = false;
  try {
    isDir = statSync(dir).isDirectory();
  } catch {
    // reported below
  }
  if (!isDir) throw new WaczError("not-found", `no WARC directory ${dir} (give lathe's WARC directory with --dir)`);
}

/** `lathe wacz --collection NAME --dir DIR`: beside a running lathe, or after it. */
export function collectionSourceIn(dir: string, name: string): PackageSource {
  checkWarcDir(dir);
  if (!COLLECTION_NAME.test(name)) throw new WaczError("not-found", `no collection ${JSON.stringify(name)}: collection names are lower-case letters, digits, '.', '_' and '-'`);
  const known = storedCollectionNames(join(dir, STATE_FILE));
  if (!known.includes(name)) throw new WaczError("not-found", `no collection ${JSON.stringify(name)} in ${dir} (collections: ${known.join(", ")})`);
  return collectionSource(dir, name);
}

/** `lathe wacz --session ID --dir DIR`. */
export function sessionSourceIn(dir: string, id: string): PackageSource {
  checkWarcDir(dir);
  const s = new SessionLog(join(dir, STATE_FILE)).get(id);
  if (!s) throw new WaczError("not-found", `no session ${JSON.stringify(id)} in ${dir} (sessions are remembered from this version of lathe on)`);
  return sessionSource(dir, s);
}
