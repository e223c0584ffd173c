/**
 * `wrapClient`: an MCP TypeScript SDK `Client` that heeds mcp-breaker
 * (`@mcp-breaker/client/mcp`; needs `@modelcontextprotocol/sdk` and `@opentelemetry/*`).
 *
 * The wrapped client is the same client with one method changed, `callTool`:
 *
 * 1. check the advisory mirror for this turn, server, tool and arguments (microseconds);
 * 2. **deny** → the call is not made. The model gets a `CallToolResult` with
 *    `isError: true` whose text is the advisory's message (what is out, the recorded
 *    error, since when, what to do instead), and the `mcp.tool.call` span records the
 *    refusal;
 * 3. **half-open** → ask the service's `Check` for the probe permit (a short deadline; an
 *    unreachable service allows): granted → make the call; denied → refuse as above;
 * 4. otherwise make the call and record its span: `ok`, or `failed` with the error text
 *    when the result has `isError` or the call threw (thrown on after recording).
 *
 * Everything else (`listTools`, `connect`, `close`, ...) is the client's own: **the tool
 * stays in the model's roster**. Removing it would leave the model guessing why a tool
 * vanished (and mcp-breaker's roster checks would rightly call it a collapse); a refusal
 * with the reason is something it can act on.
 *
 * **The refused call's outcome: `cancelled`, with `mcp.breaker.refused = true`.** It must
 * count neither as a new failure of the tool (the tool was never reached; a refusal would
 * feed the next refusal) nor as a success (it would close the circuit on no evidence).
 * mcp-breaker reads `cancelled` as neutral, and the attribute as "a dead call spared"
 * (`mcp_breaker_neutral_calls_total{reason="refused_by_advisory"}`).
 *
 * **Repeats the mirror cannot know of yet.** The mirror learns of a failure only after its
 * span went to mcp-breaker and the advisory came back (milliseconds with the prompt span
 * processor, seconds with a batching one), and the next call may come sooner: the model's
 * next round, or the next tool call of the same round, a few milliseconds after the
 * failure. So the wrapper keeps its own note of the failures it has just recorded, and
 * refuses a repeat in the same turn itself, as the service's turn rules will
 * (`processor/engines/turns.py`, `docs/breaker.md`): with `turnKey` `"cause"` (the
 * service's default) a `transport` or `timeout` failure closes the tool for the rest of the
 * turn, any other failure (`tool_error`, `protocol`, `unknown_tool`) only the identical call
 * (same fingerprint; a call without arguments has none and is never refused this way), and
 * a neutral outcome nothing. The failure class is the one the service will read from the
 * span (`ToolCallRecord.verdict()`). The refusal is the advisory the service would send
 * (`SCOPE_TURN_TOOL` or `SCOPE_TURN_CALL`, `STATE_TURN_BLOCKED`, the same message, an id
 * starting `local|`), recorded on the span as any refusal is. A note stands until the
 * mirror holds the service's advisory for it (then the mirror answers: the note is dropped
 * the first time a check finds that advisory, so once the service closes it, or if it
 * came in shadow mode, the call goes), or until it expires as the service's advisory would
 * (`breaker.turn_idle_s`, an hour, after the failure). Bounded: `MAX_NOTED_BLOCKS_PER_TURN`
 * per turn (the service's `breaker.max_blocks_per_turn`) and the `MAX_NOTED_TURNS` turns
 * used last.
 *
 * Calls already in flight when a failure is recorded are not held back: they were checked,
 * and started, before any failure was known (two identical calls the model asked for in
 * one round run side by side, and both reach the tool). Making one wait for its twin would
 * serialize every parallel round on the chance of a duplicate. The service may still count
 * the later one a dead call (one begun after the failing call began, within
 * `breaker.clock_skew_s` of its end, repeats it).
 *
 * A service with another `breaker.turn_key` should be named here (`turnKey: "tool"` or
 * `"call"`); `turnKey: null` turns the local notes off, so the mirror alone decides (e.g.
 * while the service runs in shadow mode, where a note would refuse the repeats that come
 * before the shadow advisory does).
 *
 * Turns: `setTurn(turnId, round)` before each model round; the turn id is the
 * `mcp.turn.id` of the spans, which is what turn-scoped advisories are keyed by. Without
 * it, the turn is what the service takes when a span has no `mcp.turn.id`: the trace id,
 * here of the span active at the call (a harness that runs each turn in an active span
 * needs nothing more; spans are active across `await` only with a context manager, such as
 * the Node SDK's `AsyncLocalStorageContextManager`). With neither, every call would be a
 * trace and so a turn of its own, in which no repeat can be refused: the wrapper warns,
 * once.
 */
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import {
  context,
  isSpanContextValid,
  type SpanContext,
  trace,
  type Tracer,
} from "@opentelemetry/api";

