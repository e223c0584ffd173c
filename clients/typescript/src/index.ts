/**
 * `@mcp-breaker/client`: heed mcp-breaker's advisories in a TypeScript agent harness.
 *
 *     fingerprint.ts  canonical JSON and the call fingerprint, byte for byte as the service's
 *     redact.ts       error texts scrubbed before they leave the harness, as the service does
 *     secret-words.ts the words for password, secret, token and key that redact.ts reads after
 *     calls.ts        server, fingerprint and recorded arguments of a call
 *     advisory.ts     the Advisory as this library hands it out
 *     mirror.ts       the advisories in force, kept locally; check() in microseconds
 *     channel.ts      plaintext, TLS, mutual TLS, the bearer token
 *     contract.ts     the proto file, loaded at run time
 *     options.ts      the subscriber's options and their defaults
 *     wire.ts         the contract's messages as decoded, made into the types above
 *     subscriber.ts   AdvisoryClient / subscribe(): the Subscribe stream into a mirror
 *
 * The span processor is `@mcp-breaker/client/tracing` and the MCP SDK wrapper
 * `@mcp-breaker/client/mcp`: they need the OpenTelemetry and MCP packages, this entry
 * point only gRPC.
 */
export type { Advisory, Evidence, KnownScope, KnownState, Scope, State } from "./advisory.js";
export { callFingerprint, callFingerprints, recordedArguments, resolveServer } from "./calls.js";
export { bearerMetadata, tlsFromFiles, type TlsConfig } from "./channel.js";
export { ConfigError } from "./errors.js";
export {
  argumentsDigest,
  canonicalJson,
  DEEP_MARKER,
  fingerprint,
  fingerprints,
  MAX_DEPTH,
} from "./fingerprint.js";
export { consoleLogger, silentLogger, type Logger } from "./log.js";
export {
  ALLOWED,
  CheckResult,
  Decision,
  DEFAULT_MAX_ADVISORIES,
  Mirror,
  refuses,
  type SnapshotPart,
  type StreamMessage,
  type ToolCall,
} from "./mirror.js";
export {
  type ClientOptions,
  DEFAULT_CHECK_TIMEOUT_MS,
  DEFAULT_IDLE_TIMEOUT_MS,
  DEFAULT_RECONNECT,
  reconnectDelayMs,
  type ReconnectPolicy,
} from "./options.js";
export { redact } from "./redact.js";
export {
  AdvisoryClient,
  type AdvisoryClientEvents,
  PERMANENT_CODES,
  subscribe,
  type SubscriberStats,
} from "./subscriber.js";
