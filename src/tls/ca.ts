/**
 * Creating the key material lathe keeps in certs/ (mitm-certificates.md §2): the CA certificate
 * and key, and the one leaf key. Pure apart from randomness: the caller supplies hostname and
 * time, the store writes the files. Runs once per installation, so a certificate library's
 * milliseconds do not matter here (leaves are built by hand in leaf.ts).
 */
import "reflect-metadata"; // @peculiar/x509's dependency injection needs it loaded first
import { generateKeyPairSync, webcrypto } from "node:crypto";
import * as x509 from "@peculiar/x509";

x509.cryptoProvider.set(webcrypto as unknown as Crypto);

const DAY_MS = 86_400_000;
const ALG = { name: "ECDSA", namedCurve: "P-256", hash: "SHA-256" } as const;
/** X.520 ub-common-name; the CN is "lathe CA <hostname> <date>", 20 characters plus the host. */
const MAX_CN = 64;

export interface CreatedCa {
  certPem: string;
  /** PKCS#8 PEM. */
  keyPem: string;
}

export function caCommonName(hostname: string, nowMs: number): string {
  const date = new Date(nowMs).toISOString().slice(0, 10);
  const room = MAX_CN - "lathe CA ".length - 1 - date.length;
  // Only characters a Name can carry unambiguously; a long host name is cut to fit the bound.
  const host = (hostname.replace(/[^A-Za-z0-9._-]/g, "-") || "localhost").slice(0, room);
  return `lathe CA ${host} ${date}`;
}

export async function createCa(opts: { hostname: string; nowMs: number }): Promise<CreatedCa> {
  const keys = (await webcrypto.subtle.generateKey(ALG, true, ["sign", "verify"])) as CryptoKeyPair;
  const serial = new Uint8Array(16);
  // High bit cleared keeps it positive in 16 octets; a zero first byte would shrink the
  // minimal INTEGER encoding, so draw again (RFC 5280 §4.1.2.2).
  do webcrypto.getRandomValues(serial);
  while ((serial[0]! & 0x7f) === 0);
  serial[0]! &= 0x7f;
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: Buffer.from(serial).toString("hex"),
    // DER order CN then O, so `openssl x509 -subject` prints "CN = lathe CA ..., O = lathe".
    name: [{ CN: [caCommonName(opts.hostname, opts.nowMs)] }, { O: ["lathe"] }],
    notBefore: new Date(opts.nowMs - DAY_MS),
    notAfter: plusYears(opts.nowMs, 10),
    keys,
    signingAlgorithm: ALG,
    extensions: [
      new x509.BasicConstraintsExtension(true, 0, true), // CA:TRUE, pathlen:0: it signs leaves only
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey), // SHA-1 of the key bits
    ],
  });
  const pkcs8 = Buffer.from(await webcrypto.subtle.exportKey("pkcs8", keys.privateKey));
  return { certPem: cert.toString("pem") + "\n", keyPem: pemOf("PRIVATE KEY", pkcs8) };
}

function plusYears(ms: number, years: number): Date {
  const d = new Date(ms);
  d.setUTCFullYear(d.getUTCFullYear() + years);
  return d;
}

/** The shared leaf key: P-256, PKCS#8 PEM. */
export function createLeafKey(): string {
  return generateKeyPairSync("ec", { namedCurve: "P-256" }).privateKey.export({ type: "pkcs8", format: "pem" }) as string;
}

function pemOf(label: string, der: Buffer): string {
  const lines = der.toString("base64").match(/.{1,64}/g) ?? [];
  return `-----BEGIN ${label}-----\n${lines.join("\n")}\n-----END ${label}-----\n`;
}
