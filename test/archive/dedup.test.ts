import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openSync, readSync, closeSync } from "node:fs";
import { join } from "node:path";
import { gunzipSync } from "node:zlib";
import { bytesOf, startHttpOrigin, type Origin } from "../helpers/origin.js";
import { startTestLathe } from "../helpers/lathe.js";
import { viaProxy } from "../helpers/client.js";
import { checkDigests, readAllWarcs, type ReadRecord } from "../helpers/warcs.js";
import type { ConfigInput } from "../../src/config/schema.js";
import { openSqliteDedupStore } from "../../src/dedup/sqliteStore.js";
import { bytesHashedOffThread } from "../../src/capture/digestThread.js";

let origin: Origin;
beforeAll(async () => {
  origin = await startHttpOrigin();
});
afterAll(async () => {
  await origin.close();
});

const primary = (recs: ReadRecord[], uri: string) => recs.find((r) => (r.type === "response" || r.type === "revisit") && r.get("WARC-Target-URI") === uri)!;

/** Fetch the paths (in order, or all at once), stop lathe, read everything back. */
async function run(overrides: ConfigInput, paths: string[], o: { parallel?: boolean; dir?: string; headers?: Record<string, string> } = {}) {
  const lathe = await startTestLathe(o.dir ? { ...overrides, warc: { ...overrides.warc, dir: o.dir } } : overrides);
  const get = (p: string) => viaProxy(lathe.proxyUrl, `${origin.url}${p}`, o.headers ? { headers: { Host: `127.0.0.1:${origin.port}`, ...o.headers } } : {});
  const responses = o.parallel ? await Promise.all(paths.map(get)) : [];
  if (!o.parallel) for (const p of paths) responses.push(await get(p));
  await lathe.stop();
  const dir = o.dir ?? lathe.dir;
  const records = await readAllWarcs(dir);
  for (const r of records) expect(checkDigests(r)).toEqual([]);
  return { lathe, dir, responses, records };
}

function expectRevisitOf(rev: ReadRecord, orig: ReadRecord, version = "1.1") {
  expect(rev.type).toBe("revisit");
  expect(rev.get("WARC-Refers-To")).toBe(orig.get("WARC-Record-ID"));
  expect(rev.get("WARC-Refers-To-Target-URI")).toBe(orig.get("WARC-Target-URI"));
  expect(rev.get("WARC-Refers-To-Date")).toBe(orig.get("WARC-Date"));
  expect(rev.get("WARC-Profile")).toBe(`http://netpreserve.org/warc/${version}/revisit/identical-payload-digest`);
  expect(rev.get("WARC-Truncated")).toBe("length");
  expect(rev.get("WARC-Payload-Digest")).toBe(orig.get("WARC-Payload-Digest"));
  expect(rev.get("Content-Type")).toBe("application/http;msgtype=response");
  // Block = the new response's head only.
  expect(rev.block.toString("latin1")).toMatch(/^HTTP\/1\.1 200 OK\r\n[\s\S]*\r\n\r\n$/);
}

