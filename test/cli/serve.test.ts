import { describe, expect, it } from "vitest";
import { execFile } from "node:child_process";
import { mkdtempSync, readdirSync, writeFileSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { startHttpOrigin } from "../helpers/origin.js";
import { viaProxy } from "../helpers/client.js";
import { captureOf, readAllWarcs } from "../helpers/warcs.js";
import { BIN, startServe } from "../helpers/serve.js";

const run = promisify(execFile);
describe("lathe serve (the real command)", () => {
  it("prints the proxy address, CA path and WARC dir, records, and closes files on SIGTERM", async () => {
    const dir = mkdtempSync(join(tmpdir(), "lathe-cli-warcs-"));
    const certs = mkdtempSync(join(tmpdir(), "lathe-cli-certs-"));
    const origin = await startHttpOrigin();
    const { proc, out, proxyUrl } = await startServe(["--port", "0", "--dir", dir, "--certs", certs]);
    try {
      expect(out()).toContain(`CA certificate: ${join(certs, "lathe-ca.pem")}`);
      expect(out()).toContain(`WARC directory: ${dir}`);
      // The native malloc-trim helper is built wherever there is glibc (npm ci, npm run build).
      if (process.platform === "linux" && (process.report.getReport() as { header?: { glibcVersionRuntime?: string } }).header?.glibcVersionRuntime) {
        expect(out()).not.toContain("memory is not trimmed");
      }
      const r = await viaProxy(proxyUrl, `${origin.url}/text/321`);
      expect(r.body.length).toBe(321);
      // The capture is written just after the client got its response: the file is open meanwhile.
      for (let i = 0; i < 100 && !readdirSync(dir).some((f) => f.endsWith(".warc.gz.open")); i++) await new Promise((r) => setTimeout(r, 20));
      expect(readdirSync(dir).some((f) => f.endsWith(".warc.gz.open"))).toBe(true);
      const exited = new Promise<number | null>((res) => proc.on("exit", (c) => res(c)));
      proc.kill("SIGTERM");
      expect(await exited).toBe(0);
      const files = readdirSync(dir);
      expect(files.some((f) => f.endsWith(".open"))).toBe(false);
      const recs = await readAllWarcs(dir);
      expect(captureOf(recs, `${origin.url}/text/321`).response.body!.length).toBe(321);
      expect((statSync(join(certs, "lathe-ca.key")).mode & 0o777).toString(8)).toBe("600");
    } finally {
      proc.kill("SIGKILL");
      await origin.close();
    }
  });

  it("SIGTERM lets an exchange in flight finish and records it before exiting", async () => {
    const dir = mkdtempSync(join(tmpdir(), "lathe-cli-inflight-"));
    const certs = mkdtempSync(join(tmpdir(), "lathe-cli-certs-"));
    const origin = await startHttpOrigin();
    const { proc, proxyUrl } = await startServe(["--port", "0", "--dir", dir, "--certs", certs]);
    try {
      const slow = viaProxy(proxyUrl, `${origin.url}/slow/40`); // 40 bytes, 20 ms apart
      await new Promise((r) => setTimeout(r, 200));
      const exited = new Promise<number | null>((res) => proc.on("exit", (c) => res(c)));
      proc.kill("SIGTERM");
      const r = await slow;
      expect(r.body.toString()).toBe("x".repeat(40));
      expect(await exited).toBe(0);
      const recs = await readAllWarcs(dir);
      const resp = captureOf(recs, `${origin.url}/slow/40`).response;
      expect(resp.body!.toString()).toBe("x".repeat(40));
      expect(resp.get("WARC-Truncated")).toBeUndefined();
    } finally {
      proc.kill("SIGKILL");
      await origin.close();
    }
  });

  it("refuses a bad config file with a message naming the key, exit status 2", async () => {
    const dir = mkdtempSync(join(tmpdir(), "lathe-cli-bad-"));
    const cfg = join(dir, "c.json");
    writeFileSync(cfg, JSON.stringify({ warc: { gzipLevel: 12 } }));
    const err = await run(process.execPath, [BIN, "serve", "--config", cfg, "--port", "0", "--dir", dir, "--certs", dir]).catch((e) => e);
    expect(err.code).toBe(2);
    expect(err.stderr).toMatch(/warc\.gzipLevel: must be an integer between 0 and 9, got 12/);
  });

  it("refuses a LATHE_MALLOC_TRIM_MS that is not a number of milliseconds, naming it, before listening", async () => {
    const dir = mkdtempSync(join(tmpdir(), "lathe-cli-trim-"));
    const err = await run(process.execPath, [BIN, "serve", "--port", "0", "--control-port=-1", "--dir", dir, "--certs", dir], { env: { ...process.env, LATHE_MALLOC_TRIM_MS: "10s" } }).catch((e) => e);
    expect(err.code).toBe(2);
    expect(err.stderr).toMatch(/LATHE_MALLOC_TRIM_MS must be a whole number of milliseconds \(0 = off\), got "10s"/);
    expect(err.stdout ?? "").not.toMatch(/listening/);
  });

  it("refuses an unknown flag and a port that is taken", async () => {
    const err = await run(process.execPath, [BIN, "serve", "--bogus"]).catch((e) => e);
    expect(err.code).toBe(2);
    expect(err.stderr).toMatch(/bogus/);
  });

  it("lathe ca prints path, fingerprint and SPKI hash, and exports the certificate only", async () => {
    const certs = mkdtempSync(join(tmpdir(), "lathe-cli-ca-"));
    const exportTo = join(certs, "exported.pem");
    const { stdout } = await run(process.execPath, [BIN, "ca", "--certs", certs, "--export", exportTo]);
    expect(stdout).toContain(join(certs, "lathe-ca.pem"));
    expect(stdout).toMatch(/([0-9A-F]{2}:){31}[0-9A-F]{2}/);
    expect(stdout).toMatch(/[A-Za-z0-9+/]{43}=/);
    const { stdout: fp } = await run("openssl", ["x509", "-in", exportTo, "-noout", "-fingerprint", "-sha256"]);
    expect(stdout).toContain(fp.trim().split("=")[1]!);
  });
});