import type { Advisory } from "./advisory.js";
import { callFingerprint, resolveServer } from "./calls.js";
import { ConfigError } from "./errors.js";
import { consoleLogger, type Logger } from "./log.js";
import {
  refusedWithoutMessage,
  toolSubject,
  turnCallBlocked,
  turnToolBlocked,
} from "./messages.js";
import { CheckResult, Decision, type ToolCall } from "./mirror.js";
import { TOOL_WIDE, type Verdict } from "./outcome.js";
import { recordToolCall, type ToolCallRecord } from "./tracing.js";

export type { FailureClass, Verdict } from "./outcome.js";

// The local notes of failures (see the module comment), bounded.
export const MAX_NOTED_TURNS = 256; // turns with notes; the one used longest ago goes first
export const MAX_NOTED_BLOCKS_PER_TURN = 256; // the service's breaker.max_blocks_per_turn
export const NOTE_TTL_MS = 3_600_000; // the service's breaker.turn_idle_s: its advisory's life
export const LOCAL_ID_PREFIX = "local|"; // the id of a note's advisory: not one the service sent
const NS_PER_MS = 1_000_000n;

/** The service's `breaker.turn_key`: what one failure blocks for the rest of its turn. */
export type TurnKey = "cause" | "tool" | "call";

/** What the wrapper needs of an `AdvisoryClient`. */
export interface AdvisorySource {
  check(call: ToolCall): CheckResult;
  checkRemote(call: ToolCall): Promise<CheckResult>;
  rosterCollapse(turn: string): Advisory | null;
}

/** The part of the SDK's `Client` that makes tool calls. */
export type ToolClient = Pick<Client, "callTool">;

export interface WrapOptions {
  /** null: record spans only, consult no advisories. */
  advisories: AdvisorySource | null;
  /** Its provider's resource names the harness (`service.name`), as mcp-breaker reads it. */
  tracer: Tracer;
  /** The MCP server this client is connected to, as the spans and advisories name it. */
  serverName: string;
  /** Where the wrapper says what it does; by default warnings go to the console. */
  logger?: Logger;
  /**
   * The service's `breaker.turn_key` ("cause" by default), for refusing repeats of this
   * client's own failures before the mirror knows of them; null: no local refusals.
   */
  turnKey?: TurnKey | null;
}

export interface TurnControls {
  /** Before each model round: the turn (`mcp.turn.id`) and the round within it, from 1. */
  setTurn(turnId: string, round?: number): void;
  readonly turnId: string;
  readonly round: number | undefined;
  /**
   * The current turn's roster-collapse advisory: the tools offered fell to none mid-turn,
   * so list them again before the next model request. null while the roster is fine.
   */
  rosterCollapse(): Advisory | null;
}

export interface BreakerControls extends TurnControls {
  /** The client itself, unwrapped. */
  readonly unwrapped: ToolClient;
}

export type BreakerClient<C extends ToolClient> = C & BreakerControls;

