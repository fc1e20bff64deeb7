/**
 * Leaf certificates (mitm-certificates.md §3), built as DER by hand and signed with node:crypto.
 * Everything that does not change between leaves (issuer, public key, most extensions) is
 * encoded once per CA / leaf key, so minting is: 16 random bytes, a few concatenations and one
 * ECDSA signature, tens of microseconds. Pure: no sockets, no files.
 */
import { createHash, createPrivateKey, createPublicKey, randomBytes, sign, type KeyObject } from "node:crypto";
import { domainToASCII } from "node:url";
import { ProxyError } from "../core/errors.js";
import * as der from "./der.js";

const DAY_MS = 86_400_000;
/** Under the 398-day limit browsers apply to public CAs (CA/B Forum BR §6.3.2). */
const LEAF_DAYS = 397;
/** X.520 ub-common-name. */
const MAX_CN = 64;

export const OID = {
  ecdsaWithSha256: "1.2.840.10045.4.3.2",
  commonName: "2.5.4.3",
  organizationName: "2.5.4.10",
  subjectKeyIdentifier: "2.5.29.14",
  keyUsage: "2.5.29.15",
  subjectAltName: "2.5.29.17",
  basicConstraints: "2.5.29.19",
  authorityKeyIdentifier: "2.5.29.35",
  extKeyUsage: "2.5.29.37",
  serverAuth: "1.3.6.1.5.5.7.3.1",
} as const;

/** What minting needs from the CA: encoded once, reused for every leaf. */
export interface CaMaterial {
  /** The CA's subject Name, DER copied verbatim from its certificate (becomes the leaf issuer). */
  readonly subjectDer: Buffer;
  /** The CA's SubjectPublicKeyInfo DER, verbatim (Chromium's SPKI pin is its SHA-256). */
  readonly spkiDer: Buffer;
  /** The CA's subjectKeyIdentifier, which every leaf's authorityKeyIdentifier repeats. */
  readonly keyId: Buffer;
  readonly notAfterMs: number;
  readonly privateKey: KeyObject;
  /** Pre-encoded authorityKeyIdentifier extension. */
  readonly akiExtension: Buffer;
}

/** The one key every leaf carries (never the CA key). */
export interface LeafKey {
  readonly privateKeyPem: string;
  readonly spkiDer: Buffer;
  /** SHA-1 of the public key bits (RFC 5280 §4.2.1.2 method 1). */
  readonly keyId: Buffer;
  /** Pre-encoded subjectKeyIdentifier extension. */
  readonly skiExtension: Buffer;
}

export interface MintedLeaf {
  certPem: string;
  certDer: Buffer;
  notAfterMs: number;
  /** The SAN the leaf carries, `dns:<a-label>` or `ip:<address>`; the cache key. */
  san: string;
}

export type LeafName =
  | { kind: "dns"; name: string }
  | { kind: "ip"; name: string; bytes: Buffer };

export const ALG_ECDSA_SHA256 = der.sequence(der.oid(OID.ecdsaWithSha256));
export const VERSION_V3 = der.tlv(der.contextTag(0, true), der.unsignedInteger(Buffer.from([2])));

export function extension(oid: string, critical: boolean, value: Buffer): Buffer {
  return der.sequence(der.oid(oid), ...(critical ? [der.booleanTrue()] : []), der.octetString(value));
}

/** The same in every leaf. */
const FIXED_EXTENSIONS = Buffer.concat([
  // CA:FALSE is the DEFAULT, so DER encodes it as an empty SEQUENCE (X.690 §11.5).
  extension(OID.basicConstraints, true, der.sequence()),
  // digitalSignature is bit 0: one byte 0x80, 7 unused bits; the only usage an ECDSA TLS key needs.
  extension(OID.keyUsage, true, der.tlv(der.TAG.BIT_STRING, Buffer.from([7, 0x80]))),
  extension(OID.extKeyUsage, false, der.sequence(der.oid(OID.serverAuth))),
]);

