import { open } from "node:fs/promises";

/**
 * fsync a directory, so a file created, renamed or deleted in it survives a crash
 * (the file's own fsync does not cover its directory entry).
 */
export async function syncDir(dir: string): Promise<void> {
  const h = await open(dir, "r");
  try {
    await h.sync();
  } finally {
    await h.close();
  }
}