type CallToolArguments = Parameters<Client["callTool"]>;
type CallToolReturn = Awaited<ReturnType<Client["callTool"]>>;

/** One call for a `ToolCallGuard` to check, make or refuse, and record. */
export interface GuardedCall<R> {
  tool: string;
  arguments: unknown;
  /** Makes the call (not called when it is refused). */
  make: () => Promise<R>;
  /** How the call ended, from what `make` returned; by default `recordCallToolReturn`. */
  settle?: (record: ToolCallRecord, result: R) => void;
  /** This call's turn and round, instead of the guard's `setTurn`. */
  turn?: { turnId: string; round?: number | undefined };
}

/**
 * What `wrapClient` does around each call, for any way of making MCP tool calls (the Vercel
 * AI SDK adapter is one): the decision, the refusal, the span and the notes of failures.
 */
export interface ToolCallGuard extends TurnControls {
  /** Checks the call; refused: `refusalResult` and `make` is not called; else its result. */
  call<R>(call: GuardedCall<R>): Promise<R | CallToolResult>;
}

export interface GuardOptions extends WrapOptions {
  /** How the warning for calls without a turn says to name the turn. */
  turnHint?: string;
}

/** The decision and recording of `wrapClient`, on their own; see the module comment. */
export function toolCallGuard(options: GuardOptions): ToolCallGuard {
  const { advisories, tracer, serverName } = options;
  const log = options.logger ?? consoleLogger;
  const turnHint = options.turnHint ?? "call setTurn(turnId) before each model round";
  const turnKey = options.turnKey === undefined ? "cause" : options.turnKey;
  const notes = advisories !== null && turnKey !== null ? new FailureNotes({ turnKey }) : null;
  let turnId = "";
  let round: number | undefined;
  let warnedNoTurn = false;

  /** The turn of a call made now, as mcp-breaker will read it from its span. */
  const currentTurn = (named: string = turnId): string => {
    if (named) return named;
    const active = trace.getSpanContext(context.active());
    if (active !== undefined && isSpanContextValid(active)) return active.traceId;
    if (!warnedNoTurn) {
      warnedNoTurn = true;
      log.warn(
        `no turn for calls to ${serverName || "this client"}: ${turnHint}, or make the calls ` +
          "inside an active span for the turn (its trace is the turn); without either, each " +
          "call is a turn of its own and a repeated call cannot be refused",
      );
    }
    return "";
  };

  const decide = async (call: ToolCall & { server: string }): Promise<CheckResult> => {
    if (advisories === null) return new CheckResult(Decision.ALLOW);
    // The arguments, not their fingerprint: the mirror hashes them only when the turn has
    // an exact-call advisory, which most turns never do.
    const local = advisories.check(call);
    if (notes !== null && call.turn) {
      if (local.advisory !== null) notes.settle(call.turn, local.advisory); // the mirror has it
      if (!local.refused) {
        // A failure of this client the mirror cannot know of yet. A turn block comes
        // before a half-open circuit, as in the service's Check.
        const noted = notes.check(call.turn, call.server, call.tool, call.arguments);
        if (noted !== null) return new CheckResult(Decision.DENY, { advisory: noted });
      }
    }
    if (local.decision !== Decision.PROBE_NEEDED) return local;
    return advisories.checkRemote(call); // half-open: exactly one caller may test it
  };

  const call = async <R>(guarded: GuardedCall<R>): Promise<R | CallToolResult> => {
    const { tool, arguments: arguments_, make } = guarded;
    const settle = guarded.settle ?? recordCallToolReturn;
    const callTurnId = guarded.turn !== undefined ? guarded.turn.turnId : turnId;
    const callRound = guarded.turn !== undefined ? guarded.turn.round : round;
    const server = resolveServer(serverName, tool);
    const turn = currentTurn(callTurnId);
    const check = await decide({ turn, server, tool, arguments: arguments_ });
    const recorded = {
      tool,
      server: serverName || null,
      turnId: callTurnId,
      round: callRound,
      arguments: arguments_,
    };
    let made: ToolCallRecord | null = null;
    try {
      return await recordToolCall(tracer, recorded, async (record) => {
        made = record;
        if (check.refused) {
          record.refused(check.advisory);
          log.info(
            `mcp-breaker refused ${server}/${tool}: ${check.advisory?.id ?? "(no advisory)"}`,
          );
          return refusalResult(tool, check.advisory);
        }
        if (check.decision === Decision.PROBE) {
          record.noteProbe(check.probePermit);
        } else if (check.shadow && check.advisory !== null) {
          record.noteShadow(check.advisory);
          log.info(`mcp-breaker would refuse ${server}/${tool} (shadow mode)`);
        }
        const result = await make();
        settle(record, result);
        return result;
      });
    } finally {
      // The span has ended (an error is on its way out, if any): note a failure now,
      // before the next call can be checked.
      const record = made as ToolCallRecord | null;
      if (notes !== null && (record?.outcome === "ok" || record?.outcome === "failed")) {
        notes.note(turn, server, tool, arguments_, record.verdict(), record.span.spanContext());
      }
    }
  };

  return {
    call,
    setTurn(id: string, roundNumber?: number) {
      turnId = id;
      round = roundNumber;
    },
    get turnId() {
      return turnId;
    },
    get round() {
      return round;
    },
    rosterCollapse() {
      if (advisories === null) return null;
      const turn = currentTurn();
      return turn ? advisories.rosterCollapse(turn) : null;
    },
  };
}

