/**
 * The advisory contract, loaded at run time from the proto file itself (no generated code
 * to drift): `dist/proto/` is the repository's `proto/`, copied by every build.
 */
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import { fileURLToPath } from "node:url";

export const PROTO_PATH = fileURLToPath(
  new URL("./proto/mcp_breaker/v1/advisories.proto", import.meta.url),
);

/** camelCase fields, enums by name (an unknown value stays a number), 64-bit as strings. */
export const LOADER_OPTIONS: protoLoader.Options = {
  keepCase: false,
  longs: String,
  enums: String,
  defaults: true,
  oneofs: true,
};

export interface Contract {
  Advisories: grpc.ServiceClientConstructor;
  Admin: grpc.ServiceClientConstructor;
}

let loaded: Contract | undefined;

/** The `mcp_breaker.v1` services, loaded once. */
export function loadContract(): Contract {
  if (loaded === undefined) {
    const definition = protoLoader.loadSync(PROTO_PATH, LOADER_OPTIONS);
    const root = grpc.loadPackageDefinition(definition) as unknown as {
      mcp_breaker: { v1: Contract };
    };
    loaded = { Advisories: root.mcp_breaker.v1.Advisories, Admin: root.mcp_breaker.v1.Admin };
  }
  return loaded;
}
