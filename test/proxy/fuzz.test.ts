/**
 * Seeded, bounded fuzzing of lathe's HTTP handling (issue #7): random and mutated requests over
 * raw sockets to the proxy, and a malicious origin answering with random and mutated responses.
 * lathe must never crash (no uncaught exception; it still serves a normal request afterwards),
 * must answer or close every connection within a bound, and every WARC record it writes must read
 * back (warcio) with valid digests and a well-formed HTTP block. The seed is printed on failure;
 * rerun with LATHE_FUZZ_SEED=<seed> (and LATHE_FUZZ_CASES=<n>) to reproduce.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import http from "node:http";
import net from "node:net";
import type { AddressInfo } from "node:net";
import { bytesOf, startHttpOrigin, type Origin } from "../helpers/origin.js";
import { startTestLathe, type TestLathe } from "../helpers/lathe.js";
import { checkDigests, digestString, readAllWarcs, type ReadRecord } from "../helpers/warcs.js";
import { prng } from "../helpers/prng.js";

const SEED = Number(process.env.LATHE_FUZZ_SEED ?? Math.floor(Math.random() * 2 ** 31));
const CASES = Math.min(Number(process.env.LATHE_FUZZ_CASES ?? 160), 1000);
/** Every connection must get an answer or be closed within this (the shortened timeouts are ≤ 2 s). */
const ANSWER_MS = 10_000;
const label = (what: string) => `${what} (seed ${SEED}; rerun with LATHE_FUZZ_SEED=${SEED})`;

type Rng = ReturnType<typeof prng>;

const SPICE = ["\r", "\n", "\r\n", ":", " ", "\t", "\0", "\x7f", "\xff", "0", "-1", "99999999999999999999", ";", ",", "chunked", "Content-Length: 3\r\n", "Transfer-Encoding: chunked\r\n", "HTTP/1.1 200 OK\r\n", "\r\n\r\n"];

/** Mutate bytes: flips, inserts, deletions, duplications, truncation, spliced tokens. */
function mutate(rng: Rng, input: Buffer, rounds = 1 + rng.int(4)): Buffer {
  let b = Buffer.from(input);
  for (let k = 0; k < rounds; k++) {
    const at = rng.int(b.length + 1);
    switch (rng.int(6)) {
      case 0: // flip a byte
        if (b.length) b[Math.min(at, b.length - 1)] = rng.int(256);
        break;
      case 1: // insert random bytes
        b = Buffer.concat([b.subarray(0, at), Buffer.from(Array.from({ length: 1 + rng.int(8) }, () => rng.int(256))), b.subarray(at)]);
        break;
      case 2: // delete a range
        b = Buffer.concat([b.subarray(0, at), b.subarray(at + 1 + rng.int(16))]);
        break;
      case 3: // duplicate a range
        b = Buffer.concat([b.subarray(0, at), b.subarray(at, at + 1 + rng.int(40)), b.subarray(at)]);
        break;
      case 4: // truncate
        b = b.subarray(0, at);
        break;
      default: // splice in a troublesome token
        b = Buffer.concat([b.subarray(0, at), Buffer.from(rng.pick(SPICE), "latin1"), b.subarray(at)]);
    }
  }
  return b;
}

const randomBytes = (rng: Rng, n: number) => Buffer.from(Array.from({ length: n }, () => rng.int(256)));

/** Valid responses to start from. */
function baseResponse(rng: Rng): Buffer {
  const body = bytesOf(rng.int(3000), 1 + rng.int(1000));
  const chunks = () => {
    let out = "";
    for (let i = 0; i < body.length; i += 700) out += `${Math.min(700, body.length - i).toString(16)}\r\n${body.subarray(i, i + 700).toString("latin1")}\r\n`;
    return out;
  };
  switch (rng.int(7)) {
    case 0:
      return Buffer.from(`HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: ${body.length}\r\n\r\n${body.toString("latin1")}`, "latin1");
    case 1:
      return Buffer.from(`HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n${chunks()}0\r\n\r\n`, "latin1");
    case 2:
      return Buffer.from(`HTTP/1.1 200 OK\r\nTrailer: X-T\r\nTransfer-Encoding: chunked\r\n\r\n${chunks()}0\r\nX-T: 1\r\n\r\n`, "latin1");
    case 3:
      return Buffer.from(`HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\n${body.toString("latin1")}`, "latin1");
    case 4:
      return Buffer.from(`HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok`, "latin1");
    case 5:
      return Buffer.from(`HTTP/1.1 ${rng.pick([204, 304, 301, 404, 500])} Whatever\r\nLocation: /x\r\nContent-Length: 0\r\n\r\n`, "latin1");
    default:
      return Buffer.from(`HTTP/1.1 200 OK\r\nX-A: 1\r\nx-a: 2\r\nSet-Cookie: a=b\r\nContent-Length: 4\r\n\r\nbody`, "latin1");
  }
}

