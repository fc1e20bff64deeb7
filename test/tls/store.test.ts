import { describe, it, expect, afterAll } from "vitest";
import { X509Certificate, generateKeyPairSync } from "node:crypto";
import { chmod, readFile, readdir, rm, stat, writeFile, mkdir } from "node:fs/promises";
import { join } from "node:path";
import { ProxyError } from "../../src/core/errors.js";
import { createLogger } from "../../src/core/log.js";
import { loadOrCreateCa, CA_CERT_FILE, CA_KEY_FILE, LEAF_KEY_FILE } from "../../src/tls/store.js";
import { run, tempDir, removeTempDirs } from "./fixtures.js";

afterAll(removeTempDirs);

const mode = async (p: string) => ((await stat(p)).mode & 0o777).toString(8);
const pemBody = (pem: string) => pem.replace(/-----[A-Z ]+-----/g, "").replace(/\s+/g, "");

async function caError(dir: string): Promise<ProxyError> {
  const e = await loadOrCreateCa(dir).then(() => undefined, (err: unknown) => err);
  expect(e).toBeInstanceOf(ProxyError);
  expect((e as ProxyError).code).toBe("ERR_CA");
  return e as ProxyError;
}

describe("loadOrCreateCa", () => {
  it("creates the three files with the spec's modes, in a 0700 directory it makes", async () => {
    const dir = join(await tempDir(), "nested", "certs");
    const lines: string[] = [];
    const store = await loadOrCreateCa(dir, createLogger({ write: (l) => lines.push(l) }), { hostname: "box", nowMs: Date.now() });
    expect(store.created).toBe(true);
    expect(await mode(dir)).toBe("700");
    expect(await mode(join(dir, CA_CERT_FILE))).toBe("644");
    expect(await mode(join(dir, CA_KEY_FILE))).toBe("600");
    expect(await mode(join(dir, LEAF_KEY_FILE))).toBe("600");
    expect((await readdir(dir)).sort()).toEqual([CA_CERT_FILE, CA_KEY_FILE, LEAF_KEY_FILE].sort()); // no temp files left
    expect(store.certPath).toBe(join(dir, CA_CERT_FILE));
    expect(store.caCertPem).toBe(await readFile(store.certPath, "utf8"));
    expect(store.subject).toMatch(/^CN=lathe CA box \d{4}-\d\d-\d\d, O=lathe$/);
    expect(lines.join("\n")).toContain("ca.created");
    expect(lines.join("\n")).not.toContain("PRIVATE KEY");
  });

  it("keeps the modes whatever the umask", async () => {
    const dir = join(await tempDir(), "certs");
    const old = process.umask(0o077);
    try {
      await loadOrCreateCa(dir);
    } finally {
      process.umask(old);
    }
    expect(await mode(join(dir, CA_CERT_FILE))).toBe("644");
  });

  it("leaves an existing directory's mode alone", async () => {
    const dir = await tempDir();
    await chmod(dir, 0o755);
    await loadOrCreateCa(dir);
    expect(await mode(dir)).toBe("755");
  });

  it("reuses the CA on later starts", async () => {
    const dir = await tempDir();
    const a = await loadOrCreateCa(dir);
    const b = await loadOrCreateCa(dir);
    expect(b.created).toBe(false);
    expect(b.fingerprintSha256).toBe(a.fingerprintSha256);
    expect(b.caCertDer.equals(a.caCertDer)).toBe(true);
    expect(b.leafKey.spkiDer.equals(a.leafKey.spkiDer)).toBe(true);
  });

  it("reports the fingerprint and SPKI hash as openssl computes them", async () => {
    const dir = await tempDir();
    const s = await loadOrCreateCa(dir);
    const fp = await run("openssl", ["x509", "-in", s.certPath, "-noout", "-fingerprint", "-sha256"]);
    expect(fp.stdout.trim()).toBe(`sha256 Fingerprint=${s.fingerprintSha256}`);
    const spki = await run("sh", ["-c", `openssl x509 -in "$0" -noout -pubkey | openssl pkey -pubin -outform der | openssl dgst -sha256 -binary | base64`, s.certPath]);
    expect(spki.stdout.trim()).toBe(s.spkiSha256Base64);
  });

  it("puts the CA key in no other file and nowhere in the store object", async () => {
    const dir = await tempDir();
    const s = await loadOrCreateCa(dir);
    const body = pemBody(await readFile(join(dir, CA_KEY_FILE), "utf8"));
    for (const f of await readdir(dir)) {
      if (f === CA_KEY_FILE) continue;
      expect(pemBody(await readFile(join(dir, f), "utf8"))).not.toContain(body);
    }
    expect(JSON.stringify(s)).not.toContain(body);
  });

  it("stops on a tampered CA key, naming the file", async () => {
    const dir = await tempDir();
    await loadOrCreateCa(dir);
    const other = generateKeyPairSync("ec", { namedCurve: "P-256" }).privateKey.export({ type: "pkcs8", format: "pem" });
    await writeFile(join(dir, CA_KEY_FILE), other, { mode: 0o600 });
    const e = await caError(dir);
    expect(e.message).toContain(join(dir, CA_KEY_FILE));
    expect(e.message).toMatch(/does not match/);
  });

  it("stops on a garbled key or certificate, naming the file", async () => {
    const dir = await tempDir();
    await loadOrCreateCa(dir);
    const keyPath = join(dir, CA_KEY_FILE);
    const key = await readFile(keyPath, "utf8");
    await writeFile(keyPath, key.replace(/[A-Za-z]{8}/, "AAAAAAAA"));
    expect((await caError(dir)).message).toContain(keyPath);
    await writeFile(keyPath, key);

    const certPath = join(dir, CA_CERT_FILE);
    await writeFile(certPath, "not a certificate\n");
    const e = await caError(dir);
    expect(e.message).toContain(certPath);
    expect(e.message).toMatch(/remove .* to make a new CA/);
  });

  it("stops when a key file is readable by group or others", async () => {
    for (const file of [CA_KEY_FILE, LEAF_KEY_FILE]) {
      const dir = await tempDir();
      await loadOrCreateCa(dir);
      await chmod(join(dir, file), 0o640);
      const e = await caError(dir);
      expect(e.message).toContain(join(dir, file));
      expect(e.message).toContain(`chmod 600 ${join(dir, file)}`);
    }
  });

  it("stops on an unreadable file", async () => {
    const dir = await tempDir();
    await loadOrCreateCa(dir);
    const keyPath = join(dir, CA_KEY_FILE);
    if (process.getuid?.() === 0) {
      // root reads anything: a directory in the key's place is unreadable as a file
      await rm(keyPath);
      await mkdir(keyPath, { mode: 0o700 });
    } else {
      await chmod(keyPath, 0o000);
    }
    expect((await caError(dir)).message).toContain(`cannot read ${keyPath}`);
  });

  it("stops, never regenerating, when only some files are present", async () => {
    for (const missing of [CA_CERT_FILE, CA_KEY_FILE, LEAF_KEY_FILE]) {
      const dir = await tempDir();
      const s = await loadOrCreateCa(dir);
      await rm(join(dir, missing));
      const e = await caError(dir);
      expect(e.message).toContain(join(dir, missing));
      expect(await readdir(dir)).not.toContain(missing);
      if (missing !== CA_CERT_FILE) expect(new X509Certificate(await readFile(s.certPath)).fingerprint256).toBe(s.fingerprintSha256);
    }
  });

  it("stops when the leaf key is the CA key", async () => {
    const dir = await tempDir();
    await loadOrCreateCa(dir);
    await writeFile(join(dir, LEAF_KEY_FILE), await readFile(join(dir, CA_KEY_FILE)), { mode: 0o600 });
    expect((await caError(dir)).message).toContain(join(dir, LEAF_KEY_FILE));
  });

  it("stops when the certs path cannot be a directory", async () => {
    const parent = await tempDir();
    await writeFile(join(parent, "file"), "x");
    await caError(join(parent, "file"));
  });
});
