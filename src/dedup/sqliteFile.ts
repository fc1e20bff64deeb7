/**
 * The dedup database as a file the operator owns: refuse one that is not SQLite before SQLite
 * sees it (nothing may write to it), and turn SQLite's error codes into a message that names the
 * file and what to do. lathe never resets, recreates or repairs a file it does not recognise.
 */
import { closeSync, mkdirSync, openSync, readSync, statSync } from "node:fs";
import { dirname } from "node:path";
import { errorMessage, ProxyError, systemCode } from "../core/errors.js";

const SQLITE_MAGIC = "SQLite format 3\0";

/** What to tell the operator about a database problem, by SQLite error code. */
export function describe(path: string, e: unknown): ProxyError {
  const code = systemCode(e) ?? "";
  const why = errorMessage(e);
  if (code === "SQLITE_NOTADB") {
    return new ProxyError("ERR_CONFIG", `dedup database ${path} is not a SQLite database (${why}); lathe leaves it untouched: move it away or set dedup.dbPath to another file`, e);
  }
  if (code.startsWith("SQLITE_CORRUPT")) {
    return new ProxyError(
      "ERR_CONFIG",
      `dedup database ${path} is damaged (${why}); lathe does not repair or replace it: restore it from a backup, or move it away and rebuild it with \`lathe index --dedup-db ${path} WARC...\``,
      e,
    );
  }
  if (code.startsWith("SQLITE_CANTOPEN") || code.startsWith("SQLITE_PERM") || code.startsWith("SQLITE_READONLY")) {
    return new ProxyError("ERR_CONFIG", `cannot open dedup database ${path} for ${code.startsWith("SQLITE_READONLY") ? "writing" : "reading"} (${why}): check that it exists and its permissions`, e);
  }
  if (code === "SQLITE_FULL") return new ProxyError("ERR_CONFIG", `dedup database ${path}: the disk is full (${why})`, e);
  if (code.startsWith("SQLITE_BUSY")) return new ProxyError("ERR_CONFIG", `dedup database ${path} stayed locked by another process for 5 s (${why})`, e);
  return new ProxyError("ERR_INTERNAL", `dedup database ${path}: ${why}${code ? ` (${code})` : ""}`, e);
}

/** The first 16 bytes of a non-empty file, or null when it does not exist or is empty. */
function header(path: string): Buffer | null {
  let fd: number | undefined;
  try {
    fd = openSync(path, "r");
    const buf = Buffer.alloc(16);
    const n = readSync(fd, buf, 0, 16, 0);
    return n === 0 ? null : buf.subarray(0, n);
  } catch (e) {
    if (systemCode(e) === "ENOENT") return null;
    throw new ProxyError("ERR_CONFIG", `cannot read dedup database ${path}: ${errorMessage(e)}`, e);
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

/**
 * Before SQLite opens `file` (an absolute path): create its directory unless read-only, and
 * refuse a file that is not SQLite, or (read-only) one that is missing or empty.
 */
export function checkFile(file: string, readonly: boolean): void {
  if (!readonly) {
    try {
      mkdirSync(dirname(file), { recursive: true });
    } catch (e) {
      throw new ProxyError("ERR_CONFIG", `cannot create the directory of dedup database ${file}: ${errorMessage(e)}`, e);
    }
  }
  // Refuse a non-SQLite file before SQLite sees it: nothing may write to it.
  const head = header(file);
  if (head && head.toString("latin1") !== SQLITE_MAGIC) {
    let size = "";
    try {
      size = ` (${statSync(file).size} bytes)`;
    } catch {}
    throw new ProxyError("ERR_CONFIG", `dedup database ${file}${size} is not a SQLite database; lathe leaves it untouched: move it away or set dedup.dbPath to another file`);
  }
  if (!head && readonly) throw new ProxyError("ERR_CONFIG", `dedup database ${file} does not exist or is empty (opened read-only, so lathe will not create it)`);
}
