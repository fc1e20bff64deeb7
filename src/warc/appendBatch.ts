/**
 * Which queued groups join an append: the ones right behind it that are compressed for the same
 * file, held in memory and fit in it without a rollover, within a batch's bounds (same order,
 * same offsets as one by one).
 */
import { inMemory, type EncodedGroup } from "./groupEncoder.js";

/** One append takes at most this many queued groups (in-memory members only) … */
export const MAX_BATCH_GROUPS = 256;
/** … and at most this many bytes. */
export const MAX_BATCH_BYTES = 4 * 1024 * 1024;

/**
 * The rule for the groups after `first`, going into the file `file` (its size before `first`):
 * each accepted group counts towards the limits of the next.
 */
export function joinsBatch(file: { size: number; warcinfoId: string }, first: EncodedGroup, maxFileBytes: number): (next: EncodedGroup) => boolean {
  // Groups held in memory go to the file in one pwritev(2); a streamed member goes alone.
  if (!inMemory(first)) return () => false;
  let size = file.size + first.size;
  let bytes = first.size;
  let groups = 1;
  return (next) => {
    if (next.warcinfoId !== file.warcinfoId || !inMemory(next)) return false;
    if (size + next.size > maxFileBytes || bytes + next.size > MAX_BATCH_BYTES || groups >= MAX_BATCH_GROUPS) return false;
    size += next.size;
    bytes += next.size;
    groups++;
    return true;
  };
}
