/**
 * A test CA, a server certificate for 127.0.0.1 and localhost, and a client certificate,
 * made with the openssl command (scripts/test-typescript installs it when missing). EC
 * P-256, valid for a day, nothing secret.
 */
import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { writeFileSync } from "node:fs";
import { join } from "node:path";

const KEY = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];

/** Writes ca.pem, server.pem, server.key, client.pem and client.key into `directory`. */
export function makeCertificates(directory: string): void {
  const at = (name: string) => join(directory, name);
  const openssl = (...args: string[]) => execFileSync("openssl", args, { stdio: "pipe" });
  openssl(
    "req", "-x509", ...KEY, "-keyout", at("ca.key"), "-out", at("ca.pem"), "-days", "1",
    "-subj", "/CN=test CA", "-addext", "basicConstraints=critical,CA:TRUE",
    "-addext", "keyUsage=critical,keyCertSign,cRLSign",
  ); // prettier-ignore
  const leaves = {
    server: "extendedKeyUsage=serverAuth\nsubjectAltName=DNS:localhost,IP:127.0.0.1\n",
    client: "extendedKeyUsage=clientAuth\n",
  };
  for (const [name, extensions] of Object.entries(leaves)) {
    writeFileSync(at(`${name}.ext`), `basicConstraints=CA:FALSE\n${extensions}`);
    openssl(
      "req",
      ...KEY,
      "-keyout",
      at(`${name}.key`),
      "-out",
      at(`${name}.csr`),
      "-subj",
      `/CN=${name}`,
    );
    openssl(
      "x509", "-req", "-in", at(`${name}.csr`), "-CA", at("ca.pem"), "-CAkey", at("ca.key"),
      "-set_serial", `0x${randomBytes(8).toString("hex")}`, "-days", "1",
      "-extfile", at(`${name}.ext`), "-out", at(`${name}.pem`),
    ); // prettier-ignore
  }
}