/** SHA-1 over the subjectPublicKey BIT STRING contents, unused-bits octet excluded. */
export function keyIdOf(spkiDer: Buffer): Buffer {
  const [, bits] = der.children(der.readTlv(spkiDer));
  if (!bits || bits.tag !== der.TAG.BIT_STRING) throw new Error("SubjectPublicKeyInfo without a key");
  return createHash("sha1").update(der.content(bits).subarray(1)).digest();
}

/**
 * Picks the issuer fields out of the CA certificate. Throws a plain Error on a certificate it
 * cannot read; the store turns that into ERR_CA naming the file.
 */
export function caMaterial(caCertDer: Buffer, caPrivateKey: KeyObject): CaMaterial {
  const [tbs] = der.children(der.readTlv(caCertDer));
  if (!tbs) throw new Error("certificate without a TBSCertificate");
  const f = der.children(tbs);
  // [0] version is present in every v3 certificate; extensions ([3]) only exist in v3.
  const i = f[0]?.tag === der.contextTag(0, true) ? 1 : 0;
  const subject = f[i + 4];
  const validity = f[i + 3];
  const spki = f[i + 5];
  if (!subject || !validity || !spki) throw new Error("truncated TBSCertificate");
  const notAfter = der.children(validity)[1];
  if (!notAfter) throw new Error("certificate without notAfter");
  let keyId: Buffer | undefined;
  const exts = f.find((t) => t.tag === der.contextTag(3, true));
  for (const ext of exts ? der.children(der.children(exts)[0]!) : []) {
    const parts = der.children(ext);
    if (der.readOid(parts[0]!) === OID.subjectKeyIdentifier) {
      keyId = Buffer.from(der.content(der.readTlv(der.content(parts[parts.length - 1]!))));
    }
  }
  const spkiDer = Buffer.from(der.raw(spki));
  keyId ??= keyIdOf(spkiDer); // a CA without SKI: the value it would have had
  return {
    subjectDer: Buffer.from(der.raw(subject)),
    spkiDer,
    keyId,
    notAfterMs: der.readTime(notAfter),
    privateKey: caPrivateKey,
    // AuthorityKeyIdentifier ::= SEQUENCE { keyIdentifier [0] IMPLICIT OCTET STRING }
    akiExtension: extension(OID.authorityKeyIdentifier, false, der.sequence(der.tlv(der.contextTag(0, false), keyId))),
  };
}

export function leafKeyMaterial(privateKeyPem: string): LeafKey {
  const spkiDer = createPublicKey(createPrivateKey(privateKeyPem)).export({ type: "spki", format: "der" });
  const keyId = keyIdOf(spkiDer);
  return { privateKeyPem, spkiDer, keyId, skiExtension: extension(OID.subjectKeyIdentifier, false, der.octetString(keyId)) };
}

function badName(name: string, why: string): ProxyError {
  return new ProxyError("ERR_TLS_HANDSHAKE", `cannot mint a certificate for ${JSON.stringify(name)}: ${why}`);
}

function ipv6Bytes(canonical: string): Buffer {
  // `canonical` comes from the WHATWG host parser: lower-case hex groups, at most one "::", no
  // embedded dotted quad.
  const [head, tail] = canonical.split("::") as [string, string | undefined];
  const h = head ? head.split(":") : [];
  const t = tail ? tail.split(":") : [];
  const groups = tail === undefined ? h : [...h, ...Array<string>(8 - h.length - t.length).fill("0"), ...t];
  const out = Buffer.alloc(16);
  groups.forEach((g, k) => out.writeUInt16BE(parseInt(g, 16), k * 2));
  return out;
}

/**
 * What SAN a name gets: an IPv4 or IPv6 literal (brackets allowed) becomes an address, anything
 * else a DNS name in A-label form, lower-case, without a trailing dot. Names no certificate
 * should carry (empty, wildcards, forbidden characters, over-long labels) are refused.
 */
