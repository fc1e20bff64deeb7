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

export interface MallocTrimHelper {
  /** null where the helper is not built or there is nothing to call (not glibc). */
  trimmer: MallocTrimmer | null;
  /** Why it is missing when it should be there (not built); null otherwise. */
  missing: string | null;
}

let cached: MallocTrimHelper | undefined;

/** The native helper, loaded once. */
export function mallocTrimHelper(): MallocTrimHelper {
  if (cached) return cached;
  try {
    const req = createRequire(import.meta.url);
    const m = req("../../native/malloc-trim/build/Release/malloc_trim.node") as { trim(): boolean; supported(): boolean };
    // Built, but not glibc: nothing to trim, nothing missing.
    cached = { trimmer: m.supported() ? { trim: () => m.trim() } : null, missing: null };
  } catch (e) {
    cached = { trimmer: null, missing: `native/malloc-trim is not built (${(e as Error).message.split("\n")[0]}); run \`npm run build\`` };
  }
  return cached;
}

/** Trim every `intervalMs` (the timer never keeps the process alive). Returns the stop function. */
export function startMallocTrimming(intervalMs: number, trimmer: MallocTrimmer | null): () => void {
  if (!trimmer || intervalMs <= 0) return () => undefined;
  const t = setInterval(() => trimmer.trim(), intervalMs);
  t.unref();
  return () => clearInterval(t);
}
