/**
 * The CA on disk (mitm-certificates.md §1): created once, then reused on every start. Any file
 * that is missing, unreadable, exposed or inconsistent stops start-up with ERR_CA naming it:
 * lathe never quietly makes a new CA, because every client trusting the old one would break.
 */
import { X509Certificate, createHash, createPrivateKey, randomBytes, type KeyObject } from "node:crypto";
import { chmod, lstat, mkdir, open, readFile, rename, rm, stat } from "node:fs/promises";
import { hostname } from "node:os";
import { join, resolve } from "node:path";
import { ProxyError, errorMessage, systemCode } from "../core/errors.js";
import { silentLogger, type Logger } from "../core/log.js";
import { createCa, createLeafKey } from "./ca.js";
import { caMaterial, leafKeyMaterial, type CaMaterial, type LeafKey } from "./leaf.js";

export const CA_CERT_FILE = "lathe-ca.pem";
export const CA_KEY_FILE = "lathe-ca.key";
export const LEAF_KEY_FILE = "lathe-leaf.key";
const FILES = [CA_CERT_FILE, CA_KEY_FILE, LEAF_KEY_FILE] as const;
const DAY_MS = 86_400_000;

export interface CaStore {
  readonly dir: string;
  /** Absolute path of lathe-ca.pem, the file users install as trusted. */
  readonly certPath: string;
  readonly caCertPem: string;
  readonly caCertDer: Buffer;
  /** As `openssl x509 -fingerprint -sha256` prints it: colon-separated upper-case hex. */
  readonly fingerprintSha256: string;
  /** Base64 SHA-256 of the CA's SubjectPublicKeyInfo DER (`--ignore-certificate-errors-spki-list`). */
  readonly spkiSha256Base64: string;
  readonly subject: string;
  readonly notAfter: Date;
  /** True when this call created the files. */
  readonly created: boolean;
  /** For mintLeaf / LeafCache. Holds the CA key as a KeyObject only, never as PEM. */
  readonly ca: CaMaterial;
  readonly leafKey: LeafKey;
}

export interface CaStoreOptions {
  /** For tests: creation time and host name written into a new CA. */
  nowMs?: number;
  hostname?: string;
}

const fresh = (dir: string) =>
  `remove ${FILES.join(", ")} from ${dir} to make a new CA (every client must then be given the new ${CA_CERT_FILE} to trust)`;

function fatal(message: string, cause?: unknown): ProxyError {
  return new ProxyError("ERR_CA", message, cause);
}

async function exists(path: string): Promise<boolean> {
  try {
    await lstat(path);
    return true;
  } catch (e) {
    if (systemCode(e) === "ENOENT") return false;
    throw fatal(`cannot read ${path}: ${errorMessage(e)}; check the permissions of the certs directory`, e);
  }
}

export async function loadOrCreateCa(dir: string, log: Logger = silentLogger, opts: CaStoreOptions = {}): Promise<CaStore> {
  const abs = resolve(dir);
  const nowMs = opts.nowMs ?? Date.now();
  const present: string[] = [];
  for (const f of FILES) if (await exists(join(abs, f))) present.push(f);
  if (present.length === FILES.length) return load(abs, nowMs, false, log);
  if (present.length > 0) {
    const missing = FILES.filter((f) => !present.includes(f));
    throw fatal(
      `${join(abs, missing[0]!)} is missing while ${present.map((f) => join(abs, f)).join(" and ")} exist${present.length === 1 ? "s" : ""}; ` +
        `restore ${missing.join(" and ")} from a backup, or ${fresh(abs)}`,
    );
  }
  await create(abs, opts.hostname ?? hostname(), nowMs);
  return load(abs, nowMs, true, log);
}

async function create(dir: string, host: string, nowMs: number): Promise<void> {
  try {
    // Only a directory lathe makes is forced to 0700; an existing one is the user's choice.
    if (await mkdir(dir, { recursive: true, mode: 0o700 })) await chmod(dir, 0o700);
  } catch (e) {
    throw fatal(`cannot create the certs directory ${dir}: ${errorMessage(e)}`, e);
  }
  const { certPem, keyPem } = await createCa({ hostname: host, nowMs });
  // Keys before the certificate: a crash part-way leaves no trust anchor without its key.
  const files: [string, string, number][] = [
    [LEAF_KEY_FILE, createLeafKey(), 0o600],
    [CA_KEY_FILE, keyPem, 0o600],
    [CA_CERT_FILE, certPem, 0o644],
  ];
  const temps: string[] = [];
  try {
    for (const [name, data, mode] of files) {
      const tmp = join(dir, `.${name}.${process.pid}.${randomBytes(4).toString("hex")}.tmp`);
      temps.push(tmp);
      // Created with its final mode ("wx": never an existing file), so a key is never briefly
      // readable by others; chmod because the umask may have removed bits from 0644.
      const fh = await open(tmp, "wx", mode);
      try {
        await fh.chmod(mode);
        await fh.writeFile(data);
        await fh.sync();
      } finally {
        await fh.close();
      }
    }
    for (const [i, [name]] of files.entries()) await rename(temps[i]!, join(dir, name));
    await syncDir(dir);
  } catch (e) {
    await Promise.all(temps.map((t) => rm(t, { force: true })));
    throw fatal(`cannot write the CA files in ${dir}: ${errorMessage(e)}`, e);
  }
}