/** `client`, with `callTool` heeding the advisories; see the module comment. */
export function wrapClient<C extends ToolClient>(
  client: C,
  options: WrapOptions,
): BreakerClient<C> {
  const guard = toolCallGuard(options);

  const callTool = async (...callArguments: CallToolArguments): Promise<CallToolReturn> => {
    const [params] = callArguments;
    return (await guard.call({
      tool: params.name,
      arguments: params.arguments,
      make: () => client.callTool(...callArguments),
    })) as CallToolReturn;
  };

  const controls: BreakerControls = {
    setTurn(id: string, roundNumber?: number) {
      guard.setTurn(id, roundNumber);
    },
    get turnId() {
      return guard.turnId;
    },
    get round() {
      return guard.round;
    },
    rosterCollapse() {
      return guard.rosterCollapse();
    },
    unwrapped: client,
  };

  return new Proxy(client, {
    get(target, property) {
      if (property === "callTool") return callTool;
      if (Object.prototype.hasOwnProperty.call(controls, property)) {
        return Reflect.get(controls, property);
      }
      const value: unknown = Reflect.get(target, property, target);
      // The client's own methods run on the client itself, not on the proxy.
      return typeof value === "function" ? value.bind(target) : value;
    },
  }) as BreakerClient<C>;
}

/**
 * How a call ended, from what the MCP SDK's `callTool` returned: `ok`, or `failed` with its
 * text when it has `isError`. The old `toolResult` form (no `content`) is not how the call
 * ended, so nothing is said.
 */
export function recordCallToolReturn(record: ToolCallRecord, result: unknown): void {
  if (Array.isArray((result as { content?: unknown } | null)?.content)) {
    recordResult(record, result as CallToolResult);
  }
}

/** What the model sees instead of the tool's answer: the advisory's message. */
export function refusalResult(tool: string, advisory: Advisory | null): CallToolResult {
  let message = advisory?.message ?? "";
  if (!message) {
    message = refusedWithoutMessage(
      toolSubject(tool, advisory?.server ?? ""),
      advisory?.cause ?? "",
    );
  }
  return { content: [{ type: "text", text: message }], isError: true };
}

export function recordResult(record: ToolCallRecord, result: CallToolResult): void {
  if (result.isError)
    record.failed(resultText(result) || "the tool returned isError", { isError: true });
  else record.ok();
}

