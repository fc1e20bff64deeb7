/**
 * `lathe ca`: make or load the CA and say how to trust it (mitm-certificates.md §2).
 * `--export <path>` writes the certificate there; `--export` alone prints only the PEM, so it can
 * be piped. The CA key is never printed or exported.
 */
import { writeFile } from "node:fs/promises";
import { resolve } from "node:path";
import { errorMessage } from "../core/errors.js";
import { loadOrCreateCa, type CaStore } from "../tls/store.js";

export interface CaArgs {
  certs: string;
  export?: string | true;
}

/** Quotes for a POSIX shell when needed, so the printed commands can be pasted. */
const sh = (s: string): string => (/^[\w@%+=:,./-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`);

export async function caCommand(args: CaArgs, out: (s: string) => void): Promise<number> {
  let store: CaStore;
  try {
    store = await loadOrCreateCa(args.certs);
  } catch (e) {
    out(`lathe ca: ${errorMessage(e)}`);
    return 1;
  }
  if (args.export === true) {
    out(store.caCertPem.trimEnd());
    return 0;
  }
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
    `                  (then run java with -Djavax.net.ssl.trustStore=lathe-truststore.jks -Djavax.net.ssl.trustStorePassword=changeit)`,
    `  NSS (Chromium, Firefox on Linux):  certutil -d sql:$HOME/.pki/nssdb -A -t C,, -n lathe -i ${pem}`,
    `  Chromium flag:  --ignore-certificate-errors-spki-list=${store.spkiSha256Base64}`,
    `  curl:           curl --cacert ${pem} ...    Node: NODE_EXTRA_CA_CERTS=${pem}`,
  ];
  if (typeof args.export === "string") {
    const target = resolve(args.export);
    try {
      await writeFile(target, store.caCertPem, { mode: 0o644 });
    } catch (e) {
      out(`lathe ca: cannot write ${target}: ${errorMessage(e)}`);
      return 1;
    }
    lines.push("", `exported the certificate to ${target}`);
  }
  out(lines.join("\n"));
  return 0;
}
