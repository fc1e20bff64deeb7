/**
 * The live page's model on its own: bounded memory (captures per group, closed sessions kept),
 * where captures and pushed resources go, totals, and the Server-Sent Events stream (snapshot on
 * connect, coalesced updates, a fresh snapshot when too much piled up, end on close).
 */
import { afterEach, describe, expect, it } from "vitest";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { LiveFeed, type LiveSnapshot, type LiveUpdate } from "../../src/control/liveFeed.js";
import type { ArchiveEvent } from "../../src/archive/pipeline.js";
import type { Session } from "../../src/archive/sessions.js";
import { ProxyError } from "../../src/core/errors.js";

let n = 0;
const rec = (type: "response" | "revisit" | "request" | "resource", filename = "s-1.warc.gz", length = 100) => ({ id: `<urn:uuid:${++n}>`, type, filename, offset: n * 1000, length });

function capture(o: { session?: string; collection?: string; uri?: string; revisit?: boolean; status?: number; contentType?: string; file?: string }): ArchiveEvent {
  const main = rec(o.revisit ? "revisit" : "response", o.file);
  return {
    kind: "capture",
    uri: o.uri ?? `http://example.test/${n}`,
    method: "GET",
    status: o.status ?? 200,
    contentType: o.contentType ?? "application/octet-stream",
    series: o.collection ?? "lathe",
    collection: o.collection ?? "default",
    session: o.session ?? null,
    outcome: { kind: "written", records: [main, rec("request", o.file, 50)], revisit: !!o.revisit },
  };
}

function session(id: string, collection = "c1"): Session {
  return { id, collection, createdAt: new Date(), port: 4000, host: "127.0.0.1", counters: { captures: 0, revisits: 0, failed: 0, skipped: 0, bytes: 0 }, files: new Set(), inflight: 0, closed: false, passwordHash: Buffer.alloc(32), options: {} };
}

function feedWith(sessions: Session[], o: { perGroup?: number; closedKept?: number } = {}) {
  return new LiveFeed({
    version: "test",
    warcDir: "/nonexistent",
    sessions: () => sessions,
    collections: () => [
      { name: "default", prefix: "lathe" },
      { name: "c2", prefix: "crawl-two" },
    ],
    writers: () => [],
    flushMs: 10,
    heartbeatMs: 50,
    ...o,
  });
}

const feeds: LiveFeed[] = [];
afterEach(() => {
  for (const f of feeds.splice(0)) f.close();
});

