/** The writer's failure state on its own: what a failure says, and the probe that clears it. */
import { mkdir, readdir, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { ProxyError } from "../../src/core/errors.js";
import { silentLogger } from "../../src/core/log.js";
import { WriterFailure } from "../../src/warc/writerFailure.js";
import { nodeWriterFs } from "../../src/warc/writerFs.js";
import { removeTempDirs, tempDir } from "./helpers.js";

afterAll(removeTempDirs);

const osError = (code: string) => Object.assign(new Error(`${code}: simulated`), { code });

describe("writer failure", () => {
  it("names the operation, the file and the cause, with a hint for known system errors", () => {
    const f = new WriterFailure(nodeWriterFs, "/warcs", silentLogger);
    expect(f.current).toBeNull();
    const err = f.fail("/warcs/a.warc.gz.open", osError("ENOSPC"), "fsync");
    expect(err).toMatchObject({ code: "ERR_WARC_WRITE", message: "cannot fsync WARC file /warcs/a.warc.gz.open: disk full (ENOSPC: simulated)" });
    expect(f.current).toBe(err);
    expect(f.fail("/warcs", osError("EWEIRD")).message).toBe("cannot write WARC file /warcs: EWEIRD: simulated");
    f.clear();
    expect(f.current).toBeNull();
  });

  it("wrap keeps a ProxyError as it is and does not fail the writer with it", () => {
    const f = new WriterFailure(nodeWriterFs, "/warcs", silentLogger);
    const spool = new ProxyError("ERR_SPOOL", "source shorter than its size");
    expect(f.wrap(spool, "/warcs/x")).toBe(spool);
    expect(f.current).toBeNull();
    expect(f.wrap(osError("EIO"), "/warcs/x", "rename")).toMatchObject({ message: "cannot rename WARC file /warcs/x: I/O error (EIO: simulated)" });
    expect(f.current).not.toBeNull();
  });

  it("probe: true at once while healthy; while failed, true only once the directory takes a write and an fsync", async () => {
    const parent = await tempDir();
    const dir = join(parent, "warcs");
    const f = new WriterFailure(nodeWriterFs, dir, silentLogger);
    expect(await f.probe()).toBe(true);
    expect(await readdir(parent)).toEqual([]); // healthy: nothing touched

    f.fail(dir, osError("ENOTDIR"), "create");
    await writeFile(dir, "in the way"); // the directory is a file
    expect(await f.probe()).toBe(false);
    expect(f.current).toMatchObject({ code: "ERR_WARC_WRITE" });

    await rm(dir);
    await mkdir(dir);
    expect(await f.probe()).toBe(true);
    expect(f.current).toBeNull();
    expect(await readdir(dir)).toEqual([]); // the probe file is gone
  });
});