export function leafName(name: string): LeafName {
  const inner = name.startsWith("[") && name.endsWith("]") ? name.slice(1, -1) : name;
  if (inner.includes(":")) {
    // Hex, colons and dots only, so the URL parser below cannot stop early at "]", "/" or "#".
    const canonical = /^[0-9a-fA-F:.]+$/.test(inner) ? domainToASCII(`[${inner}]`) : ""; // validates, compresses
    if (!canonical) throw badName(name, "not a valid IPv6 address");
    const addr = canonical.slice(1, -1);
    return { kind: "ip", name: addr, bytes: ipv6Bytes(addr) };
  }
  // domainToASCII runs the WHATWG URL parser, which would stop at "/", "?" or "#" and decode
  // "%41": refuse URL syntax first, so the certificate is for exactly the name given.
  if (/[\x00-\x20\x7f#%/<>?@[\\\]^|]/.test(inner)) throw badName(name, "not a host name or IP address");
  // Then IDNA to A-labels, lower-case, and IPv4 in any form a URL accepts made a dotted quad.
  const ascii = domainToASCII(inner);
  const v4 = /^(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(ascii);
  if (v4) return { kind: "ip", name: ascii, bytes: Buffer.from(v4.slice(1).map(Number)) };
  const host = ascii.endsWith(".") ? ascii.slice(0, -1) : ascii;
  if (!host) throw badName(name, "not a host name or IP address");
  if (host.length > 253) throw badName(name, "longer than 253 characters");
  for (const label of host.split(".")) {
    if (!/^[a-z0-9_-]{1,63}$/.test(label)) throw badName(name, `label ${JSON.stringify(label)} is not a DNS label`);
  }
  return { kind: "dns", name: host };
}

export const sanKey = (n: LeafName): string => `${n.kind}:${n.name}`;

export function toPem(certDer: Buffer): string {
  const b64 = certDer.toString("base64");
  let body = "";
  for (let i = 0; i < b64.length; i += 64) body += b64.slice(i, i + 64) + "\n";
  return `-----BEGIN CERTIFICATE-----\n${body}-----END CERTIFICATE-----\n`;
}

/** Mints the leaf for `name` (a host name or IP literal, as leafName accepts) at time `nowMs`. */
export function mintLeaf(ca: CaMaterial, leafKey: LeafKey, name: string | LeafName, nowMs: number): MintedLeaf {
  const n = typeof name === "string" ? leafName(name) : name;
  // Backdated a day to absorb client clock skew; never outliving the CA.
  const notBefore = nowMs - DAY_MS;
  const notAfterMs = Math.floor(Math.min(nowMs + LEAF_DAYS * DAY_MS, ca.notAfterMs) / 1000) * 1000;
  const emptySubject = n.name.length > MAX_CN;
  const subject = emptySubject
    ? der.sequence()
    : der.sequence(der.set(der.sequence(der.oid(OID.commonName), der.utf8String(n.name))));
  // GeneralName: dNSName [2] IA5String, iPAddress [7] OCTET STRING (RFC 5280 §4.2.1.6).
  const generalName = n.kind === "dns"
    ? der.tlv(der.contextTag(2, false), Buffer.from(n.name, "ascii"))
    : der.tlv(der.contextTag(7, false), n.bytes);
  // RFC 5280 §4.2.1.6: with an empty subject the SAN must be critical.
  const san = extension(OID.subjectAltName, emptySubject, der.sequence(generalName));
  const tbs = der.sequence(
    VERSION_V3,
    der.unsignedInteger(randomBytes(16)), // positive: a 0x00 is prepended when the top bit is set
    ALG_ECDSA_SHA256,
    ca.subjectDer,
    der.sequence(der.time(notBefore), der.time(notAfterMs)),
    subject,
    leafKey.spkiDer,
    der.tlv(der.contextTag(3, true), der.sequence(FIXED_EXTENSIONS, leafKey.skiExtension, ca.akiExtension, san)),
  );
  // For EC keys node:crypto's sign() returns the DER Ecdsa-Sig-Value X.509 wants.
  const signature = sign("sha256", tbs, ca.privateKey);
  const certDer = der.sequence(tbs, ALG_ECDSA_SHA256, der.bitString(signature));
  return { certPem: toPem(certDer), certDer, notAfterMs, san: sanKey(n) };
}
