/**
 * Creating the key material lathe keeps in certs/ (mitm-certificates.md §2): the CA certificate
 * and key, and the one leaf key. Pure apart from randomness: the caller supplies hostname and
 * time, the store writes the files. The CA is built as DER by hand and signed with node:crypto,
 * like the leaves (leaf.ts): a certificate library would cost every `lathe serve` ~20 MB of
 * resident memory just by being loaded (measured for @peculiar/x509 with its dependencies, #25).
 */
import { generateKeyPairSync, randomBytes, sign } from "node:crypto";
import * as der from "./der.js";
import { ALG_ECDSA_SHA256, OID, VERSION_V3, extension, keyIdOf, toPem } from "./leaf.js";

const DAY_MS = 86_400_000;
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

/** Name ::= SEQUENCE OF RDN, one attribute per RDN: CN then O, so openssl prints "CN = ..., O = lathe". */
function caName(commonName: string): Buffer {
  const rdn = (oid: string, value: string) => der.set(der.sequence(der.oid(oid), der.utf8String(value)));
  return der.sequence(rdn(OID.commonName, commonName), rdn(OID.organizationName, "lathe"));
}

/** 16 random bytes, high bit cleared (positive); never a zero first byte, which would shorten the INTEGER (RFC 5280 §4.1.2.2). */
function caSerial(): Buffer {
  let serial: Buffer;
  do serial = randomBytes(16);
  while ((serial[0]! & 0x7f) === 0);
  serial[0]! &= 0x7f;
  return serial;
}

export async function createCa(opts: { hostname: string; nowMs: number }): Promise<CreatedCa> {
  const { privateKey, publicKey } = generateKeyPairSync("ec", { namedCurve: "P-256" });
  const spkiDer = publicKey.export({ type: "spki", format: "der" });
  const name = caName(caCommonName(opts.hostname, opts.nowMs));
  const extensions = der.sequence(
    // CA:TRUE, pathlen:0: it signs leaves only.
    extension(OID.basicConstraints, true, der.sequence(der.booleanTrue(), der.unsignedInteger(Buffer.from([0])))),
    // keyCertSign (bit 5) and cRLSign (bit 6): one byte 0x06 whose last bit is unused.
    extension(OID.keyUsage, true, der.tlv(der.TAG.BIT_STRING, Buffer.from([1, 0x06]))),
    extension(OID.subjectKeyIdentifier, false, der.octetString(keyIdOf(spkiDer))), // SHA-1 of the key bits
  );
  const tbs = der.sequence(
    VERSION_V3,
    der.unsignedInteger(caSerial()),
    ALG_ECDSA_SHA256,
    name, // issuer = subject: self-signed
    der.sequence(der.time(opts.nowMs - DAY_MS), der.time(plusYears(opts.nowMs, 10))),
    name,
    spkiDer,
    der.tlv(der.contextTag(3, true), extensions),
  );
  const certDer = der.sequence(tbs, ALG_ECDSA_SHA256, der.bitString(sign("sha256", tbs, privateKey)));
  return { certPem: toPem(certDer), keyPem: privateKey.export({ type: "pkcs8", format: "pem" }) as string };
}

function plusYears(ms: number, years: number): number {
  const d = new Date(ms);
  d.setUTCFullYear(d.getUTCFullYear() + years);
  return d.getTime();
}

/** The shared leaf key: P-256, PKCS#8 PEM. */
export function createLeafKey(): string {
  return generateKeyPairSync("ec", { namedCurve: "P-256" }).privateKey.export({ type: "pkcs8", format: "pem" }) as string;
}
