/**
 * The pieces of `lathe record` that need no browser: the deny-list of Chromium's service hosts
 * (what it refuses, what it must leave alone, and that a session refuses them before any DNS
 * lookup without recording anything), Chromium's flags, the URL list, image sizes.
 */
import { describe, expect, it } from "vitest";
import { readdirSync } from "node:fs";
import { hostMatches } from "../../src/proxy/target.js";
import { CHROMIUM_SERVICE_HOSTS, chromiumServiceHosts } from "../../src/record/denyList.js";
import { chromiumArgs } from "../../src/record/browser.js";
import { checkUrl, parseUrlList } from "../../src/record/urls.js";
import { jpegSize, pngSize } from "../../src/record/screenshots.js";
import { startTestLathe } from "../helpers/lathe.js";
import { viaProxy } from "../helpers/client.js";
import { readAllWarcs } from "../helpers/warcs.js";
import net from "node:net";

const denied = (host: string) => chromiumServiceHosts().some((p) => hostMatches(host, p));

describe("Chromium's service hosts (decisions.md §9)", () => {
  it("refuses update, safe-browsing, optimization-guide, sync, component and push hosts", () => {
    for (const h of [
      "update.googleapis.com",
      "clients2.google.com",
      "clients2.googleusercontent.com",
      "redirector.gvt1.com",
      "edgedl.me.gvt1.com",
      "r1---sn-abc.gvt1.com",
      "beacons.gvt2.com",
      "clientservices.googleapis.com",
      "safebrowsing.googleapis.com",
      "safebrowsingohttpgateway.googleapis.com",
      "optimizationguide-pa.googleapis.com",
      "content-autofill.googleapis.com",
      "clients4.google.com",
      "android.clients.google.com",
      "mtalk.google.com",
      "accounts.google.com",
      "UPDATE.googleapis.com",
    ]) {
      expect(denied(h), h).toBe(true);
    }
  });

  it("leaves alone the hosts web pages load from", () => {
    for (const h of [
      "fonts.gstatic.com",
      "www.gstatic.com",
      "ssl.gstatic.com",
      "fonts.googleapis.com",
      "ajax.googleapis.com",
      "maps.googleapis.com",
      "www.googleapis.com",
      "storage.googleapis.com",
      "translate.googleapis.com",
      "www.google.com",
      "google.com",
      "clients1.google.com",
      "dl.google.com",
      "www.youtube.com",
      "example.com",
      "127.0.0.1",
      "localhost",
      "notgvt1.com",
    ]) {
      expect(denied(h), h).toBe(false);
    }
  });

  it("says why for every entry, with no duplicates", () => {
    const patterns = CHROMIUM_SERVICE_HOSTS.map((h) => h.pattern);
    expect(new Set(patterns).size).toBe(patterns.length);
    for (const h of CHROMIUM_SERVICE_HOSTS) {
      expect(h.why.length, h.pattern).toBeGreaterThan(5);
      expect(h.pattern, "exact host or *.suffix").toMatch(/^(\*\.)?[a-z0-9-]+(\.[a-z0-9-]+)+$/);
    }
  });

  it("a session with the list refuses them (403, before DNS) and records nothing", async () => {
    const lathe = await startTestLathe();
    try {
      const s = await lathe.facade.openSession({ collection: "default", denyHosts: chromiumServiceHosts() });
      // Plain HTTP through the session port.
      const r = await viaProxy(s.proxyUrl, "http://update.googleapis.com/service/update2/json");
      expect(r.status).toBe(403);
      expect(r.body.toString()).toMatch(/refused in this recording session/);
      // CONNECT (what Chromium sends for https).
      const head = await new Promise<string>((resolve, reject) => {
        const sock = net.connect(s.proxy.port, s.proxy.host, () => sock.write("CONNECT safebrowsing.googleapis.com:443 HTTP/1.1\r\nHost: safebrowsing.googleapis.com:443\r\n\r\n"));
        let got = "";
        sock.on("data", (d) => {
          got += d.toString("latin1");
          if (got.includes("\r\n\r\n")) {
            sock.destroy();
            resolve(got);
          }
        });
        sock.on("error", reject);
        sock.setTimeout(10_000, () => reject(new Error("CONNECT timed out")));
      });
      expect(head).toMatch(/^HTTP\/1\.1 403 /);
      const summary = await lathe.facade.closeSession(s.id);
      expect(summary.captures).toBe(0);
    } finally {
      await lathe.stop();
    }
    const records = await readAllWarcs(lathe.dir);
    expect(records.filter((r) => r.type !== "warcinfo")).toEqual([]);
    expect(readdirSync(lathe.dir).some((f) => f.endsWith(".open"))).toBe(false);
  });
});

describe("Chromium flags", () => {
  it("point the browser at the session, trust lathe's CA by SPKI only, and switch background traffic off", () => {
    const args = chromiumArgs({ proxyUrl: "http://127.0.0.1:4321", spkiSha256Base64: "abc=", root: false });
    expect(args).toEqual([
      "--proxy-server=http://127.0.0.1:4321",
      "--proxy-bypass-list=<-loopback>",
      "--ignore-certificate-errors-spki-list=abc=",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
      "--no-first-run",
      "--no-default-browser-check",
      "--disable-quic",
    ]);
    expect(chromiumArgs({ proxyUrl: "http://127.0.0.1:1", spkiSha256Base64: "x", root: true })).toContain("--no-sandbox");
  });
});

describe("URL list", () => {
  it("one URL a line, # comments, blank lines; no scheme means https", () => {
    expect(parseUrlList("# pages\nhttps://a.example/x\n\n  http://b.example/  # trailing\n#https://skipped/\nexample.org/p?q=1#f\n127.0.0.1:8443/y\n")).toEqual([
      "https://a.example/x",
      "http://b.example/",
      "https://example.org/p?q=1#f",
      "https://127.0.0.1:8443/y",
    ]);
  });
  it("names the line of a bad entry", () => {
    expect(() => parseUrlList("https://ok/\nftp://x/\n", "list.txt")).toThrow(/list\.txt:2: only http and https/);
    expect(() => checkUrl("http://[bad")).toThrow(/not a URL/);
    expect(() => checkUrl("javascript:alert(1)")).toThrow(/only http and https/);
  });
});

describe("image sizes", () => {
  it("reads PNG IHDR and JPEG SOF", () => {
    const png = Buffer.alloc(24);
    png.writeUInt32BE(0x89504e47, 0);
    png.write("IHDR", 12, "latin1");
    png.writeUInt32BE(1280, 16);
    png.writeUInt32BE(720, 20);
    expect(pngSize(png)).toEqual({ width: 1280, height: 720 });
    // SOI, APP0 (length 16), SOF0 (8 bits, 360 × 640).
    const jpg = Buffer.concat([Buffer.from([0xff, 0xd8, 0xff, 0xe0, 0x00, 0x10]), Buffer.alloc(14), Buffer.from([0xff, 0xc0, 0x00, 0x11, 0x08, 0x01, 0x68, 0x02, 0x80, 0x03]), Buffer.alloc(12)]);
    expect(jpegSize(jpg)).toEqual({ width: 640, height: 360 });
    expect(jpegSize(Buffer.from("nope"))).toBe(null);
  });
});
