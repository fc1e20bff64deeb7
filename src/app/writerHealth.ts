/** Whether captures can be written right now, and the probe that finds out when they can again. */
import type { ProxyError } from "../core/errors.js";
import type { WriterRegistry } from "../archive/writers.js";
import type { WarcWriter } from "../warc/types.js";

/**
 * The first failed writer's error, or null when all are healthy. While a writer is failed,
 * requests get 503; a probe at most every second finds out when writing works again, so
 * recording resumes without a restart.
 */
export function writerFailureProbe(writers: WriterRegistry): () => ProxyError | null {
  let probing = false;
  let lastProbe = 0;
  const probeSoon = (w: WarcWriter) => {
    if (probing || Date.now() - lastProbe < 1000) return;
    probing = true;
    lastProbe = Date.now();
    w.probe().finally(() => {
      probing = false;
    });
  };
  return () => {
    for (const w of writers.all()) {
      const f = w.state().failed;
      if (f) {
        probeSoon(w);
        return f;
      }
    }
    return null;
  };
}
