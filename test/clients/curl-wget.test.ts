/**
 * The real curl and wget binaries through lathe, HTTP and HTTPS (CONNECT, lathe's CA given with
 * --cacert / --ca-certificate). What each client saved must be byte-for-byte what the origin sent;
 * the WARC (read back with warcio) must hold response + request for each exchange with valid
 * digests, the origin's body and the client's request body.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import http from "node:http";
import https from "node:https";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { gunzipSync } from "node:zlib";
import { originCerts } from "../helpers/certs.js";
import { bytesOf, startHttpOrigin, startHttpsOrigin, type Origin } from "../helpers/origin.js";
import { startTestLathe, type TestLathe } from "../helpers/lathe.js";
import { captureOf, checkDigests, readAllWarcs, type ReadRecord } from "../helpers/warcs.js";

const CLIENT_TIMEOUT_MS = 30_000;
const work = mkdtempSync(join(tmpdir(), "lathe-clients-"));
// A clean environment: no proxy variables from the host, no user config files.
const env = { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: work, LANG: "C" };

function run(cmd: string, args: string[]): Promise<{ stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    execFile(cmd, args, { env, timeout: CLIENT_TIMEOUT_MS, maxBuffer: 16 * 1024 * 1024, killSignal: "SIGKILL" }, (err, stdout, stderr) => {
      if (err) reject(new Error(`${cmd} ${args.join(" ")} failed: ${err.message}\n${stderr}`));
      else resolve({ stdout, stderr });
    });
  });
}

/** The origin's response body, fetched directly (no proxy, no decoding). */
function direct(url: string, ca?: string): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const get = url.startsWith("https:") ? https.get : http.get;
    const req = get(url, { agent: false, ...(ca ? { ca } : {}) }, (res) => {
      const parts: Buffer[] = [];
      res.on("data", (d: Buffer) => parts.push(d));
      res.on("end", () => resolve(Buffer.concat(parts)));
      res.on("error", reject);
    });
    req.setTimeout(CLIENT_TIMEOUT_MS, () => req.destroy(new Error(`direct ${url} timed out`)));
    req.on("error", reject);
  });
}

let n = 0;
const outFile = () => join(work, `out-${++n}`);

interface Case {
  client: "curl" | "wget";
  method: "GET" | "POST";
  url: string;
  /** Bytes the client saved. */
  saved: Buffer;
  /** Bytes the origin sent as the body (raw, before any content decoding). */
  originBody: Buffer;
  /** Request body the client sent. */
  sentBody: Buffer;
  expectContinue?: boolean;
}

