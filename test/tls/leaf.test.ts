import "reflect-metadata";
import { describe, it, expect, beforeAll, afterAll } from "vitest";
import { X509Certificate, createHash, createPublicKey } from "node:crypto";
import * as x509 from "@peculiar/x509";
import { ProxyError } from "../../src/core/errors.js";
import * as der from "../../src/tls/der.js";
import { leafName, mintLeaf } from "../../src/tls/leaf.js";
import { DAY_MS, memoryCa, run, tempDir, writeIn, type MemoryCa, removeTempDirs } from "./fixtures.js";

afterAll(removeTempDirs);

const LONG = `${"a".repeat(60)}.example`; // 68 characters: over the CN bound

// name given → SAN the leaf must carry, the check openssl verify applies, the expected CN
const CASES: { name: string; san: { type: "dns" | "ip"; value: string }; check: string[]; cn?: string }[] = [
  { name: "example.test", san: { type: "dns", value: "example.test" }, check: ["-verify_hostname", "example.test"], cn: "example.test" },
  { name: "WWW.Example.TEST.", san: { type: "dns", value: "www.example.test" }, check: ["-verify_hostname", "www.example.test"], cn: "www.example.test" },
  { name: "127.0.0.1", san: { type: "ip", value: "127.0.0.1" }, check: ["-verify_ip", "127.0.0.1"], cn: "127.0.0.1" },
  { name: "2001:DB8::1", san: { type: "ip", value: "2001:db8::1" }, check: ["-verify_ip", "2001:db8::1"], cn: "2001:db8::1" },
  { name: "[::ffff:10.1.2.3]", san: { type: "ip", value: "::ffff:a01:203" }, check: ["-verify_ip", "::ffff:10.1.2.3"], cn: "::ffff:a01:203" },
  { name: "bücher.example", san: { type: "dns", value: "xn--bcher-kva.example" }, check: ["-verify_hostname", "xn--bcher-kva.example"], cn: "xn--bcher-kva.example" },
  { name: LONG, san: { type: "dns", value: LONG }, check: ["-verify_hostname", LONG] },
];

