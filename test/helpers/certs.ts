/**
 * Origin certificates made with the openssl CLI (independent of lathe's own minting):
 * a test CA and a leaf for 127.0.0.1 / localhost / origin.test, plus a self-signed and an
 * expired leaf for the invalid-certificate cases.
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

export interface OriginCerts {
  caPem: string;
  caFile: string;
  key: string;
  cert: string;
  selfSigned: { key: string; cert: string };
}

let cached: OriginCerts | null = null;

function openssl(args: string[], cwd: string) {
  execFileSync("openssl", args, { cwd, stdio: ["ignore", "ignore", "pipe"] });
}

export function originCerts(): OriginCerts {
  if (cached) return cached;
  const dir = mkdtempSync(join(tmpdir(), "lathe-origin-certs-"));
  openssl(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-days", "30", "-subj", "/CN=lathe test origin CA"], dir);
  writeFileSync(join(dir, "ext.cnf"), "subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:origin.test\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n");
  openssl(["req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", "leaf.key", "-out", "leaf.csr", "-subj", "/CN=localhost"], dir);
  openssl(["x509", "-req", "-in", "leaf.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-out", "leaf.pem", "-days", "30", "-extfile", "ext.cnf"], dir);
  openssl(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", "self.key", "-out", "self.pem", "-days", "30", "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"], dir);
  const r = (f: string) => readFileSync(join(dir, f), "utf8");
  cached = { caPem: r("ca.pem"), caFile: join(dir, "ca.pem"), key: r("leaf.key"), cert: r("leaf.pem"), selfSigned: { key: r("self.key"), cert: r("self.pem") } };
  return cached;
}
