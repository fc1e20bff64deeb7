/** Shared by the tls tests: temp dirs, running the real openssl/curl, an in-memory CA. */
import { X509Certificate, createPrivateKey } from "node:crypto";
import { execFile } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createCa, createLeafKey } from "../../src/tls/ca.js";
import { caMaterial, leafKeyMaterial, type CaMaterial, type LeafKey } from "../../src/tls/leaf.js";

export const DAY_MS = 86_400_000;

const made: string[] = [];

export async function tempDir(prefix = "lathe-tls-"): Promise<string> {
  const d = await mkdtemp(join(tmpdir(), prefix));
  made.push(d);
  return d;
}

/** For afterAll: removes every directory tempDir made in this test file. */
export async function removeTempDirs(): Promise<void> {
  await Promise.all(made.splice(0).map((d) => rm(d, { recursive: true, force: true })));
}

export interface RunResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs a real tool asynchronously (a TLS server in this process must keep answering). */
export function run(cmd: string, args: string[]): Promise<RunResult> {
  return new Promise((resolve) => {
    execFile(cmd, args, { timeout: 20_000 }, (err, stdout, stderr) => {
      const code = err ? (typeof (err as { code?: unknown }).code === "number" ? (err as { code: number }).code : 1) : 0;
      resolve({ code, stdout, stderr });
    });
  });
}

export interface MemoryCa {
  certPem: string;
  keyPem: string;
  cert: X509Certificate;
  ca: CaMaterial;
  leafKeyPem: string;
  leafKey: LeafKey;
}

export async function memoryCa(nowMs = Date.now(), hostname = "testhost"): Promise<MemoryCa> {
  const { certPem, keyPem } = await createCa({ hostname, nowMs });
  const cert = new X509Certificate(certPem);
  const leafKeyPem = createLeafKey();
  return { certPem, keyPem, cert, ca: caMaterial(cert.raw, createPrivateKey(keyPem)), leafKeyPem, leafKey: leafKeyMaterial(leafKeyPem) };
}

export async function writeIn(dir: string, name: string, text: string): Promise<string> {
  const p = join(dir, name);
  await writeFile(p, text);
  return p;
}
