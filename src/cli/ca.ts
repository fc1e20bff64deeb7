/**
 * `lathe ca`: make or load the CA and say how to trust it (mitm-certificates.md §2).
 * `--export <path>` writes the certificate there; `export: true` (`--pem`) prints the PEM after
 * the summary. The CA key is never printed or exported. A broken CA throws ProxyError("ERR_CA")
 * for main.ts to report on stderr.
 */
import { writeFile } from "node:fs/promises";
import { resolve } from "node:path";
import { ProxyError, errorMessage } from "../core/errors.js";
import { loadOrCreateCa } from "../tls/store.js";

export interface CaArgs {
  certs: string;
  export?: string | true;
}

/** Quotes for a POSIX shell when needed, so the printed commands can be pasted. */
const sh = (s: string): string => (/^[\w@%+=:,./-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`);

/** `out` writes raw text (no newline added). Resolves 0; CA problems reject with ERR_CA. */
export async function caCommand(args: CaArgs, out: (s: string) => void): Promise<number> {
  const store = await loadOrCreateCa(args.certs);
  const pem = sh(store.certPath);
  const lines = [
    ...(store.created ? [`created a new CA in ${store.dir}`] : []),
    `certificate:  ${store.certPath}`,
    `subject:      ${store.subject}`,
    `not after:    ${store.notAfter.toISOString()}`,
    `SHA-256 fingerprint: ${store.fingerprintSha256}`,
    `SPKI SHA-256 (base64): ${store.spkiSha256Base64}`,
    "",
    "To trust it:",
    `  Debian/Ubuntu:  sudo cp ${pem} /usr/local/share/ca-certificates/lathe-ca.crt && sudo update-ca-certificates`,
    `  Java:           keytool -importcert -alias lathe -file ${pem} -keystore lathe-truststore.jks -storepass changeit -noprompt`,
    `                  (then java -Djavax.net.ssl.trustStore=lathe-truststore.jks -Djavax.net.ssl.trustStorePassword=changeit)`,
    `  NSS (Chromium, Firefox on Linux):  certutil -d sql:$HOME/.pki/nssdb -A -t C,, -n lathe -i ${pem}`,
    `  Chromium flag:  --ignore-certificate-errors-spki-list=${store.spkiSha256Base64}`,
    `  curl:           curl --cacert ${pem} ...    Node: NODE_EXTRA_CA_CERTS=${pem}`,
  ];
  if (typeof args.export === "string") {
    const target = resolve(args.export);
    try {
      await writeFile(target, store.caCertPem, { mode: 0o644 });
    } catch (e) {
      throw new ProxyError("ERR_CA", `cannot write the CA certificate to ${target}: ${errorMessage(e)}`, e);
    }
    lines.push("", `exported the certificate to ${target}`);
  }
  out(lines.join("\n") + "\n");
  if (args.export === true) out("\n" + store.caCertPem);
  return 0;
}
