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
 * Turns: `setTurn(turnId, round)` before each model round; the turn id is the
 * `mcp.turn.id` of the spans, which is what turn-scoped advisories are keyed by.
 */
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import type { Tracer } from "@opentelemetry/api";

import type { Advisory } from "./advisory.js";
import { resolveServer } from "./calls.js";
import { silentLogger, type Logger } from "./log.js";
import { CheckResult, Decision, type ToolCall } from "./mirror.js";
import { recordToolCall, type ToolCallRecord } from "./tracing.js";

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
  logger?: Logger;
}

export interface BreakerControls {
  /** Before each model round: the turn (`mcp.turn.id`) and the round within it, from 1. */
  setTurn(turnId: string, round?: number): void;
  readonly turnId: string;
  readonly round: number | undefined;
  /**
   * The current turn's roster-collapse advisory: the tools offered fell to none mid-turn,
   * so list them again before the next model request. null while the roster is fine.
   */
  rosterCollapse(): Advisory | null;
  /** The client itself, unwrapped. */
  readonly unwrapped: ToolClient;
}

export type BreakerClient<C extends ToolClient> = C & BreakerControls;

type CallToolArguments = Parameters<Client["callTool"]>;
type CallToolReturn = Awaited<ReturnType<Client["callTool"]>>;

/** `client`, with `callTool` heeding the advisories; see the module comment. */
export function wrapClient<C extends ToolClient>(
  client: C,
  options: WrapOptions,
): BreakerClient<C> {
  const { advisories, tracer, serverName } = options;
  const log = options.logger ?? silentLogger;
  let turnId = "";
  let round: number | undefined;

  const decide = async (tool: string, server: string, args: unknown): Promise<CheckResult> => {
    if (advisories === null) return new CheckResult(Decision.ALLOW);
    // The arguments, not their fingerprint: the mirror hashes them only when the turn has
    // an exact-call advisory, which most turns never do.
    const call = { turn: turnId, server, tool, arguments: args };
    const local = advisories.check(call);
    if (local.decision !== Decision.PROBE_NEEDED) return local;
    return advisories.checkRemote(call); // half-open: exactly one caller may test it
  };

  const callTool = async (...callArguments: CallToolArguments): Promise<CallToolReturn> => {
    const [params] = callArguments;
    const tool = params.name;
    const server = resolveServer(serverName, tool);
    const check = await decide(tool, server, params.arguments);
    const call = { tool, server: serverName || null, turnId, round, arguments: params.arguments };
    return recordToolCall(tracer, call, async (record) => {
      if (check.refused) {
        record.refused(check.advisory);
        log.info(`mcp-breaker refused ${server}/${tool}: ${check.advisory?.id ?? "(no advisory)"}`);
        return refusalResult(tool, check.advisory) as CallToolReturn;
      }
      if (check.decision === Decision.PROBE) {
        record.noteProbe(check.probePermit);
      } else if (check.shadow && check.advisory !== null) {
        record.noteShadow(check.advisory);
        log.info(`mcp-breaker would refuse ${server}/${tool} (shadow mode)`);
      }
      const result = await client.callTool(...callArguments);
      if (Array.isArray((result as { content?: unknown }).content)) {
        recordResult(record, result as CallToolResult);
      } // else the old `toolResult` form: not how the call ended, so nothing is said
      return result;
    });
  };

  const controls: BreakerControls = {
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
      return advisories === null || !turnId ? null : advisories.rosterCollapse(turnId);
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

/** What the model sees instead of the tool's answer: the advisory's message. */
export function refusalResult(tool: string, advisory: Advisory | null): CallToolResult {
  let message = advisory?.message ?? "";
  if (!message) {
    const cause = advisory?.cause ? `: ${advisory.cause}` : "";
    message =
      `\`${tool}\` is unavailable right now${cause}. Do not call it again this turn; ` +
      "answer what you can without it.";
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