function suite(scheme: "http" | "https") {
  describe(`curl and wget through lathe (${scheme})`, () => {
    const certs = originCerts();
    let origin: Origin;
    let lathe: TestLathe;
    let stopped = false;
    const cases: Case[] = [];
    const ca = scheme === "https" ? certs.caPem : undefined;

    const curl = (args: string[], url: string, out: string) =>
      run("curl", ["-sS", "--fail", "--max-time", "25", "-x", lathe.proxyUrl, "--cacert", lathe.ca.certPath, "-o", out, ...args, url]);
    const wget = (args: string[], url: string, out: string) =>
      run("wget", [
        "-q",
        "--no-hsts",
        "--no-config",
        "--tries=1",
        "--timeout=25",
        "-e", "use_proxy=yes",
        "-e", `http_proxy=${lathe.proxyUrl}`,
        "-e", `https_proxy=${lathe.proxyUrl}`,
        `--ca-certificate=${lathe.ca.certPath}`,
        "-O", out,
        ...args,
        url,
      ]);

    beforeAll(async () => {
      origin = scheme === "https" ? await startHttpsOrigin(certs) : await startHttpOrigin();
      // Dedup off: curl and wget fetch the same bodies, and this file checks every full response record.
      lathe = await startTestLathe({ upstream: { caFile: certs.caFile, allowHosts: ["127.0.0.1", "localhost"] }, dedup: { policy: "off" } });
    });
    afterAll(async () => {
      if (!stopped) await lathe?.stop();
      await origin?.close();
    });

    it("curl: GET fixed-length, chunked and gzip (--compressed) bodies byte-exact", async () => {
      for (const path of ["/bytes/100000?c=curl", "/chunked/50000?c=curl"]) {
        const url = `${origin.url}${path}`;
        const out = outFile();
        await curl([], url, out);
        const want = await direct(url, ca);
        expect(readFileSync(out).equals(want), url).toBe(true);
        cases.push({ client: "curl", method: "GET", url, saved: readFileSync(out), originBody: want, sentBody: Buffer.alloc(0) });
      }
      const url = `${origin.url}/gzip?c=curl`;
      const out = outFile();
      await curl(["--compressed"], url, out);
      const raw = await direct(url, ca);
      expect(raw.subarray(0, 2).toString("hex")).toBe("1f8b");
      // curl decoded the gzip it received: what it saved is the origin's bytes, decoded.
      expect(readFileSync(out).equals(gunzipSync(raw))).toBe(true);
      cases.push({ client: "curl", method: "GET", url, saved: readFileSync(out), originBody: raw, sentBody: Buffer.alloc(0) });
    });

    it("curl: POST a 3 KiB body without Expect, and a 2 MB body with Expect: 100-continue", async () => {
      const small = bytesOf(3000, 31);
      const smallFile = join(work, `small-${scheme}.bin`);
      writeFileSync(smallFile, small);
      const url1 = `${origin.url}/echo?c=curl-small`;
      const out1 = outFile();
      await curl(["-H", "Expect:", "-H", "Content-Type: application/octet-stream", "--data-binary", `@${smallFile}`], url1, out1);
      expect(readFileSync(out1).equals(small)).toBe(true);
      cases.push({ client: "curl", method: "POST", url: url1, saved: readFileSync(out1), originBody: small, sentBody: small });

      const big = bytesOf(2_000_000, 32);
      const bigFile = join(work, `big-${scheme}.bin`);
      writeFileSync(bigFile, big);
      const url2 = `${origin.url}/echo?c=curl-continue`;
      const out2 = outFile();
      const started = Date.now();
      await curl(["-H", "Expect: 100-continue", "-H", "Content-Type: application/octet-stream", "--data-binary", `@${bigFile}`], url2, out2);
      // curl waits 1 s for "100 Continue" before sending anyway; lathe must answer it promptly.
      expect(Date.now() - started).toBeLessThan(900);
      expect(readFileSync(out2).equals(big)).toBe(true);
      const seen = origin.seen.find((s) => s.path === "/echo?c=curl-continue")!;
      expect(seen.body.equals(big)).toBe(true);
      cases.push({ client: "curl", method: "POST", url: url2, saved: readFileSync(out2), originBody: big, sentBody: big, expectContinue: true });
    });

    it("wget: GET fixed-length, chunked and gzip (undecoded) bodies, and a 5 KiB POST", async () => {
      for (const path of ["/bytes/70000?c=wget", "/chunked/30000?c=wget", "/gzip?c=wget"]) {
        const url = `${origin.url}${path}`;
        const out = outFile();
        await wget([], url, out);
        const want = await direct(url, ca);
        expect(readFileSync(out).equals(want), url).toBe(true);
        cases.push({ client: "wget", method: "GET", url, saved: readFileSync(out), originBody: want, sentBody: Buffer.alloc(0) });
      }
      const body = bytesOf(5000, 51);
      const bodyFile = join(work, `wget-post-${scheme}.bin`);
      writeFileSync(bodyFile, body);
      const url = `${origin.url}/echo?c=wget`;
      const out = outFile();
      await wget([`--post-file=${bodyFile}`, "--header=Content-Type: application/octet-stream"], url, out);
      expect(readFileSync(out).equals(body)).toBe(true);
      cases.push({ client: "wget", method: "POST", url, saved: readFileSync(out), originBody: body, sentBody: body });
    });

    it("records response + request for each exchange, bodies and digests matching", async () => {
      await lathe.stop();
      stopped = true;
      const records: ReadRecord[] = await readAllWarcs(lathe.dir);
      expect(records[0]!.type).toBe("warcinfo");
      for (const r of records) expect(checkDigests(r)).toEqual([]);
      expect(cases.length).toBe(9);
      for (const c of cases) {
        const { response, request } = captureOf(records, c.url);
        const u = new URL(c.url);
        expect(response.httpHead!.startsWith("HTTP/1.1 200 "), c.url).toBe(true);
        // Interim 100 Continue is not part of the record.
        expect(response.httpHead, c.url).not.toMatch(/^HTTP\/1\.1 100/);
        expect(response.body!.equals(c.originBody), c.url).toBe(true);
        expect(response.get("WARC-IP-Address")).toBe("127.0.0.1");
        expect(request.httpHead!.startsWith(`${c.method} ${u.pathname}${u.search} HTTP/1.1\r\n`), c.url).toBe(true);
        // Names go upstream as the client sent them; curl speaks h2 (lowercase names) to lathe's
        // TLS inside a tunnel by default, HTTP/1.1 for plain http.
        const curlAgent = scheme === "https" ? /\r\nuser-agent: curl\/[\d.]+\r\n/ : /\r\nUser-Agent: curl\/[\d.]+\r\n/;
        expect(request.httpHead, c.url).toMatch(c.client === "curl" ? curlAgent : /\r\nUser-Agent: Wget\/[\d.]+/);
        expect(request.httpHead, c.url).not.toMatch(/\r\nProxy-Connection:/i);
        expect(request.body!.equals(c.sentBody), c.url).toBe(true);
        if (c.sentBody.length) expect(request.get("WARC-Payload-Digest")).toMatch(/^sha1:[A-Z2-7]{32}$/);
        else expect(request.get("WARC-Payload-Digest")).toBeUndefined();
        if (c.expectContinue) expect(request.httpHead).toMatch(/\r\nExpect: 100-continue\r\n/i);
        if (c.url.includes("/chunked/")) expect(response.httpHead).toMatch(/\r\nX-Orig-Transfer-Encoding: chunked\r\n/);
        if (c.url.includes("/gzip")) expect(response.httpHead).toMatch(/\r\nContent-Encoding: gzip\r\n/);
        if (scheme === "https") {
          expect(response.getAll("WARC-Protocol"), c.url).toEqual(["http/1.1", expect.stringMatching(/^tls\/1\.[23]$/)]);
          expect(response.get("WARC-Cipher-Suite")).toMatch(/^TLS_/);
          expect(request.getAll("WARC-Protocol")).toEqual(response.getAll("WARC-Protocol"));
        } else {
          expect(response.getAll("WARC-Protocol"), c.url).toEqual(["http/1.1"]);
          expect(response.get("WARC-Cipher-Suite")).toBeUndefined();
        }
      }
      const meta = records.filter((r) => r.type === "metadata");
      if (scheme === "https") {
        // One TLS metadata record per upstream TLS connection, each concurrent to a response.
        expect(meta.length).toBeGreaterThanOrEqual(1);
        for (const m of meta) {
          expect(m.get("WARC-Target-URI")!.startsWith(origin.url)).toBe(true);
          expect(m.get("Content-Type")).toBe("application/warc-fields");
          const first = records.find((r) => r.get("WARC-Record-ID") === m.get("WARC-Concurrent-To"));
          expect(first?.type).toBe("response");
          expect(m.block.toString("latin1")).toMatch(/(^|\r\n)tls-verify-result: ok\r\n/);
          expect(m.block.toString("latin1")).toMatch(/(^|\r\n)tls-protocol: tls\/1\.[23]\r\n/);
        }
      } else {
        expect(meta).toEqual([]);
      }
      // Nothing but these exchanges was recorded.
      expect(records.filter((r) => r.type === "response").length).toBe(cases.length);
    });
  });
}

suite("http");
suite("https");
