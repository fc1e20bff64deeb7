// Tests src/cli/ca.ts; kept under test/tls/ because it is the CA's user-facing side.
import { describe, it, expect, afterAll } from "vitest";
import { readFile, writeFile, stat } from "node:fs/promises";
import { join } from "node:path";
import { ProxyError } from "../../src/core/errors.js";
import { caCommand } from "../../src/cli/ca.js";
import { CA_CERT_FILE, CA_KEY_FILE } from "../../src/tls/store.js";
import { run, tempDir, removeTempDirs } from "./fixtures.js";

afterAll(removeTempDirs);

async function ca(args: Parameters<typeof caCommand>[0]): Promise<{ code: number; text: string }> {
  let text = "";
  const code = await caCommand(args, (s) => (text += s));
  return { code, text };
}

describe("lathe ca", () => {
  it("prints the path, fingerprint, SPKI hash and trust commands", async () => {
    const certs = join(await tempDir(), "certs");
    const first = await ca({ certs });
    expect(first.code).toBe(0);
    expect(first.text).toContain("created a new CA");
    const again = await ca({ certs });
    expect(again.code).toBe(0);
    expect(again.text).not.toContain("created a new CA");
    const pem = join(certs, CA_CERT_FILE);
    const fp = (await run("openssl", ["x509", "-in", pem, "-noout", "-fingerprint", "-sha256"])).stdout.trim().split("=")[1]!;
    const spki = (await run("sh", ["-c", `openssl x509 -in "$0" -noout -pubkey | openssl pkey -pubin -outform der | openssl dgst -sha256 -binary | base64`, pem])).stdout.trim();
    expect(again.text).toContain(pem);
    expect(again.text).toContain(fp);
    expect(again.text).toContain(spki);
    expect(again.text).toContain(`cp ${pem} /usr/local/share/ca-certificates/lathe-ca.crt && sudo update-ca-certificates`);
    expect(again.text).toContain(`keytool -importcert -alias lathe -file ${pem} -keystore lathe-truststore.jks -storepass changeit -noprompt`);
    expect(again.text).toContain(`certutil -d sql:$HOME/.pki/nssdb -A -t C,, -n lathe -i ${pem}`);
    expect(again.text).toContain(`--ignore-certificate-errors-spki-list=${spki}`);
    expect(again.text).not.toContain("PRIVATE KEY");
  });

  it("--export <path> writes the certificate only", async () => {
    const dir = await tempDir();
    const certs = join(dir, "certs");
    const target = join(dir, "exported.pem");
    const r = await ca({ certs, export: target });
    expect(r.code).toBe(0);
    expect(r.text).toContain(target);
    expect(await readFile(target, "utf8")).toBe(await readFile(join(certs, CA_CERT_FILE), "utf8"));
    expect(((await stat(target)).mode & 0o777).toString(8)).toBe("644");
  });

  it("export: true (--pem) prints the PEM after the summary", async () => {
    const certs = join(await tempDir(), "certs");
    const r = await ca({ certs, export: true });
    expect(r.code).toBe(0);
    expect(r.text).toMatch(/^created a new CA[\s\S]+SHA-256 fingerprint: /);
    expect(r.text.endsWith("\n\n" + (await readFile(join(certs, CA_CERT_FILE), "utf8")))).toBe(true);
    expect(r.text).not.toContain("PRIVATE KEY");
  });

  it("rejects with the store's ERR_CA, naming the file, on a broken CA", async () => {
    const certs = join(await tempDir(), "certs");
    await ca({ certs });
    await writeFile(join(certs, CA_KEY_FILE), "garbage", { mode: 0o600 });
    const e = await ca({ certs }).catch((err: unknown) => err);
    expect(e).toBeInstanceOf(ProxyError);
    expect((e as ProxyError).code).toBe("ERR_CA");
    expect((e as ProxyError).message).toContain(join(certs, CA_KEY_FILE));
  });
});
