/**
 * Back-pressure from the WARC writer to the proxy (DESIGN.md): bytes of captures handed to the
 * archive pipeline and not yet written. Over BACKLOG_BYTES, new exchanges wait before going
 * upstream, so a writer slower than the traffic (gzip on a busy machine) slows the clients down
 * instead of piling captures up in memory without bound (found by `npm run soak`: 12,000
 * captures, 700 MB, waiting after a minute at full speed).
 */
const BACKLOG_BYTES = 64 * 1024 * 1024;

interface Backlog {
  bytes: number;
  waiters: Array<() => void>;
}

/** One backlog per archive pipeline (the proxy's main port and its session ports share it). */
const backlogs = new WeakMap<object, Backlog>();

function backlogOf(archiver: object): Backlog {
  let b = backlogs.get(archiver);
  if (!b) backlogs.set(archiver, (b = { bytes: 0, waiters: [] }));
  return b;
}

/**
 * Count `bytes` as waiting to be written; call the returned function once they are, or once
 * they wait for a writer that cannot write (capture.retryMaxBytes bounds those instead). A
 * second call does nothing.
 */
export function chargeBacklog(archiver: object, bytes: number): () => void {
  const b = backlogOf(archiver);
  b.bytes += bytes;
  let released = false;
  return () => {
    if (released) return;
    released = true;
    b.bytes -= bytes;
    if (b.bytes <= BACKLOG_BYTES && b.waiters.length) for (const w of b.waiters.splice(0)) w();
  };
}

/** Null when there is room now, else a promise resolved once the backlog is under its bound. */
export function whenBacklogRoom(archiver: object): Promise<void> | null {
  const b = backlogOf(archiver);
  return b.bytes <= BACKLOG_BYTES ? null : new Promise<void>((r) => b.waiters.push(r));
}