interface ResponsePlan {
  bytes: Buffer;
  /** After writing: close, reset, or leave the connection open (lathe's timeouts end it). */
  then: "end" | "reset" | "open";
  /** Written in pieces with small delays. */
  split: boolean;
}

function responsePlan(rng: Rng): ResponsePlan {
  const r = rng.int(10);
  const bytes = r === 0 ? randomBytes(rng, rng.int(400)) : r < 3 ? baseResponse(rng) : mutate(rng, baseResponse(rng));
  return { bytes, then: rng.pick(["end", "end", "reset", "open"] as const), split: rng.int(3) === 0 };
}

/** Valid requests to start from, for the fuzz origin at `hp` (host:port). */
function baseRequest(rng: Rng, hp: string, i: number): Buffer {
  const url = `http://${hp}/ok/${i}`;
  switch (rng.int(6)) {
    case 0:
      return Buffer.from(`GET ${url} HTTP/1.1\r\nHost: ${hp}\r\nUser-Agent: fuzz\r\nAccept: */*\r\n\r\n`);
    case 1:
      return Buffer.from(`POST ${url} HTTP/1.1\r\nHost: ${hp}\r\nContent-Type: text/plain\r\nContent-Length: 11\r\n\r\nhello world`);
    case 2:
      return Buffer.from(`PUT ${url} HTTP/1.1\r\nHost: ${hp}\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n`);
    case 3:
      return Buffer.from(`CONNECT ${hp} HTTP/1.1\r\nHost: ${hp}\r\n\r\nGET /ok/${i} HTTP/1.1\r\nHost: ${hp}\r\n\r\n`);
    case 4:
      return Buffer.from(`GET ${url}?a=1 HTTP/1.1\r\nHost: ${hp}\r\n\r\nHEAD ${url}?b=2 HTTP/1.1\r\nHost: ${hp}\r\n\r\n`);
    default:
      return Buffer.from(`GET ${url} HTTP/1.0\r\nWarcprox-Meta: {"warc-prefix":"fuzz"}\r\n\r\n`);
  }
}

/** Send bytes on a fresh connection; resolve with what came back once lathe answers or closes. */
function exchange(port: number, bytes: Buffer, o: { end: boolean }): Promise<{ answered: boolean; closed: boolean; data: Buffer }> {
  return new Promise((resolve) => {
    const s = net.connect(port, "127.0.0.1");
    const chunks: Buffer[] = [];
    let settled = false;
    const done = (closed: boolean) => {
      if (settled) return;
      settled = true;
      clearTimeout(t);
      s.destroy();
      resolve({ answered: chunks.length > 0, closed, data: Buffer.concat(chunks) });
    };
    // An answer: give lathe a moment to finish writing it, then stop (keep-alive may hold the socket).
    s.on("data", (d) => {
      chunks.push(d);
      setTimeout(() => done(false), 200);
    });
    s.on("close", () => done(true));
    s.on("error", () => done(true));
    const t = setTimeout(() => done(false), ANSWER_MS);
    s.write(bytes);
    if (o.end) s.end();
  });
}

/** GET through the proxy; status, or an error string. */
function get(proxyPort: number, url: string): Promise<{ status?: number; body?: Buffer; error?: string }> {
  return new Promise((resolve) => {
    const req = http.get({ host: "127.0.0.1", port: proxyPort, path: url, headers: { Host: new URL(url).host }, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => resolve({ status: res.statusCode, body: Buffer.concat(chunks) }));
      res.on("error", (e) => resolve({ status: res.statusCode, error: e.message }));
      res.on("aborted", () => resolve({ status: res.statusCode, error: "aborted" }));
    });
    req.setTimeout(ANSWER_MS, () => req.destroy(new Error("client timeout")));
    req.on("error", (e) => resolve({ error: e.message }));
  });
}

