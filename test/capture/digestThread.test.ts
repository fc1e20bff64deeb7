/**
 * Large bodies are hashed on the digest worker from the spool's file (issue #25): the digests a
 * capture gives are the ones of the bytes received, whether the worker answers, dies mid-body, or
 * the body ends early; small and chunked bodies stay on this thread.
 */
import { execFileSync } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { mkdtempSync, readdirSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { bytesHashedOffThread, digestsAnsweredOffThread, stopDigestWorker } from "../../src/capture/digestThread.js";
import { DONE } from "../../src/core/done.js";
import { MessageCapture } from "../../src/capture/messageCapture.js";
import { formatDigest } from "../../src/warc/digest.js";

const CHUNK = 64 * 1024;

function capture(dir: string) {
  return new MessageCapture({ kind: "response", digest: "sha1", spool: { memoryBytes: 256 * 1024, dir }, maxBodyBytes: 0, now: () => 0n });
}

const sha1 = (...parts: Buffer[]) => {
  const h = createHash("sha1");
  for (const p of parts) h.update(p);
  return formatDigest("sha1", h.digest());
};

/** Feed head and body in socket-sized chunks, yielding now and then so the spool's file grows meanwhile. */
async function feed(c: MessageCapture, head: Buffer, body: Buffer) {
  c.feed(head);
  for (let at = 0; at < body.length; at += CHUNK) {
    c.feed(body.subarray(at, at + CHUNK));
    if (at % (16 * CHUNK) === 0) await new Promise((r) => setImmediate(r));
  }
}

describe("digests of large bodies off the proxy's thread", () => {
  it("a Content-Length body past the spool's memory: the worker's digests are those of the bytes", async () => {
    const dir = mkdtempSync(join(tmpdir(), "lathe-digest-"));
    const body = randomBytes(9 * 1024 * 1024 + 123);
    const head = Buffer.from(`HTTP/1.1 200 OK\r\ncontent-length: ${body.length}\r\n\r\n`);
    const before = digestsAnsweredOffThread();
    const c = capture(dir);
    await feed(c, head, body);
    const hashed = bytesHashedOffThread();
    const m = (await c.finalize("dechunk", "clean"))!;
    expect(m.payloadDigest).toBe(sha1(body));
    // The payload digest only, so far: the block digest waits until a record asks for it.
    expect(digestsAnsweredOffThread()).toBe(before + 1);
    expect(bytesHashedOffThread() - hashed).toBe(body.length);
    await m.blockDigestReady();
    expect(digestsAnsweredOffThread()).toBe(before + 2);
    expect(bytesHashedOffThread() - hashed).toBe(2 * body.length);
    expect(m.blockDigest).toBe(sha1(head, body));
    expect(m.truncated).toBeNull();
    await m.dispose();
    expect(readdirSync(dir)).toEqual([]);
  });

  it("a large request body: its block digest is taken with its payload digest (a request is always recorded whole)", async () => {
    const dir = mkdtempSync(join(tmpdir(), "lathe-digest-"));
    const body = randomBytes(2 * 1024 * 1024 + 5);
    const head = Buffer.from(`PUT /up HTTP/1.1\r\nhost: example.com\r\ncontent-length: ${body.length}\r\n\r\n`);
    const hashed = bytesHashedOffThread();
    const c = new MessageCapture({ kind: "request", digest: "sha1", spool: { memoryBytes: 256 * 1024, dir }, maxBodyBytes: 0, now: () => 0n });
    await feed(c, head, body);
    const m = (await c.finalize("dechunk", "clean"))!;
    expect(m.blockDigestReady()).toBe(DONE);
    expect(m.blockDigest).toBe(sha1(head, body));
    expect(m.payloadDigest).toBe(sha1(body));
    expect(bytesHashedOffThread() - hashed).toBe(2 * body.length);
    await m.dispose();
  });

  it("a block digest read without waiting is hashed here from the spool; after the worker stopped, a new one takes it: same digest", async () => {
    const dir = mkdtempSync(join(tmpdir(), "lathe-digest-"));
    const body = randomBytes(3 * 1024 * 1024 + 1);
    const head = Buffer.from(`HTTP/1.1 200 OK\r\ncontent-length: ${body.length}\r\n\r\n`);
    const unasked = capture(dir);
    await feed(unasked, head, body);
    const m1 = (await unasked.finalize("dechunk", "clean"))!;
    const answered = digestsAnsweredOffThread();
    expect(m1.blockDigest).toBe(sha1(head, body));
    expect(digestsAnsweredOffThread()).toBe(answered);
    await m1.dispose();
    const orphan = capture(dir);
    await feed(orphan, head, body);
    const m2 = (await orphan.finalize("dechunk", "clean"))!;
    await stopDigestWorker();
    await m2.blockDigestReady();
    expect(m2.blockDigest).toBe(sha1(head, body));
    expect(digestsAnsweredOffThread()).toBe(answered + 2);
    await m2.dispose();
    expect(readdirSync(dir)).toEqual([]);
  });

  it("a close-delimited body cut by a disconnect: digests of what arrived", async () => {
    const dir = mkdtempSync(join(tmpdir(), "lathe-digest-"));
    const body = randomBytes(3 * 1024 * 1024 + 7);
    const head = Buffer.from("HTTP/1.1 200 OK\r\ncontent-type: video/mp4\r\n\r\n");
    const c = capture(dir);
    await feed(c, head, body);
    const m = (await c.finalize("dechunk", "disconnect"))!;
    expect(m.payloadDigest).toBe(sha1(body));
    expect(m.blockDigest).toBe(sha1(head, body));
    await m.dispose();
  });

  it("the worker stopped in the middle of a body: the capture hashes the file itself, same digests", async () => {
    const dir = mkdtempSync(join(tmpdir(), "lathe-digest-"));
    const body = randomBytes(4 * 1024 * 1024);
    const head = Buffer.from(`HTTP/1.1 200 OK\r\ncontent-length: ${body.length}\r\n\r\n`);
    const c = capture(dir);
    await feed(c, head, body.subarray(0, 2 * 1024 * 1024));
    await stopDigestWorker();
    for (let at = 2 * 1024 * 1024; at < body.length; at += CHUNK) c.feed(body.subarray(at, at + CHUNK));
    const before = digestsAnsweredOffThread();
    const m = (await c.finalize("dechunk", "clean"))!;
    expect(m.payloadDigest).toBe(sha1(body));
    expect(m.blockDigest).toBe(sha1(head, body));
    expect(digestsAnsweredOffThread()).toBe(before);
    await m.dispose();
    // The next large body gets a new worker.
    const c2 = capture(dir);
    await feed(c2, head, body);
    const m2 = (await c2.finalize("dechunk", "clean"))!;
    expect(m2.payloadDigest).toBe(sha1(body));
    expect(digestsAnsweredOffThread()).toBe(before + 1);
    await m2.dispose();
  });

  it("a chunked body and a small body stay on this thread, with the digests as before", async () => {
    const dir = mkdtempSync(join(tmpdir(), "lathe-digest-"));
    const entity = randomBytes(2 * 1024 * 1024);
    const wire = Buffer.concat([Buffer.from(`${entity.length.toString(16)}\r\n`), entity, Buffer.from("\r\n0\r\n\r\n")]);
    const head = Buffer.from("HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n");
    const before = digestsAnsweredOffThread();
    const c = capture(dir);
    await feed(c, head, wire);
    const m = (await c.finalize("wire-exact", "clean"))!;
    expect(m.payloadDigest).toBe(sha1(entity));
    expect(m.blockDigest).toBe(sha1(head, wire));
    const small = Buffer.from("hello");
    const s = capture(dir);
    await feed(s, Buffer.from("HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\n"), small);
    expect((await s.finalize("dechunk", "clean"))!.payloadDigest).toBe(sha1(small));
    expect(digestsAnsweredOffThread()).toBe(before);
    await m.dispose();
  });

  it("an idle worker never keeps a process alive; one that owes digests does until they arrive", () => {
    const dir = mkdtempSync(join(tmpdir(), "lathe-digest-"));
    const file = join(dir, "body");
    writeFileSync(file, Buffer.alloc(20 << 20, 7));
    const script = `
      const m = await import(${JSON.stringify(new URL("../../dist/capture/digestThread.js", import.meta.url).href)});
      m.startDigestWorker();
      if (process.argv[1] === "job") {
        const job = m.startDigestJob(${JSON.stringify(file)}, "sha1", Buffer.from("head"));
        job.finish(${20 << 20}).then((d) => console.log(d ? d.payload.toString("hex") : "null"));
      }`;
    const run = (arg: string) => execFileSync(process.execPath, ["--input-type=module", "-e", script, arg], { timeout: 20_000, encoding: "utf8" }).trim();
    expect(run("idle")).toBe("");
    expect(run("job")).toBe(createHash("sha1").update(Buffer.alloc(20 << 20, 7)).digest("hex"));
  });
});