export function resultText(result: CallToolResult): string {
  return result.content.flatMap((block) => (block.type === "text" ? [block.text] : [])).join("\n");
}

interface TurnNotes {
  tools: Map<string, Advisory>; // by server and tool
  calls: Map<string, Advisory>; // by fingerprint
}

export interface FailureNotesOptions {
  turnKey?: TurnKey;
  maxTurns?: number;
  maxBlocksPerTurn?: number;
  ttlMs?: number;
  now?: () => number; // milliseconds since the epoch
}

/**
 * The failures a wrapper recorded itself, per turn, as the turn blocks the service will
 * open for them, until the mirror has the service's advisory (see the module comment).
 */
export class FailureNotes {
  readonly turnKey: TurnKey;
  readonly maxTurns: number;
  readonly maxBlocksPerTurn: number;
  readonly ttlMs: number;
  private readonly now: () => number;
  private readonly turns = new Map<string, TurnNotes>(); // in order of use, oldest first

  constructor(options: FailureNotesOptions = {}) {
    this.turnKey = options.turnKey ?? "cause";
    this.maxTurns = options.maxTurns ?? MAX_NOTED_TURNS;
    this.maxBlocksPerTurn = options.maxBlocksPerTurn ?? MAX_NOTED_BLOCKS_PER_TURN;
    this.ttlMs = options.ttlMs ?? NOTE_TTL_MS;
    this.now = options.now ?? Date.now;
    for (const [name, value] of Object.entries({
      maxTurns: this.maxTurns,
      maxBlocksPerTurn: this.maxBlocksPerTurn,
      ttlMs: this.ttlMs,
    })) {
      if (!(value > 0)) throw new ConfigError(`FailureNotes: ${name} must be positive`);
    }
  }

  /** How many blocks are noted, over every turn. */
  get size(): number {
    let size = 0;
    for (const notes of this.turns.values()) size += notes.tools.size + notes.calls.size;
    return size;
  }

  /**
   * A call of `turn` ended with `verdict`: note the block its failure opens, as the
   * service's turn breaker does (the earliest failure of a key stands).
   */
  note(
    turn: string,
    server: string,
    tool: string,
    arguments_: unknown,
    verdict: Verdict,
    spanContext?: SpanContext,
  ): Advisory | null {
    if (!turn || verdict.outcome !== "failed") return null;
    const toolWide =
      this.turnKey === "tool" ||
      (this.turnKey === "cause" &&
        verdict.failureClass !== null &&
        TOOL_WIDE.has(verdict.failureClass));
    const fingerprint = toolWide ? undefined : callFingerprint(server, tool, arguments_);
    if (!toolWide && fingerprint === undefined) return null; // a repeat or a correction?
    let notes = this.use(turn);
    if (notes === undefined) {
      notes = { tools: new Map(), calls: new Map() };
      this.turns.set(turn, notes);
      for (const oldest of this.turns.keys()) {
        if (this.turns.size <= this.maxTurns) break;
        this.turns.delete(oldest);
      }
    }
    const key = fingerprint ?? toolKey(server, tool);
    const held = (fingerprint === undefined ? notes.tools : notes.calls).get(key);
    if (held !== undefined) return held;
    if (notes.tools.size + notes.calls.size >= this.maxBlocksPerTurn) return null; // as the service
    const advisory = localAdvisory(
      turn,
      server,
      tool,
      fingerprint,
      verdict,
      this.now(),
      this.ttlMs,
      spanContext,
    );
    (fingerprint === undefined ? notes.tools : notes.calls).set(key, advisory);
    return advisory;
  }

  /** The note refusing this call, if any (expired ones are dropped). */
  check(turn: string, server: string, tool: string, arguments_: unknown): Advisory | null {
    const notes = turn ? this.use(turn) : undefined;
    if (notes === undefined) return null;
    const nowNs = BigInt(Math.floor(this.now())) * NS_PER_MS;
    let found = lookUp(notes.tools, toolKey(server, tool), nowNs);
    if (found === null && notes.calls.size > 0) {
      const fingerprint = callFingerprint(server, tool, arguments_);
      if (fingerprint !== undefined) found = lookUp(notes.calls, fingerprint, nowNs);
    }
    if (notes.tools.size + notes.calls.size === 0) this.turns.delete(turn);
    return found;
  }

