/**
 * What every replay test starts from: the replay site recorded by `lathe record` (recording.ts),
 * the live site stopped with tripwires on its ports, a replay server over the work directory and
 * ReplayWeb.page in Chromium. `close()` undoes it all and removes the work directory.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { OriginCerts } from "../helpers/certs.js";
import { holdPorts, launchReplayBrowser, startReplayServer, type ReplayBrowser, type ReplayServer, type Tripwire } from "../helpers/replay.js";
import { recordSite, type Recording } from "./recording.js";
import { startReplaySite, type Site } from "./site.js";

export interface RecordedReplay {
  work: string;
  site: Site;
  rec: Recording;
  server: ReplayServer;
  rb: ReplayBrowser;
  /** The tripwires on the live site's ports (their `hits`: connections that should not be). */
  held: Tripwire[];
  close(): Promise<void>;
}

/** `config`: settings for the recording lathe (e.g. `warc`). */
export async function startRecordedReplay(certs: OriginCerts, name: string, config: Record<string, unknown> = {}): Promise<RecordedReplay> {
  const work = mkdtempSync(join(tmpdir(), `${name}-`));
  let held: Tripwire[] = [];
  let server: ReplayServer | undefined;
  let rb: ReplayBrowser | undefined;
  const close = async () => {
    await rb?.close();
    await server?.close();
    await Promise.all(held.map((t) => t.close()));
    rmSync(work, { recursive: true, force: true });
  };
  try {
    const site = await startReplaySite(certs);
    const rec = await recordSite(site, certs, join(work, "rec"), config);
    // The live site is gone before anything replays; tripwires hold its ports.
    await site.close();
    held = await holdPorts(site.ports);
    server = await startReplayServer(work);
    rb = await launchReplayBrowser(server);
    return { work, site, rec, server, rb, held, close };
  } catch (e) {
    await close();
    throw e;
  }
}