describe("LiveFeed", () => {
  it("keeps the last perGroup captures of each group but counts them all", async () => {
    const s1 = session("s-1");
    const feed = feedWith([s1], { perGroup: 3 });
    for (let i = 0; i < 10; i++) feed.observe(capture({ session: "s-1", revisit: i % 2 === 1, uri: `http://a.test/${i}` }));
    for (let i = 0; i < 5; i++) feed.observe(capture({ uri: `http://b.test/${i}`, contentType: "text/html; charset=utf-8" }));
    const snap = await feed.snapshot();
    const g = snap.groups.find((x) => x.key === "session:s-1")!;
    expect(g.captures.map((c) => c.uri)).toEqual(["http://a.test/7", "http://a.test/8", "http://a.test/9"]);
    expect(g.totals).toEqual({ captures: 10, revisits: 5, resources: 0, pages: 0, failed: 0, skipped: 0, records: 20, bytes: 1500 });
    expect(g.captures.at(-1)).toMatchObject({ type: "revisit", revisit: true, size: 100, groupSize: 150, records: 2, status: 200 });
    const d = snap.groups.find((x) => x.key === "collection:default")!;
    expect(d.captures).toHaveLength(3);
    expect(d.totals.pages).toBe(5);
    expect(snap.totals.captures).toBe(15);
    expect(snap.groups.map((x) => x.key)).toEqual(["session:s-1", "collection:default"]);
  });

  it("puts a pushed resource with the session of its page, else with its collection; counts failures; skipped captures are counted only", async () => {
    const feed = feedWith([session("s-1")]);
    const page = capture({ session: "s-1", uri: "http://p.test/", contentType: "text/html" });
    feed.observe(page);
    const pageId = (page as { outcome: { records: Array<{ id: string }> } }).outcome.records[0]!.id;
    const resource = (uri: string, concurrentTo: string | null, series: string): ArchiveEvent => ({
      kind: "record",
      series,
      collection: null,
      draft: { type: "resource", id: "x", fields: [["WARC-Target-URI", uri], ...(concurrentTo ? ([["WARC-Concurrent-To", concurrentTo]] as Array<[string, string]>) : []), ["Content-Type", "image/png"]], block: [] },
      record: rec("resource", "f.warc.gz", 77),
    });
    feed.observe(resource("urn:view:http://p.test/", pageId, "c1"));
    feed.observe(resource("urn:view:http://q.test/", null, "crawl-two"));
    feed.observe(resource("urn:view:http://r.test/", "<urn:uuid:unknown>", "nope"));
    feed.observe({ ...(capture({ session: "s-1" }) as Extract<ArchiveEvent, { kind: "capture" }>), outcome: { kind: "failed", error: new ProxyError("ERR_WARC_WRITE", "disk full") } });
    feed.observe({ ...(capture({ session: "s-1" }) as Extract<ArchiveEvent, { kind: "capture" }>), outcome: { kind: "skipped", reason: "mime-type-filters" } });
    const snap = await feed.snapshot();
    const s = snap.groups.find((x) => x.key === "session:s-1")!;
    expect(s.captures.map((c) => [c.uri, c.type])).toEqual([
      ["http://p.test/", "response"],
      ["urn:view:http://p.test/", "resource"],
      [expect.stringMatching(/^http:\/\/example\.test\//), "failed"],
    ]);
    expect(s.captures[1]).toMatchObject({ status: null, size: 77, contentType: "image/png", revisit: false });
    expect(s.captures[2]).toMatchObject({ error: "disk full", file: null });
    expect(s.totals).toMatchObject({ captures: 1, pages: 1, resources: 1, failed: 1, skipped: 1, records: 3, bytes: 227 });
    expect(snap.groups.find((x) => x.key === "collection:c2")!.captures.map((c) => c.uri)).toEqual(["urn:view:http://q.test/"]);
    expect(snap.groups.find((x) => x.key === "collection:default")!.captures.map((c) => c.uri)).toEqual(["urn:view:http://r.test/"]);
  });

  it("marks sessions gone from the registry closed and keeps only the latest closedKept of them", async () => {
    const list = ["s-1", "s-2", "s-3", "s-4"].map((id) => session(id));
    const feed = feedWith(list, { closedKept: 2 });
    for (const s of list) feed.observe(capture({ session: s.id }));
    let snap = await feed.snapshot();
    expect(snap.groups.filter((g) => g.kind === "session" && g.open)).toHaveLength(4);
    expect(snap.groups.find((g) => g.key === "session:s-1")!.proxy).toBe("http://127.0.0.1:4000");
    for (const id of ["s-1", "s-2", "s-3"]) {
      list.splice(list.findIndex((s) => s.id === id), 1);
      await feed.snapshot();
      await new Promise((r) => setTimeout(r, 5));
    }
    snap = await feed.snapshot();
    expect(snap.groups.map((g) => `${g.key}${g.open ? "" : " closed"}`)).toEqual(["session:s-4", "collection:default", "session:s-3 closed", "session:s-2 closed"]);
  });

  it("streams a snapshot, then coalesced updates, a new snapshot after a flood, and ends on close", async () => {
    const feed = feedWith([session("s-1")]);
    feeds.push(feed);
    const server = http.createServer((_req, res) => void feed.stream(res));
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    const events: Array<{ event: string; data: unknown }> = [];
    let ended = false;
    const req = http.get(`http://127.0.0.1:${(server.address() as AddressInfo).port}/`);
    const res = await new Promise<http.IncomingMessage>((r) => req.once("response", r));
    expect(res.headers["content-type"]).toBe("text/event-stream; charset=utf-8");
    let buf = "";
    res.setEncoding("utf8");
    res.on("data", (d: string) => {
      buf += d;
      let i;
      while ((i = buf.indexOf("\n\n")) >= 0) {
        const block = buf.slice(0, i);
        buf = buf.slice(i + 2);
        const ev = /^event: (.*)$/m.exec(block)?.[1];
        const data = /^data: (.*)$/m.exec(block)?.[1];
        if (ev && data) events.push({ event: ev, data: JSON.parse(data) });
      }
    });
    res.on("end", () => (ended = true));
    const until = async (cond: () => boolean) => {
      const end = Date.now() + 5000;
      while (!cond()) {
        if (Date.now() > end) throw new Error("timed out");
        await new Promise((r) => setTimeout(r, 5));
      }
    };
    await until(() => events.length === 1);
    expect(events[0]!.event).toBe("snapshot");
    expect(feed.clients).toBe(1);
    for (let i = 0; i < 5; i++) feed.observe(capture({ session: "s-1", uri: `http://u.test/${i}` }));
    await until(() => events.length >= 2).catch((e) => { throw new Error(`${e.message}: ${JSON.stringify(events.map((x) => x.event))}`); });
    const u = events[1]!.data as LiveUpdate;
    expect(events[1]!.event).toBe("update");
    // The five came in one update, in order, each naming its group.
    expect(u.captures.map((c) => [c.group, c.uri])).toEqual([0, 1, 2, 3, 4].map((i) => ["session:s-1", `http://u.test/${i}`]));
    expect(u.groups.find((g) => g.key === "session:s-1")!.totals.captures).toBe(5);
    for (let i = 0; i < 1500; i++) feed.observe(capture({ uri: `http://flood.test/${i}` }));
    await until(() => events.length >= 3);
    expect(events[2]!.event).toBe("snapshot");
    const s = events[2]!.data as LiveSnapshot;
    expect(s.groups.find((g) => g.key === "collection:default")!.captures).toHaveLength(200);
    expect(s.totals.captures).toBe(1505);
    // Nothing changed since: the heartbeats send nothing more.
    await new Promise((r) => setTimeout(r, 200));
    expect(events.map((e) => e.event)).toEqual(["snapshot", "update", "snapshot"]);
    feed.close();
    await until(() => ended);
    expect(feed.clients).toBe(0);
    server.close();
  });
});
