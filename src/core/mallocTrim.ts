import { createRequire } from "node:module";

/**
 * Periodic glibc malloc_trim(0) through lathe's native helper (native/malloc-trim; why: its .c
 * file). A long-running `lathe serve` calls it every few seconds so memory Node has freed goes
 * back to the kernel instead of staying in fragmented malloc arenas (`npm run soak` measures it).
 */
export interface MallocTrimmer {
  /** Give freed heap pages back now; true when some memory was released. */
  trim(): boolean;
}

let cached: MallocTrimmer | null | undefined;

/**
 * The helper, or null where it is not built or there is nothing to call (not glibc). Why it is
 * missing when it should be there (not built) is in `mallocTrimMissing`.
 */
export function mallocTrimmer(): MallocTrimmer | null {
  if (cached !== undefined) return cached;
  try {
    const req = createRequire(import.meta.url);
    const m = req("../../native/malloc-trim/build/Release/malloc_trim.node") as { trim(): boolean; supported(): boolean };
    cached = m.supported() ? { trim: () => m.trim() } : null;
    mallocTrimMissing = null; // built, but not glibc: nothing to trim, nothing missing
  } catch (e) {
    cached = null;
    mallocTrimMissing = `native/malloc-trim is not built (${(e as Error).message.split("\n")[0]}); run \`npm run build\``;
  }
  return cached;
}

export let mallocTrimMissing: string | null = null;

/** Trim every `intervalMs` (the timer never keeps the process alive). Returns the stop function. */
export function startMallocTrimming(intervalMs: number, trimmer: MallocTrimmer | null = mallocTrimmer()): () => void {
  if (!trimmer || intervalMs <= 0) return () => undefined;
  const t = setInterval(() => trimmer.trim(), intervalMs);
  t.unref();
  return () => clearInterval(t);
}