describe("mintLeaf", () => {
  let m: MemoryCa;
  let dir: string;
  let caFile: string;
  const now = Date.now();
  beforeAll(async () => {
    m = await memoryCa();
    dir = await tempDir();
    caFile = await writeIn(dir, "ca.pem", m.certPem);
  });

  describe.each(CASES)("for $name", ({ name, san, check, cn }) => {
    it("verifies with openssl as a TLS server certificate for that name", async () => {
      const leaf = mintLeaf(m.ca, m.leafKey, name, now);
      const f = await writeIn(dir, `leaf-${san.value.replace(/[^a-z0-9.-]/g, "_")}.pem`, leaf.certPem);
      const v = await run("openssl", ["verify", "-x509_strict", "-purpose", "sslserver", ...check, "-CAfile", caFile, f]);
      expect(v.stdout.trim(), v.stderr).toBe(`${f}: OK`);
    });

    it("has every field of the spec table", async () => {
      const leaf = mintLeaf(m.ca, m.leafKey, name, now);
      const c = new X509Certificate(leaf.certDer);
      const p = new x509.X509Certificate(leaf.certPem);
      expect(leaf.certPem).toBe(c.toString());

      // key: the shared leaf key, not the CA's
      const spki = c.publicKey.export({ type: "spki", format: "der" });
      expect(spki.equals(createPublicKey(m.leafKeyPem).export({ type: "spki", format: "der" }))).toBe(true);
      expect(spki.equals(m.cert.publicKey.export({ type: "spki", format: "der" }))).toBe(false);
      expect(p.signatureAlgorithm).toMatchObject({ name: "ECDSA", hash: { name: "SHA-256" } });
      expect(c.verify(m.cert.publicKey)).toBe(true);
      expect(c.checkIssued(m.cert)).toBe(true);

      // serial: 16 random bytes, positive (a leading 00 only when the top bit is set)
      const serial = Buffer.from(p.serialNumber, "hex");
      expect(serial.length).toBeLessThanOrEqual(16);
      expect(serial.length).toBeGreaterThanOrEqual(14);

      // subject and issuer
      expect(c.subject).toBe(cn === undefined ? undefined : `CN=${cn}`);
      const tbsFields = der.children(der.children(der.readTlv(leaf.certDer))[0]!);
      expect(der.raw(tbsFields[3]!).equals(m.ca.subjectDer)).toBe(true); // issuer copied verbatim
      expect(c.issuer).toBe(m.cert.subject);

      // validity
      expect(p.notBefore.getTime()).toBe(Math.floor((now - DAY_MS) / 1000) * 1000);
      expect(p.notAfter.getTime()).toBe(Math.floor((now + 397 * DAY_MS) / 1000) * 1000);
      expect(leaf.notAfterMs).toBe(p.notAfter.getTime());

      // subjectAltName: exactly one entry of the right type; critical only with an empty subject
      const sanExt = p.getExtension(x509.SubjectAlternativeNameExtension)!;
      expect(sanExt.names.items.map((n) => n.type)).toEqual([san.type]);
      if (san.type === "dns") expect(sanExt.names.items[0]!.value).toBe(san.value);
      else expect(c.checkIP(san.value)).toBe(san.value);
      expect(c.subjectAltName).not.toContain(san.type === "ip" ? "DNS:" : "IP Address:");
      expect(sanExt.critical).toBe(cn === undefined);

      const bc = p.getExtension(x509.BasicConstraintsExtension)!;
      expect([bc.critical, bc.ca]).toEqual([true, false]);
      const ku = p.getExtension(x509.KeyUsagesExtension)!;
      expect([ku.critical, ku.usages]).toEqual([true, x509.KeyUsageFlags.digitalSignature]);
      const eku = p.getExtension(x509.ExtendedKeyUsageExtension)!;
      expect([eku.critical, eku.usages]).toEqual([false, ["1.3.6.1.5.5.7.3.1"]]);
      expect(c.keyUsage).toEqual(["1.3.6.1.5.5.7.3.1"]);
      const aki = p.getExtension(x509.AuthorityKeyIdentifierExtension)!;
      expect(aki.keyId).toBe(new x509.X509Certificate(m.certPem).getExtension(x509.SubjectKeyIdentifierExtension)!.keyId);
      const ski = p.getExtension(x509.SubjectKeyIdentifierExtension)!;
      expect(ski.keyId).toBe(createHash("sha1").update(spki.subarray(-65)).digest("hex"));
      expect(p.extensions.length).toBe(6);
    });
  });

  it("gives each leaf a fresh serial", () => {
    const serials = new Set(Array.from({ length: 200 }, () => new X509Certificate(mintLeaf(m.ca, m.leafKey, "example.test", now).certDer).serialNumber));
    expect(serials.size).toBe(200);
  });

  it("never outlives the CA", async () => {
    const old = await memoryCa(now - 3500 * DAY_MS); // CA notAfter ≈ now + 150 days
    const leaf = mintLeaf(old.ca, old.leafKey, "example.test", now);
    expect(leaf.notAfterMs).toBe(old.ca.notAfterMs);
    expect(new X509Certificate(leaf.certDer).validTo).toBe(old.cert.validTo);
  });

  it("switches to GeneralizedTime from 2050 and still verifies", async () => {
    const t = Date.parse("2049-06-01T00:00:00Z");
    const m2 = await memoryCa(t);
    const leaf = mintLeaf(m2.ca, m2.leafKey, "example.test", t);
    const validity = der.children(der.children(der.readTlv(leaf.certDer))[0]!)[4]!;
    expect(der.children(validity).map((x) => x.tag)).toEqual([der.TAG.UTC_TIME, der.TAG.GENERALIZED_TIME]);
    expect(new Date(leaf.notAfterMs).toISOString()).toBe("2050-07-03T00:00:00.000Z");
    const d = await tempDir();
    const ca = await writeIn(d, "ca.pem", m2.certPem);
    const f = await writeIn(d, "leaf.pem", leaf.certPem);
    const attime = String(Math.floor(t / 1000) + 3600);
    const v = await run("openssl", ["verify", "-x509_strict", "-attime", attime, "-purpose", "sslserver", "-CAfile", ca, f]);
    expect(v.stdout.trim(), v.stderr).toBe(`${f}: OK`);
  });

  it("shows the critical flags in openssl's own rendering", async () => {
    const f = await writeIn(dir, "text.pem", mintLeaf(m.ca, m.leafKey, "127.0.0.1", now).certPem);
    const t = await run("openssl", ["x509", "-in", f, "-noout", "-text"]);
    expect(t.stdout).toMatch(/Basic Constraints: critical\s+CA:FALSE/);
    expect(t.stdout).toMatch(/Key Usage: critical\s+Digital Signature\n/);
    expect(t.stdout).toMatch(/Extended Key Usage: ?\s+TLS Web Server Authentication\n/);
    expect(t.stdout).toMatch(/Subject Alternative Name: ?\s+IP Address:127.0.0.1\n/);
  });

  it.each(["", ".", "*.example.com", "a b.example", "fe80::1%eth0", "[1::2::3]", `${"x".repeat(64)}.example`, `${"abc.".repeat(64)}com`, "ex/ample", "::1]/x]", "::1]#", "a?b.example", "ex%41.com", "a\\b.example"])(
    "refuses %j",
    (bad) => {
      expect(() => leafName(bad)).toThrow(ProxyError);
    },
  );

  it("normalises equivalent names to one SAN", () => {
    expect(leafName("0x7f.1")).toMatchObject({ kind: "ip", name: "127.0.0.1" });
    expect(leafName("[::1]")).toMatchObject({ kind: "ip", name: "::1" });
    expect(leafName("BÜCHER.example.")).toEqual({ kind: "dns", name: "xn--bcher-kva.example" });
    expect(leafName("under_score.example")).toEqual({ kind: "dns", name: "under_score.example" });
  });

  it("mints fast (printed, not asserted)", () => {
    const n = 2000;
    for (let i = 0; i < 100; i++) mintLeaf(m.ca, m.leafKey, `warm${i}.example.test`, now);
    const t0 = performance.now();
    for (let i = 0; i < n; i++) mintLeaf(m.ca, m.leafKey, `host${i}.example.test`, now);
    const us = ((performance.now() - t0) * 1000) / n;
    console.log(`mintLeaf: ${us.toFixed(1)} µs per leaf over ${n} leaves`);
    expect(us).toBeGreaterThan(0);
  });
});
