import { randomBytes } from "node:crypto";
import { readdir } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { createHybridWriter } from "../../src/warc/hybridWriter.js";
import type { SeriesKind } from "../../src/warc/routing.js";
import type { RecordDraft } from "../../src/warc/types.js";
import { captureGroup, makeDraft, removeTempDirs, tempDir, writerOpts } from "./helpers.js";
import { readWarc } from "../helpers/warcs.js";

afterEach(removeTempDirs);

/** A response + request group whose response has this Content-Type; the body in memory or streamed. */
function typed(uri: string, type: string, body: Buffer, streamed = false): RecordDraft[] {
  const head = Buffer.from(`HTTP/1.1 200 OK\r\nContent-Type: ${type}\r\nContent-Length: ${body.length}\r\n\r\n`);
  const resp = makeDraft("response", uri, [head, streamed ? { stream: body, chunk: 4096 } : body]);
  const req = makeDraft("request", uri, [Buffer.from("GET / HTTP/1.1\r\n\r\n")], [["WARC-Concurrent-To", resp.id]]);
  return [resp, req];
}

describe("the hybrid writer", () => {
  it("routes each group whole to one series; close() waits for groups whose route needed a sample read from their spool", async () => {
    const dir = await tempDir();
    const routed: Array<[SeriesKind, string]> = [];
    const w = createHybridWriter({ ...writerOpts(dir), onRouted: (s, why) => routed.push([s, why]) });
    const html = Buffer.from("<p>archived page</p>\n".repeat(5000));
    const groups = {
      page: typed("http://example.com/", "text/html", html, true),
      photo: typed("http://example.com/photo.jpg", "image/jpeg", randomBytes(100_000)),
      icon: typed("http://example.com/icon.png", "image/png", randomBytes(2_000)),
      // No type, streamed: its first bytes are read from the source before it is routed.
      blob: captureGroup("http://example.com/blob", randomBytes(200_000)),
      notes: captureGroup("http://example.com/notes", html),
    };
    const writes = Object.values(groups).map((g) => w.write(g));
    await w.close();
    const written = await Promise.all(writes);
    const names = await readdir(dir);
    const gz = names.find((n) => n.endsWith(".warc.gz"))!;
    const plain = names.find((n) => n.endsWith(".warc"))!;
    expect(names.filter((n) => n.endsWith(".open"))).toEqual([]);
    expect(written.map((rs) => rs[0]!.filename)).toEqual([gz, plain, gz, plain, gz]);
    for (const rs of written) expect(rs[1]!.filename).toBe(rs[0]!.filename);
    expect(routed.map(([s]) => s)).toEqual(["gzip", "plain", "gzip", "plain", "gzip"]);
    expect(routed[3]![1]).toBe("first bytes incompressible");

    for (const [name, n] of [[gz, 3], [plain, 2]] as const) {
      const recs = await readWarc(join(dir, name));
      expect(recs[0]!.type).toBe("warcinfo");
      expect(recs.filter((r) => r.type === "response")).toHaveLength(n);
      // A response and its request, one after the other.
      recs.forEach((r, i) => r.type === "request" && expect(r.get("WARC-Concurrent-To")).toBe(recs[i - 1]!.get("WARC-Record-ID")));
    }
    const st = w.state();
    expect(st.filesWritten.sort()).toEqual([gz, plain].sort());
    expect(st.recordsWritten).toBe(10);
    expect(st.failed).toBeNull();
  });

  it("rollover() closes the current file of each series; the next groups open new ones", async () => {
    const dir = await tempDir();
    const w = createHybridWriter(writerOpts(dir));
    await w.write(typed("http://example.com/a.jpg", "image/jpeg", randomBytes(70_000)));
    await w.write(typed("http://example.com/a.html", "text/html", Buffer.from("a".repeat(100))));
    await w.rollover();
    expect((await readdir(dir)).filter((n) => n.endsWith(".open"))).toEqual([]);
    await w.write(typed("http://example.com/b.jpg", "image/jpeg", randomBytes(70_000)));
    await w.close();
    const names = (await readdir(dir)).filter((n) => /\.warc(\.gz)?$/.test(n));
    expect(names.filter((n) => n.endsWith(".warc"))).toHaveLength(2);
    expect(names.filter((n) => n.endsWith(".warc.gz"))).toHaveLength(1);
  });
});
