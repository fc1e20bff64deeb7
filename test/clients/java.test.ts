import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { execFile, execFileSync } from "node:child_process";
import { existsSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { originCerts } from "../helpers/certs.js";
import { startHttpOrigin, startHttpsOrigin, type Origin } from "../helpers/origin.js";
import { startTestLathe, type TestLathe } from "../helpers/lathe.js";
import { captureOf, checkDigests, readAllWarcs } from "../helpers/warcs.js";

const run = promisify(execFile);
const SRC = new URL("./java/Fetch.java", import.meta.url).pathname;
const haveJava = (() => {
  try {
    execFileSync("javac", ["-version"], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
})();

describe.skipIf(!haveJava)("a Java HttpClient through a session port (skipped without javac: apt-get install -y default-jdk-headless)", () => {
  let http: Origin;
  let https: Origin;
  let lathe: TestLathe;
  const work = mkdtempSync(join(tmpdir(), "lathe-java-"));
  beforeAll(async () => {
    const certs = originCerts();
    http = await startHttpOrigin();
    https = await startHttpsOrigin(certs);
    lathe = await startTestLathe({ upstream: { caFile: certs.caFile } });
    execFileSync("javac", ["-d", work, SRC]);
    execFileSync("keytool", ["-importcert", "-noprompt", "-alias", "lathe", "-file", lathe.ca.certPath, "-keystore", join(work, "trust.p12"), "-storetype", "PKCS12", "-storepass", "changeit"], { stdio: "ignore" });
  });
  afterAll(async () => {
    await lathe.stop();
    await http.close();
    await https.close();
  });

  it("records HTTP and HTTPS fetches into the session's collection, with its warcinfo", async () => {
    expect(existsSync(join(work, "Fetch.class"))).toBe(true);
    lathe.facade.createCollection({ name: "heritrix-job", warcinfo: { operator: "Java crawl", robots: "classic" } });
    const s = await lathe.facade.openSession({ collection: "heritrix-job" });
    const urls = [`${http.url}/text/1234`, `${https.url}/bytes/4321`, `${https.url}/chunked/5000`];
    // Java never proxies loopback destinations unless http.nonProxyHosts is emptied.
    const { stdout } = await run("java", [`-Djavax.net.ssl.trustStore=${join(work, "trust.p12")}`, "-Djavax.net.ssl.trustStorePassword=changeit", "-Dhttp.nonProxyHosts=", "-cp", work, "Fetch", "127.0.0.1", String(s.proxy.port), ...urls], { timeout: 60000 });
    expect(stdout.trim().split("\n")).toEqual([`200 1234 ${urls[0]}`, `200 4321 ${urls[1]}`, `200 5000 ${urls[2]}`]);
    const summary = await lathe.facade.closeSession(s.id);
    expect(summary.captures).toBe(3);
    const recs = await readAllWarcs(lathe.dir);
    for (const r of recs) expect(checkDigests(r)).toEqual([]);
    for (const u of urls) {
      const { response, request } = captureOf(recs, u);
      expect(summary.files.some((f) => response.file.endsWith(f))).toBe(true);
      expect(request.httpHead).toMatch(/User-Agent: Java-http-client/);
    }
    const info = recs.find((r) => r.type === "warcinfo" && r.file.includes("heritrix-job-"))!;
    expect(info.block.toString()).toContain("operator: Java crawl\r\n");
    expect(info.block.toString()).toContain("robots: classic\r\n");
  });
});