  /**
   * The mirror holds `advisory`: if it is the service's word on a noted block, the note is
   * dropped and the mirror answers from now on.
   */
  settle(turn: string, advisory: Advisory): void {
    const notes = turn ? this.turns.get(turn) : undefined;
    if (notes === undefined || advisory.turn !== turn || advisory.id.startsWith(LOCAL_ID_PREFIX)) {
      return;
    }
    if (advisory.scope === "SCOPE_TURN_TOOL") {
      notes.tools.delete(toolKey(advisory.server, advisory.tool));
    } else if (advisory.scope === "SCOPE_TURN_CALL") {
      notes.calls.delete(advisory.fingerprint);
    }
    if (notes.tools.size + notes.calls.size === 0) this.turns.delete(turn);
  }

  private use(turn: string): TurnNotes | undefined {
    const notes = this.turns.get(turn);
    if (notes !== undefined) {
      this.turns.delete(turn); // to the end: used last
      this.turns.set(turn, notes);
    }
    return notes;
  }
}

function toolKey(server: string, tool: string): string {
  return `${server.length}:${server}/${tool}`;
}

function lookUp(held: Map<string, Advisory>, key: string, nowNs: bigint): Advisory | null {
  const advisory = held.get(key);
  if (advisory === undefined) return null;
  if (advisory.expiresUnixNano <= nowNs) {
    held.delete(key);
    return null;
  }
  return advisory;
}

/** The advisory the service will send for this block, as far as the harness can know it. */
function localAdvisory(
  turn: string,
  server: string,
  tool: string,
  fingerprint: string | undefined,
  verdict: Verdict,
  nowMs: number,
  ttlMs: number,
  spanContext: SpanContext | undefined,
): Advisory {
  const toolWide = fingerprint === undefined;
  // The key and id as the service writes them (engines/turns.py, advisories/model.py).
  const name = toolWide ? `${server}/${tool}` : fingerprint;
  const key = toolWide ? `tool:${name}` : `call:${name}`;
  const sinceNs = BigInt(Math.floor(nowMs)) * NS_PER_MS;
  const valid = spanContext !== undefined && isSpanContextValid(spanContext);
  const failureClass = verdict.failureClass ?? "";
  return {
    id: `${LOCAL_ID_PREFIX}${toolWide ? "turn_tool" : "turn_call"}|${turn}|${name}`,
    scope: toolWide ? "SCOPE_TURN_TOOL" : "SCOPE_TURN_CALL",
    key,
    state: "STATE_TURN_BLOCKED",
    server,
    tool,
    turn,
    fingerprint: fingerprint ?? "",
    cause: failureClass,
    message: turnBlockMessage(tool, server, toolWide, verdict.excerpt),
    retryAfterSeconds: 0,
    expiresUnixNano: sinceNs + BigInt(Math.floor(ttlMs)) * NS_PER_MS,
    evidence: {
      calls: 1,
      failures: 1,
      sinceUnixNano: sinceNs,
      traceId: valid ? spanContext.traceId : "",
      spanId: valid ? spanContext.spanId : "",
      failureClass,
      excerpt: verdict.excerpt,
    },
    enforced: true,
    tenant: "",
    harness: "",
  };
}

/** The service's message for a turn block (`turn_message` in its breaker), word for word. */
export function turnBlockMessage(
  tool: string,
  server: string,
  toolWide: boolean,
  excerpt: string,
): string {
  const subject = toolSubject(tool, server);
  return toolWide ? turnToolBlocked(subject, excerpt) : turnCallBlocked(subject, excerpt);
}