/**
 * A head that ends in a bare-LF blank line ("\r\n\n"): the payload starts after it, as lathe and
 * Python warcio read it (the helper's reading splits at the first CRLF CRLF only).
 */
function lfPayloadOk(r: ReadRecord): boolean {
  const pd = r.get("WARC-Payload-Digest");
  const m = /\n\r?\n/.exec(r.block.toString("latin1"));
  if (!pd || !m) return false;
  return digestString(pd.split(":")[0] as "sha1" | "sha256", r.block.subarray(m.index + m[0].length)) === pd;
}

async function pool<T>(items: T[], width: number, f: (x: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(Array.from({ length: width }, async () => {
    while (next < items.length) await f(items[next++]!);
  }));
}

describe(`fuzzing lathe's HTTP handling (seed ${SEED}, ${CASES} request + ${CASES} response cases)`, () => {
  let lathe: TestLathe;
  let good: Origin;
  let evil: net.Server;
  let evilHp = "";
  const plans = new Map<string, ResponsePlan>();
  const evilSockets = new Set<net.Socket>();
  const uncaught: unknown[] = [];
  const onUncaught = (e: unknown) => uncaught.push(e);

  beforeAll(async () => {
    process.on("uncaughtException", onUncaught);
    process.on("unhandledRejection", onUncaught);
    good = await startHttpOrigin();
    // The malicious origin: `/r/<n>` gets response plan n; anything else a plain valid answer.
    evil = net.createServer((socket) => {
      evilSockets.add(socket);
      socket.on("close", () => evilSockets.delete(socket));
      socket.on("error", () => undefined);
      let buf = "";
      socket.on("data", (d) => {
        buf += d.toString("latin1");
        const end = buf.indexOf("\r\n\r\n");
        if (end < 0) return;
        const path = buf.split(" ")[1] ?? "";
        buf = buf.slice(end + 4);
        const plan = plans.get(path.split("?")[0]!);
        if (!plan) {
          socket.write("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 4\r\n\r\nfine");
          return;
        }
        const finish = () => {
          if (plan.then === "end") socket.end();
          else if (plan.then === "reset") socket.resetAndDestroy();
        };
        if (!plan.split) {
          socket.write(plan.bytes, finish);
          return;
        }
        const cut = Math.floor(plan.bytes.length / 2);
        socket.write(plan.bytes.subarray(0, cut));
        setTimeout(() => {
          if (!socket.destroyed) socket.write(plan.bytes.subarray(cut), finish);
        }, 30);
      });
    });
    await new Promise<void>((r) => evil.listen(0, "127.0.0.1", () => r()));
    evilHp = `127.0.0.1:${(evil.address() as AddressInfo).port}`;
    lathe = await startTestLathe({
      proxy: { headersTimeoutMs: 1500, keepAliveTimeoutMs: 1500, tlsHandshakeTimeoutMs: 1500 },
      upstream: { headTimeoutMs: 800, connectTimeoutMs: 800, idleTimeoutMs: 800, allowHosts: ["127.0.0.1"] },
      capture: { maxDurationMs: 2000, spoolMemoryBytes: 4096 },
    });
  });
  afterAll(async () => {
    process.off("uncaughtException", onUncaught);
    process.off("unhandledRejection", onUncaught);
    await lathe?.stop();
    await good?.close();
    for (const s of evilSockets) s.destroy();
    await new Promise((r) => evil?.close(r));
  });

  it("answers or closes every mutated request, and keeps serving", async () => {
    const rng = prng(SEED);
    const cases = Array.from({ length: CASES }, (_, i) => {
      const r = rng.int(10);
      const bytes = r === 0 ? randomBytes(rng, 1 + rng.int(300)) : r === 1 ? baseRequest(rng, evilHp, i) : mutate(rng, baseRequest(rng, evilHp, i));
      // A quarter half-close after their bytes; the rest leave the connection open, so a head
      // left incomplete must be ended by lathe (proxy.headersTimeoutMs, 1.5 s here).
      return { i, bytes, end: rng.int(4) === 0 };
    });
    const silent: string[] = [];
    const t0 = Date.now();
    await pool(cases, 8, async (c) => {
      const r = await exchange(lathe.address.port, c.bytes, { end: c.end });
      if (!r.answered && !r.closed) silent.push(`case ${c.i}: ${JSON.stringify(c.bytes.toString("latin1").slice(0, 200))}`);
      else if (r.answered && !/^HTTP\/1\.[01] \d{3} /.test(r.data.toString("latin1"))) silent.push(`case ${c.i}: answer is not HTTP: ${JSON.stringify(r.data.toString("latin1").slice(0, 80))}`);
    });
    expect(silent, label("connections neither answered nor closed")).toEqual([]);
    expect(Date.now() - t0).toBeLessThan(45_000);
    const ok = await get(lathe.address.port, `${good.url}/text/77`);
    expect([ok.status, ok.body?.length], label("a normal request after the request fuzz")).toEqual([200, 77]);
    expect(uncaught, label("uncaught exceptions")).toEqual([]);
  }, 60_000);

  it("survives random and mutated responses, answering or closing every request", async () => {
    const rng = prng(SEED ^ 0x5bd1e995);
    for (let i = 0; i < CASES; i++) plans.set(`/r/${i}`, responsePlan(rng));
    const stuck: string[] = [];
    const t0 = Date.now();
    await pool([...Array(CASES).keys()], 8, async (i) => {
      const r = await get(lathe.address.port, `http://${evilHp}/r/${i}?case=${i}`);
      if (r.error === "client timeout") stuck.push(`case ${i}: ${JSON.stringify(plans.get(`/r/${i}`)!.bytes.toString("latin1").slice(0, 200))}`);
    });
    expect(stuck, label("requests neither answered nor closed")).toEqual([]);
    expect(Date.now() - t0).toBeLessThan(45_000);
    for (let k = 0; k < 3; k++) {
      const ok = await get(lathe.address.port, `${good.url}/bytes/${500 + k}`);
      expect([ok.status, ok.body?.equals(bytesOf(500 + k, 500 + k))], label("a normal request after the response fuzz")).toEqual([200, true]);
      const same = await get(lathe.address.port, `http://${evilHp}/plain/${k}`);
      expect([same.status, same.body?.toString()], label("the fuzzing origin, answering normally again")).toEqual([200, "fine"]);
    }
    expect(uncaught, label("uncaught exceptions")).toEqual([]);
  }, 60_000);

  it("wrote only well-formed records", async () => {
    await lathe.stop();
    const recs = await readAllWarcs(lathe.dir);
    expect(recs.filter((r) => r.type === "response").length, label("responses recorded")).toBeGreaterThan(10);
    const problems: string[] = [];
    for (const r of recs) {
      problems.push(...checkDigests(r).filter((p) => !(/payload digest mismatch/.test(p) && lfPayloadOk(r))).map((p) => `${p} [${JSON.stringify(r.block.toString("latin1").slice(0, 200))}]`));
      if (r.type === "response" || r.type === "request") {
        // The HTTP head ends at the first empty line (CRLF, or bare LF as lenient readers accept).
        const text = r.block.toString("latin1");
        const end = /\n\r?\n/.exec(text);
        const what = `${r.type} ${r.get("WARC-Target-URI")}: ${JSON.stringify(text.slice(0, 80))}`;
        if (!end) problems.push(`${what}: no complete HTTP head`);
        else if (r.type === "response" && !/^HTTP\/\d\.\d \d{3}/.test(text)) problems.push(`${what}: block does not start with a status line`);
        else if (r.type === "request" && !/^[!#$%&'*+.^_`|~0-9A-Za-z-]+ \S+ HTTP\/\d\.\d\r?\n/.test(text)) problems.push(`${what}: block does not start with a request line`);
      }
      if (!r.get("WARC-Record-ID") || !r.get("WARC-Date")) problems.push(`${r.type}: missing WARC-Record-ID or WARC-Date`);
    }
    expect(problems, label("malformed records")).toEqual([]);
    expect(uncaught, label("uncaught exceptions")).toEqual([]);
  });
});
