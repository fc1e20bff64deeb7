import "reflect-metadata";
import { describe, it, expect, beforeAll, afterAll } from "vitest";
import { createHash, createPrivateKey } from "node:crypto";
import * as x509 from "@peculiar/x509";
import { caCommonName } from "../../src/tls/ca.js";
import { DAY_MS, memoryCa, run, tempDir, writeIn, type MemoryCa, removeTempDirs } from "./fixtures.js";

afterAll(removeTempDirs);

const NOW = Date.parse("2026-03-04T05:06:07Z");

describe("createCa", () => {
  let m: MemoryCa;
  let p: x509.X509Certificate;
  beforeAll(async () => {
    m = await memoryCa(NOW, "crawler-1.example.org");
    p = new x509.X509Certificate(m.certPem);
  });

  it("is a self-signed ECDSA P-256 CA named after the host and date", async () => {
    expect(m.cert.subject).toBe("CN=lathe CA crawler-1.example.org 2026-03-04\nO=lathe");
    expect(m.cert.issuer).toBe(m.cert.subject);
    expect(m.cert.ca).toBe(true);
    expect(m.cert.verify(m.cert.publicKey)).toBe(true);
    expect(m.cert.publicKey.asymmetricKeyDetails?.namedCurve).toBe("prime256v1");
    expect(p.signatureAlgorithm).toMatchObject({ name: "ECDSA", hash: { name: "SHA-256" } });
    expect(await p.isSelfSigned()).toBe(true);
  });

  it("has a 16-byte positive serial", () => {
    expect(m.cert.serialNumber).toMatch(/^[0-7][0-9A-F]{31}$/);
    expect(m.cert.serialNumber.slice(0, 2)).not.toBe("00");
  });

  it("is valid from a day before creation for ten years", () => {
    expect(p.notBefore.getTime()).toBe(NOW - DAY_MS);
    expect(p.notAfter.toISOString()).toBe("2036-03-04T05:06:07.000Z");
  });

  it("has the spec's extensions", () => {
    const bc = p.getExtension(x509.BasicConstraintsExtension)!;
    expect([bc.critical, bc.ca, bc.pathLength]).toEqual([true, true, 0]);
    const ku = p.getExtension(x509.KeyUsagesExtension)!;
    expect(ku.critical).toBe(true);
    expect(ku.usages).toBe(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign);
    const ski = p.getExtension(x509.SubjectKeyIdentifierExtension)!;
    const bits = m.cert.publicKey.export({ type: "spki", format: "der" }).subarray(-65); // uncompressed point
    expect(ski.keyId).toBe(createHash("sha1").update(bits).digest("hex"));
    expect(m.ca.keyId.toString("hex")).toBe(ski.keyId);
  });

  it("exports its key as PKCS#8 PEM, matching the certificate", () => {
    expect(m.keyPem).toMatch(/^-----BEGIN PRIVATE KEY-----\n[A-Za-z0-9+/=\n]+-----END PRIVATE KEY-----\n$/);
    expect(m.cert.checkPrivateKey(createPrivateKey(m.keyPem))).toBe(true);
  });

  it("passes openssl verify -x509_strict and prints the subject as the spec writes it", async () => {
    const dir = await tempDir();
    const f = await writeIn(dir, "ca.pem", m.certPem);
    const v = await run("openssl", ["verify", "-x509_strict", "-CAfile", f, f]);
    expect(v.stdout.trim(), v.stderr).toBe(`${f}: OK`);
    const t = await run("openssl", ["x509", "-in", f, "-noout", "-subject", "-ext", "basicConstraints,keyUsage"]);
    expect(t.stdout).toContain("subject=CN = lathe CA crawler-1.example.org 2026-03-04, O = lathe");
    expect(t.stdout).toMatch(/Basic Constraints: critical\s+CA:TRUE, pathlen:0/);
    expect(t.stdout).toMatch(/Key Usage: critical\s+Certificate Sign, CRL Sign/);
  });

  it("keeps the common name within the X.520 bound of 64", () => {
    const cn = caCommonName("h".repeat(100), NOW);
    expect(cn.length).toBe(64);
    expect(cn).toMatch(/^lathe CA h+ 2026-03-04$/);
    expect(caCommonName("", NOW)).toBe("lathe CA localhost 2026-03-04");
  });
});
