/**
 * A body kept in memory gets its block digest when a record asks for it (a revisit never does,
 * issue #25); the digest is the one of the bytes received, whichever way they were framed.
 */
import { createHash, randomBytes } from "node:crypto";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { MessageCapture } from "../../src/capture/messageCapture.js";
import { formatDigest } from "../../src/warc/digest.js";

const dir = mkdtempSync(join(tmpdir(), "lathe-capture-"));
const capture = (maxBodyBytes = 0) =>
  new MessageCapture({ kind: "response", digest: "sha1", spool: { memoryBytes: 1024 * 1024, dir }, maxBodyBytes, now: () => 0n });

const sha1 = (...parts: Buffer[]) => {
  const h = createHash("sha1");
  for (const p of parts) h.update(p);
  return formatDigest("sha1", h.digest());
};

/** Feed `bytes` in pieces of `step`, as a socket would hand them over. */
function feed(c: MessageCapture, bytes: Buffer, step: number) {
  for (let at = 0; at < bytes.length; at += step) c.feed(bytes.subarray(at, at + step));
}

describe("block digest of a body in memory", () => {
  it("is the digest of the head and the body as received, asked for once or twice", async () => {
    const body = randomBytes(10_000);
    const head = Buffer.from(`HTTP/1.1 200 OK\r\ncontent-length: ${body.length}\r\n\r\n`);
    const c = capture();
    feed(c, Buffer.concat([head, body]), 1500);
    const m = (await c.finalize("dechunk", "clean"))!;
    expect(m.payloadDigest).toBe(sha1(body));
    expect(m.blockDigest).toBe(sha1(head, body));
    expect(m.blockDigest).toBe(sha1(head, body));
    await m.dispose();
  });

  it("covers only the bytes kept under a body limit", async () => {
    const body = randomBytes(5000);
    const head = Buffer.from(`HTTP/1.1 200 OK\r\ncontent-length: ${body.length}\r\n\r\n`);
    const c = capture(1000);
    feed(c, Buffer.concat([head, body]), 700);
    const m = (await c.finalize("dechunk", "clean"))!;
    expect(m.truncated).toBe("length");
    expect(m.blockDigest).toBe(sha1(head, body.subarray(0, 1000)));
    await m.dispose();
  });

  it("of a body ended by the close, and of a chunked one kept as received", async () => {
    const body = randomBytes(3000);
    const closeHead = Buffer.from("HTTP/1.1 200 OK\r\n\r\n");
    const a = capture();
    feed(a, Buffer.concat([closeHead, body]), 1000);
    const ma = (await a.finalize("dechunk", "clean"))!;
    expect(ma.blockDigest).toBe(sha1(closeHead, body));

    const chunkedHead = Buffer.from("HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n");
    const wire = Buffer.concat([Buffer.from("bb8\r\n"), body, Buffer.from("\r\n0\r\n\r\n")]);
    const b = capture();
    feed(b, Buffer.concat([chunkedHead, wire]), 999);
    const mb = (await b.finalize("wire-exact", "clean"))!;
    expect(mb.blockDigest).toBe(sha1(chunkedHead, wire));
    expect(mb.payloadDigest).toBe(sha1(body));
    await ma.dispose();
    await mb.dispose();
  });

  it("of a body in one chunk, of a request without a body, and of a request whose head gains a Content-Length", async () => {
    const body = randomBytes(4000);
    const head = Buffer.from(`HTTP/1.1 200 OK\r\ncontent-length: ${body.length}\r\n\r\n`);
    const one = capture();
    one.feed(Buffer.concat([head, body]));
    const m1 = (await one.finalize("dechunk", "clean"))!;
    expect(m1.payloadDigest).toBe(sha1(body));
    expect(m1.blockDigest).toBe(sha1(head, body));

    const get = Buffer.from("GET /x HTTP/1.1\r\nhost: example.com\r\n\r\n");
    const q = new MessageCapture({ kind: "request", digest: "sha1", spool: { memoryBytes: 1024, dir }, maxBodyBytes: 0, now: () => 0n });
    q.feed(get);
    const m2 = (await q.finalize("dechunk", "clean"))!;
    expect(m2.payloadDigest).toBeNull();
    expect(m2.blockDigest).toBe(sha1(get));

    // An h2 request body framed by its DATA frames: the stored head gets `content-length: N`.
    const post = Buffer.from("POST /y HTTP/1.1\r\nhost: example.com\r\n\r\n");
    const form = Buffer.from("a=1&b=2");
    const h2 = new MessageCapture({ kind: "request", digest: "sha1", spool: { memoryBytes: 1024, dir }, maxBodyBytes: 0, now: () => 0n, bodyUntilEnd: true });
    h2.feed(Buffer.concat([post, form]));
    const m3 = (await h2.finalize("dechunk", "clean"))!;
    expect(m3.storedHead.toString()).toContain("content-length: 7");
    expect(m3.payloadDigest).toBe(sha1(form));
    expect(m3.blockDigest).toBe(sha1(m3.storedHead, form));
    for (const m of [m1, m2, m3]) await m.dispose();
  });

  it("cannot be asked for once the body was released, rather than covering the head alone", async () => {
    const body = randomBytes(2000);
    const head = Buffer.from(`HTTP/1.1 200 OK\r\ncontent-length: ${body.length}\r\n\r\n`);
    const c = capture();
    c.feed(Buffer.concat([head, body]));
    const m = (await c.finalize("dechunk", "clean"))!;
    await m.dispose();
    expect(() => m.blockDigest).toThrow(/after its body was released/);
  });
});
