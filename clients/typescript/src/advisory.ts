/**
 * The advisory, as this library hands it to a harness: the contract's `Advisory`
 * message (`proto/mcp_breaker/v1/advisories.proto`) with camelCase fields, 64-bit
 * times as `bigint` nanoseconds, and ids as hex.
 *
 * Enums are their names (`"SCOPE_SERVER"`, `"STATE_OPEN"`). The contract only ever adds
 * values, so a newer service may send one this version does not know: it arrives as its
 * number, and the mirror treats it as the contract says (an unknown scope matches no
 * call; an unknown state refuses).
 */

export type KnownScope =
  | "SCOPE_UNSPECIFIED"
  | "SCOPE_SERVER" // every tool of one MCP server, across turns
  | "SCOPE_TOOL" // one tool, across turns
  | "SCOPE_TURN_TOOL" // one tool, for the rest of one turn
  | "SCOPE_TURN_CALL" // one exact call (tool + arguments fingerprint), for one turn
  | "SCOPE_TURN_ROSTER"; // the tools offered to the model in one turn
/** A scope by name, or the number of one this version does not know. */
export type Scope = KnownScope | number;

export type KnownState =
  | "STATE_UNSPECIFIED"
  | "STATE_CLOSED" // in a change: the advisory no longer applies
  | "STATE_OPEN"
  | "STATE_HALF_OPEN" // one probe call may go; ask checkRemote for the permit
  | "STATE_FORCED_OPEN"
  | "STATE_FORCED_CLOSED" // an operator stood the breaker aside
  | "STATE_TURN_BLOCKED"
  | "STATE_ROSTER_COLLAPSED"; // re-list the tools; refuses no call
/** A state by name, or the number of one this version does not know. */
export type State = KnownState | number;

export interface Evidence {
  calls: number; // in the breaker's window
  failures: number;
  sinceUnixNano: bigint; // when the failures began
  traceId: string; // the first failure's trace and span, hex
  spanId: string;
  failureClass: string; // transport, timeout, tool_error, protocol, unknown_tool, hidden
  excerpt: string; // the recorded error, redacted
}

export interface Advisory {
  id: string; // stable for one scope and key: a change replaces the advisory with this id
  scope: Scope;
  key: string;
  state: State;
  server: string; // "" when no server could be named
  tool: string; // "" for SCOPE_SERVER
  turn: string;
  fingerprint: string; // for SCOPE_TURN_CALL
  cause: string;
  message: string; // for the model: what is out, why, since when; redacted by the service
  retryAfterSeconds: number; // 0 when unknown
  expiresUnixNano: bigint; // 0n: until changed
  evidence: Evidence | null;
  enforced: boolean; // false in shadow mode: tell, do not refuse
  tenant: string;
  harness: string;
}

/** The decoded protobuf message, as @grpc/proto-loader gives it (longs as strings). */
export interface WireAdvisory {
  id: string;
  scope: string | number;
  key: string;
  state: string | number;
  server: string;
  tool: string;
  turn: string;
  fingerprint: string;
  cause: string;
  message: string;
  retryAfterSeconds: number;
  expiresUnixNano: string;
  evidence: WireEvidence | null;
  enforced: boolean;
  tenant: string;
  harness: string;
}

export interface WireEvidence {
  calls: number;
  failures: number;
  sinceUnixNano: string;
  traceId: Buffer;
  spanId: Buffer;
  failureClass: string;
  excerpt: string;
}

export function fromWire(wire: WireAdvisory): Advisory {
  const evidence = wire.evidence;
  return {
    id: wire.id,
    scope: wire.scope as Scope,
    key: wire.key,
    state: wire.state as State,
    server: wire.server,
    tool: wire.tool,
    turn: wire.turn,
    fingerprint: wire.fingerprint,
    cause: wire.cause,
    message: wire.message,
    retryAfterSeconds: wire.retryAfterSeconds,
    expiresUnixNano: BigInt(wire.expiresUnixNano || 0),
    evidence:
      evidence === null
        ? null
        : {
            calls: evidence.calls,
            failures: evidence.failures,
            sinceUnixNano: BigInt(evidence.sinceUnixNano || 0),
            traceId: Buffer.from(evidence.traceId).toString("hex"),
            spanId: Buffer.from(evidence.spanId).toString("hex"),
            failureClass: evidence.failureClass,
            excerpt: evidence.excerpt,
          },
    enforced: wire.enforced,
    tenant: wire.tenant,
    harness: wire.harness,
  };
}
