/**
 * Real small file systems for the disk-full tests: a tmpfs that fills up, remounted read-only and
 * back. Mounting needs root (CI runs as root); the tests skip themselves when it is refused.
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/** A fresh tmpfs of `bytes`, or null when it cannot be mounted (not root). */
export function mountTmpfs(bytes: number, at?: string): string | null {
  const dir = at ?? mkdtempSync(join(tmpdir(), "lathe-tmpfs-"));
  try {
    execFileSync("mount", ["-t", "tmpfs", "-o", `size=${bytes}`, "tmpfs", dir], { stdio: "ignore" });
    return dir;
  } catch {
    return null;
  }
}

export function unmount(dir: string): void {
  execFileSync("umount", ["-l", dir], { stdio: "ignore" });
}

/**
 * Make `dir` read-only for every file opened from now on: a read-only bind mount of it over
 * itself. (A remount of the whole file system is refused while any file is open for writing
 * there, and lathe keeps its state database in the WARC directory.) `writable` undoes it.
 */
export function readOnly(dir: string): void {
  execFileSync("mount", ["--bind", dir, dir], { stdio: "ignore" });
  execFileSync("mount", ["-o", "remount,bind,ro", dir], { stdio: "ignore" });
}

export function writable(dir: string): void {
  execFileSync("umount", [dir], { stdio: "ignore" });
}

/** Fill the file system of `dir` until at most `leave` bytes are free (a file named `filler`). */
export function fill(dir: string, leave: number): string {
  const path = join(dir, "filler");
  const free = Number(execFileSync("df", ["-B1", "--output=avail", dir]).toString().trim().split("\n").pop());
  writeFileSync(path, Buffer.alloc(Math.max(0, free - leave)));
  return path;
}
