/**
 * What identifies a tool call, computed as mcp-breaker computes it from spans. A harness
 * names a call three ways that must agree with the service, or its mirror would never
 * match the advisories raised from its own spans:
 *
 * - the **server**: the one given, else the `server__tool` prefix of the tool's name (the
 *   convention the service's classifier applies when a span names no server);
 * - the **fingerprint** of server, tool and arguments (`fingerprint.ts`);
 * - the **arguments as recorded** on the `mcp.tool.call` span: always as
 *   `mcp.tool.args_hash`, the digest of their canonical JSON, never the arguments
 *   themselves (spans go on to tracing backends). The service fingerprints
 *   `{"args_hash": digest}`, and `callFingerprint` does the same.
 *
 * The service's own `classify.tool_servers` map cannot be known here: a harness that
 * relies on it should name the server explicitly.
 */
import { argumentsDigest, fingerprint, fingerprints } from "./fingerprint.js";

export const SERVER_SEPARATOR = "__"; // "playwright__browser_navigate"
export const ARGS_HASH_ATTRIBUTE = "mcp.tool.args_hash";

/** The server a call goes to as the service names it; "" when nothing names one. */
export function resolveServer(server: string | null | undefined, tool: string): string {
  if (server) return server;
  const at = tool.indexOf(SERVER_SEPARATOR);
  return at > 0 ? tool.slice(0, at) : "";
}

/** The span attribute that identifies the arguments: their digest, never the arguments. */
export function recordedArguments(arguments_: unknown): Record<string, string> {
  const digest = argumentsDigest(arguments_);
  return digest === undefined ? {} : { [ARGS_HASH_ATTRIBUTE]: digest };
}

/** The fingerprint the service will give this call's span; undefined without arguments. */
export function callFingerprint(
  server: string | null | undefined,
  tool: string,
  arguments_: unknown,
): string | undefined {
  if (arguments_ === undefined || arguments_ === null) return undefined;
  const digest = argumentsDigest(arguments_);
  if (digest === undefined) return undefined;
  return fingerprint(server || null, tool, { args_hash: digest });
}

/**
 * Every fingerprint a span of this call may carry: the digest form this library records,
 * and the raw form of a harness that records `mcp.tool.arguments` itself.
 */
export function callFingerprints(
  server: string | null | undefined,
  tool: string,
  arguments_: unknown,
): string[] {
  if (arguments_ === undefined || arguments_ === null) return [];
  return fingerprints(server || null, tool, arguments_);
}
