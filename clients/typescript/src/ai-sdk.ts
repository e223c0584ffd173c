/**
 * `breakerTools`: MCP tools for the Vercel AI SDK that heed mcp-breaker
 * (`@mcp-breaker/client/ai-sdk`; for `ai` 6.x and 7.x with `@ai-sdk/mcp`, and
 * `@opentelemetry/api`).
 *
 * `createMCPClient(...).tools()` hands out an object of tool name → AI SDK tool, each with
 * an `execute(input, options)` that makes the MCP call. `breakerTools` returns an object of
 * the same tools with each `execute` behind `wrapClient`'s logic (`toolCallGuard` in
 * `mcp.ts`, see its module comment): the advisory mirror is checked first; a refused call
 * never reaches the original `execute`, and the model gets the tool error the MCP tools hand
 * it themselves, `{ isError: true, content: [{ type: "text", text: <the advisory's message> }] }`;
 * a made call is recorded as an `mcp.tool.call` span (`ok`, `failed` with the text when its
 * result has `isError`, or the thrown error, recorded and thrown on), and this set's own
 * failures refuse their repeats in the same turn before the mirror knows of them.
 *
 * The keys are the tools' MCP names, as `tools()` names them. Tools without `execute` are
 * passed on as they are. Nothing is imported from the AI SDK: the tools are taken by their
 * shape, so one build serves both major versions.
 *
 * The turn: `turn`, a string or a function of the call's execution options (called before
 * each call, so it can read the harness's current turn and round); without it, the trace of
 * the span active at the call (the AI SDK's own `ai.toolCall` span with
 * `experimental_telemetry` on and a context manager registered), as for `wrapClient`.
 */
import { trace, type Tracer } from "@opentelemetry/api";

import type { Logger } from "./log.js";
import { type AdvisorySource, recordResult, toolCallGuard, type TurnKey } from "./mcp.js";
import type { ToolCallRecord } from "./tracing.js";

/** The instrumentation scope of the spans when no tracer is given. */
export const DEFAULT_TRACER_NAME = "@mcp-breaker/client";

/** What the adapter reads of the AI SDK's tool execution options (6.x and 7.x). */
export interface ToolExecutionOptionsLike {
  toolCallId: string;
  messages: readonly unknown[];
  abortSignal?: AbortSignal | undefined;
}

/** A call's turn (`mcp.turn.id`) and, when known, its model round (from 1). */
export interface TurnRef {
  turnId: string;
  round?: number | undefined;
}

export interface BreakerToolsOptions {
  /** The MCP server these tools come from, as the spans and advisories name it. */
  server: string;
  /**
   * Records the spans; by default the global provider's (`trace.getTracer`). Its provider's
   * resource names the harness (`service.name`), as mcp-breaker reads it.
   */
  tracer?: Tracer;
  /** The turn of each call: fixed, or asked before each call; see the module comment. */
  turn?: string | TurnRef | ((options: ToolExecutionOptionsLike) => string | TurnRef);
  /** Where the adapter says what it does; by default warnings go to the console. */
  logger?: Logger;
  /** The service's `breaker.turn_key`, as for `wrapClient`; null: no local refusals. */
  turnKey?: TurnKey | null;
}

type Execute = (input: unknown, options: ToolExecutionOptionsLike) => unknown;

/**
 * `tools`, each `execute` heeding `advisories` (null: record the spans only); see the
 * module comment. The object given is left as it is.
 */
export function breakerTools<T extends Record<string, object>>(
  tools: T,
  advisories: AdvisorySource | null,
  options: BreakerToolsOptions,
): T {
  const guard = toolCallGuard({
    advisories,
    tracer: options.tracer ?? trace.getTracer(DEFAULT_TRACER_NAME),
    serverName: options.server,
    turnHint: "give breakerTools a turn",
    ...(options.logger !== undefined ? { logger: options.logger } : {}),
    ...(options.turnKey !== undefined ? { turnKey: options.turnKey } : {}),
  });
  const { turn } = options;
  const turnOf = (executionOptions: ToolExecutionOptionsLike): TurnRef | undefined => {
    const named = typeof turn === "function" ? turn(executionOptions) : turn;
    return typeof named === "string" ? { turnId: named } : named;
  };
  const wrapped = Object.entries(tools).map(([name, tool]) => {
    const execute = (tool as { execute?: unknown }).execute;
    if (typeof execute !== "function") return [name, tool] as const;
    const guarded: Execute = (input, executionOptions) => {
      const callTurn = turnOf(executionOptions);
      return guard.call({
        tool: name,
        arguments: input,
        make: async () => (execute as Execute).call(tool, input, executionOptions),
        settle: recordExecuteResult,
        ...(callTurn !== undefined ? { turn: callTurn } : {}),
      });
    };
    return [name, { ...tool, execute: guarded }] as const;
  });
  return Object.fromEntries(wrapped) as T;
}

/**
 * How a made call ended, from what `execute` returned: an MCP `CallToolResult` is `ok`, or
 * `failed` with its text when it has `isError` (`@ai-sdk/mcp` hands tool errors back so);
 * anything else (the structured content of a tool with an `outputSchema`) came from a call
 * that did not fail.
 */
export function recordExecuteResult(record: ToolCallRecord, result: unknown): void {
  const content = (result as { content?: unknown } | null | undefined)?.content;
  if (Array.isArray(content)) recordResult(record, result as Parameters<typeof recordResult>[1]);
  else record.ok();
}