describe("live dedup", () => {
  it("digest policy: the same payload under other URLs becomes revisits of the first capture", async () => {
    const { dir, records } = await run({}, ["/bytes/20000?a", "/bytes/20000?b", "/bytes/20000?c"]);
    const a = primary(records, `${origin.url}/bytes/20000?a`);
    expect(a.type).toBe("response");
    for (const q of ["b", "c"]) expectRevisitOf(primary(records, `${origin.url}/bytes/20000?${q}`), a);
    // Every revisit still has its request record, concurrent to it.
    const b = primary(records, `${origin.url}/bytes/20000?b`);
    expect(records.some((r) => r.type === "request" && r.get("WARC-Concurrent-To") === b.get("WARC-Record-ID"))).toBe(true);
    // The dedup entry's file and offset are exactly the original's record.
    const store = openSqliteDedupStore(join(dir, "lathe-dedup.sqlite3"), { readonly: true });
    const entry = store.byUrl("default", `${origin.url}/bytes/20000?a`, 1)[0]!;
    store.close();
    expect(entry.recordId).toBe(a.get("WARC-Record-ID"));
    const fd = openSync(join(dir, entry.filename!), "r");
    const buf = Buffer.alloc(entry.length!);
    readSync(fd, buf, 0, buf.length, entry.offset!);
    closeSync(fd);
    expect(gunzipSync(buf).toString("latin1")).toContain(`WARC-Record-ID: ${a.get("WARC-Record-ID")}\r\n`);
  });

  it("a large body seen before is hashed once (payload digest only); an original also gets its block digest", async () => {
    // Spooled to disk (over 64 KiB), so the digest worker hashes it: the original's payload and
    // block (2 × size), each revisit's payload only (1 × size).
    const size = 3_000_000;
    const before = bytesHashedOffThread();
    const { records } = await run({ capture: { spoolMemoryBytes: 64 * 1024 } }, [`/bytes/${size}?a`, `/bytes/${size}?b`, `/bytes/${size}?c`]);
    expect(bytesHashedOffThread() - before).toBe(4 * size);
    const orig = primary(records, `${origin.url}/bytes/${size}?a`);
    expect(orig.type).toBe("response");
    expect(orig.body!.equals(bytesOf(size, size))).toBe(true);
    expectRevisitOf(primary(records, `${origin.url}/bytes/${size}?b`), orig);
    expectRevisitOf(primary(records, `${origin.url}/bytes/${size}?c`), orig);
  });

  it("url policy: only the same URL dedups; url-preferred refers to the same URL's capture first", async () => {
    const url = await run({ dedup: { policy: "url" } }, ["/bytes/5000?x", "/bytes/5000?y", "/bytes/5000?x"]);
    const kinds = url.records.filter((r) => r.type === "response" || r.type === "revisit").map((r) => `${r.type} ${r.get("WARC-Target-URI")!.split("?")[1]}`);
    expect(kinds).toEqual(["response x", "response y", "revisit x"]);

    const pref = await run({ dedup: { policy: "url-preferred" } }, ["/bytes/6000?x", "/bytes/6000?y", "/bytes/6000?y"]);
    const recs = pref.records.filter((r) => r.type === "response" || r.type === "revisit");
    expect(recs.map((r) => r.type)).toEqual(["response", "revisit", "revisit"]);
    expect(recs[1]!.get("WARC-Refers-To")).toBe(recs[0]!.get("WARC-Record-ID")); // y → x (no y yet)
    expect(recs[2]!.get("WARC-Refers-To")).toBe(recs[0]!.get("WARC-Record-ID")); // y: only x is an original
  });

  it("off writes every payload in full", async () => {
    const { records } = await run({ dedup: { policy: "off" } }, ["/bytes/3000?1", "/bytes/3000?2"]);
    expect(records.filter((r) => r.type === "revisit")).toEqual([]);
  });

  it("ro buckets are read, never written; rw buckets are both", async () => {
    const dir = (await run({}, ["/bytes/7000?seed"])).dir; // fills bucket "default"
    const ro = await run({ dedup: { buckets: [{ name: "default", mode: "ro" }] } }, ["/bytes/7000?1", "/bytes/4000?1", "/bytes/4000?2"], { dir });
    const kinds = ro.records.filter((r) => r.type === "response" || r.type === "revisit").map((r) => `${r.type} ${r.get("WARC-Target-URI")!.split("/bytes/")[1]}`);
    // 7000 was in the ro bucket already; 4000 is new, and an ro bucket does not remember it.
    expect(kinds).toEqual(["response 7000?seed", "revisit 7000?1", "response 4000?1", "response 4000?2"]);
  });

  it("thresholds: minimum size, statuses, empty payloads", async () => {
    const { records } = await run({ dedup: { minBytes: { text: 1, binary: 1000 } } }, ["/bytes/500?1", "/bytes/500?2", "/nope?1", "/nope?2", "/bytes/0?1", "/bytes/0?2"]);
    expect(records.filter((r) => r.type === "revisit")).toEqual([]);
  });

  it("identical payloads fetched at the same moment make one original and revisits of it", async () => {
    const paths = Array.from({ length: 10 }, (_, i) => `/bytes/30000?p${i}`);
    const { records, responses } = await run({}, paths, { parallel: true });
    for (const r of responses) expect(r.body.equals(bytesOf(30000, 30000))).toBe(true);
    const prim = records.filter((r) => r.type === "response" || r.type === "revisit");
    const originals = prim.filter((r) => r.type === "response");
    expect(originals.length).toBe(1);
    for (const r of prim.filter((x) => x.type === "revisit")) expect(r.get("WARC-Refers-To")).toBe(originals[0]!.get("WARC-Record-ID"));
  });

  it("restart keeps dedup working across files", async () => {
    const first = await run({}, ["/bytes/9000?before"]);
    const second = await run({}, ["/bytes/9000?after"], { dir: first.dir });
    const orig = primary(second.records, `${origin.url}/bytes/9000?before`);
    expectRevisitOf(primary(second.records, `${origin.url}/bytes/9000?after`), orig);
    expect(orig.file).not.toBe(primary(second.records, `${origin.url}/bytes/9000?after`).file);
  });

  it("WARC/1.0 revisits use the 1.0 profile URI and whole-second dates", async () => {
    const { records } = await run({ warc: { version: "1.0" } }, ["/bytes/2000?a", "/bytes/2000?b"]);
    const a = primary(records, `${origin.url}/bytes/2000?a`);
    expectRevisitOf(primary(records, `${origin.url}/bytes/2000?b`), a, "1.0");
  });

  it("a 304 to a conditional request is a server-not-modified revisit of the stored capture", async () => {
    const dir = (await run({}, ["/etag"])).dir;
    const { records } = await run({}, ["/etag"], { dir, headers: { "If-None-Match": '"v1"' } });
    const orig = records.find((r) => r.type === "response" && r.get("WARC-Target-URI") === `${origin.url}/etag`)!;
    const rev = records.find((r) => r.type === "revisit")!;
    expect(rev.get("WARC-Profile")).toBe("http://netpreserve.org/warc/1.1/revisit/server-not-modified");
    expect(rev.get("WARC-Refers-To")).toBe(orig.get("WARC-Record-ID"));
    expect(rev.get("WARC-Payload-Digest")).toBe(orig.get("WARC-Payload-Digest"));
    expect(rev.get("WARC-Truncated")).toBeUndefined();
    expect(rev.block.toString("latin1")).toMatch(/^HTTP\/1\.1 304 /);
  });

  it("a truncated capture is never an original", async () => {
    const { records } = await run({ capture: { maxBodyBytes: 1000 } }, ["/bytes/5000?1", "/bytes/5000?2"]);
    expect(records.filter((r) => r.type === "revisit")).toEqual([]);
  });
});