async function syncDir(dir: string): Promise<void> {
  // Makes the renames durable; not every platform can open a directory, which is harmless.
  try {
    const fh = await open(dir, "r");
    try {
      await fh.sync();
    } finally {
      await fh.close();
    }
  } catch {}
}

async function readPrivate(path: string, dir: string): Promise<string> {
  const st = await stat(path).catch((e) => {
    throw fatal(`cannot read ${path}: ${errorMessage(e)}`, e);
  });
  if (process.platform !== "win32" && (st.mode & 0o077) !== 0) {
    const mode = (st.mode & 0o777).toString(8).padStart(3, "0");
    throw fatal(`${path} is accessible to group or others (mode ${mode}); a private key must be the owner's only: run chmod 600 ${path}`);
  }
  return readText(path, dir);
}

async function readText(path: string, dir: string): Promise<string> {
  try {
    return await readFile(path, "utf8");
  } catch (e) {
    throw fatal(`cannot read ${path}: ${errorMessage(e)}; fix its permissions, or ${fresh(dir)}`, e);
  }
}

function parseKey(path: string, pem: string, dir: string): KeyObject {
  let key: KeyObject;
  try {
    key = createPrivateKey(pem);
  } catch (e) {
    throw fatal(`${path} is not a readable PEM private key (${errorMessage(e)}); restore it from a backup, or ${fresh(dir)}`, e);
  }
  // Leaves are signed ecdsa-with-SHA256 and carry a P-256 key (§2, §3).
  if (key.asymmetricKeyType !== "ec" || key.asymmetricKeyDetails?.namedCurve !== "prime256v1") {
    throw fatal(`${path} is not an ECDSA P-256 key; restore lathe's key from a backup, or ${fresh(dir)}`);
  }
  return key;
}

async function load(dir: string, nowMs: number, created: boolean, log: Logger): Promise<CaStore> {
  const certPath = join(dir, CA_CERT_FILE);
  const caKeyPath = join(dir, CA_KEY_FILE);
  const leafKeyPath = join(dir, LEAF_KEY_FILE);
  const caKey = parseKey(caKeyPath, await readPrivate(caKeyPath, dir), dir);
  const leafPem = await readPrivate(leafKeyPath, dir);
  parseKey(leafKeyPath, leafPem, dir);
  const certText = await readText(certPath, dir);

  let cert: X509Certificate;
  let ca: CaMaterial;
  try {
    if (!certText.includes("-----BEGIN CERTIFICATE-----")) throw new Error("no PEM CERTIFICATE block");
    cert = new X509Certificate(certText);
    ca = caMaterial(cert.raw, caKey);
  } catch (e) {
    throw fatal(`${certPath} is not a readable PEM certificate (${errorMessage(e)}); restore it from a backup, or ${fresh(dir)}`, e);
  }
  if (!cert.ca) throw fatal(`${certPath} is not a CA certificate; restore lathe's CA certificate from a backup, or ${fresh(dir)}`);
  if (!cert.checkPrivateKey(caKey)) {
    throw fatal(`${caKeyPath} does not match the certificate ${certPath}; restore the key that belongs to that certificate, or ${fresh(dir)}`);
  }
  if (ca.notAfterMs < nowMs + DAY_MS) {
    throw fatal(`${certPath} expires ${new Date(ca.notAfterMs).toISOString()}; ${fresh(dir)}`);
  }
  const leafKey = leafKeyMaterial(leafPem);
  if (leafKey.spkiDer.equals(ca.spkiDer)) {
    // The leaf key is handed to every TLS context; it must never be the CA key.
    throw fatal(`${leafKeyPath} holds the CA key; remove ${leafKeyPath} and ${fresh(dir)}`);
  }
  const store: CaStore = {
    dir,
    certPath,
    caCertPem: cert.toString(),
    caCertDer: Buffer.from(cert.raw),
    fingerprintSha256: cert.fingerprint256,
    spkiSha256Base64: createHash("sha256").update(ca.spkiDer).digest("base64"),
    subject: cert.subject.replace(/\n/g, ", "),
    notAfter: new Date(ca.notAfterMs),
    created,
    ca,
    leafKey,
  };
  log.info(created ? "ca.created" : "ca.loaded", { cert: certPath, fingerprint: store.fingerprintSha256, notAfter: store.notAfter.toISOString() });
  return store;
}
