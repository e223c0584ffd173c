/**
 * The gRPC channel to the advisory port: plaintext, TLS, or mutual TLS with a client
 * certificate; and the bearer token every call carries.
 *
 * Plaintext is for loopback and sidecars only: the token would cross the network in
 * clear. The token goes in `authorization: Bearer <token>` metadata on each call, as the
 * service reads it (per call, not as call credentials: grpc-js sends those only over TLS,
 * and a sidecar on loopback may use a token without TLS). It is never logged here.
 */
import * as grpc from "@grpc/grpc-js";
import { readFileSync } from "node:fs";

import { ConfigError } from "./errors.js";

/** TLS to the advisory port, PEM; no `rootCertificates`: the system's CAs. */
export interface TlsConfig {
  rootCertificates?: Buffer | string;
  /** Both, for mutual TLS (the service's advisories.tls.client_ca_file is set). */
  certificateChain?: Buffer | string;
  privateKey?: Buffer | string;
  /** The name the server's certificate must carry, when it differs from the target's host. */
  serverName?: string;
}

/** A TlsConfig from PEM files. */
export function tlsFromFiles(files: {
  rootCertificates?: string;
  certificateChain?: string;
  privateKey?: string;
  serverName?: string;
}): TlsConfig {
  const read = (path: string | undefined) => (path ? readFileSync(path) : undefined);
  return {
    rootCertificates: read(files.rootCertificates),
    certificateChain: read(files.certificateChain),
    privateKey: read(files.privateKey),
    serverName: files.serverName,
  };
}

/** Credentials and channel options for `tls`; plaintext when it is undefined. */
export function channelSecurity(tls: TlsConfig | undefined): {
  credentials: grpc.ChannelCredentials;
  options: grpc.ChannelOptions;
} {
  if (tls === undefined) return { credentials: grpc.credentials.createInsecure(), options: {} };
  if ((tls.certificateChain === undefined) !== (tls.privateKey === undefined)) {
    throw new ConfigError("tls: certificateChain and privateKey go together");
  }
  const pem = (value: Buffer | string | undefined) =>
    value === undefined ? null : Buffer.from(value);
  const credentials = grpc.credentials.createSsl(
    pem(tls.rootCertificates),
    pem(tls.privateKey),
    pem(tls.certificateChain),
  );
  const options: grpc.ChannelOptions = tls.serverName
    ? { "grpc.ssl_target_name_override": tls.serverName, "grpc.default_authority": tls.serverName }
    : {};
  return { credentials, options };
}

export function bearerMetadata(token: string | undefined): grpc.Metadata {
  const metadata = new grpc.Metadata();
  if (token) metadata.set("authorization", `Bearer ${token}`);
  return metadata;
}
