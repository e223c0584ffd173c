/**
 * Tool-call spans for mcp-breaker: written in the harness convention, and sent at once.
 * (`@mcp-breaker/client/tracing`; needs `@opentelemetry/api`, `@opentelemetry/core` and
 * `@opentelemetry/sdk-trace-base`.)
 *
 * **Why a processor of its own.** The SDK's `BatchSpanProcessor` holds an ended span for
 * up to `scheduledDelayMillis` (5 s by default) before exporting it. A model's next round
 * often comes sooner, so the span proving a tool dead would reach mcp-breaker after the
 * model had already asked for the same call again. `PromptToolSpanProcessor` sends MCP
 * tool-call spans as soon as they end, and hands every other span to a batch processor:
 *
 *     span ends ─▶ tool call?  yes ─▶ bounded queue ─▶ exporter (next turn of the event loop)
 *                              no  ─▶ BatchSpanProcessor ───────▶ exporter (batched)
 *
 * `onEnd` never waits: the queue is bounded, and a span that finds it full is dropped and
 * counted (`stats.dropped`). One export is in flight at a time; what queues up meanwhile
 * leaves in the next one, so a burst of tool spans is one request, not one each.
 *
 * A tool-call span is one named `mcp.tool.call` (our convention), `tools/call ...` or
 * `MCP send tools/call ...` (OpenTelemetry MCP semantic conventions, MCP SDKs), or one
 * carrying `mcp.tool.name` or `mcp.method.name = tools/call`.
 *
 * **Writing the span.** `recordToolCall` runs a call inside an `mcp.tool.call` span with
 * the attributes of `docs/conventions.md`; the harness says how it ended on the record:
 * `ok()`, `failed(error)`, `cancelled()`, or `refused(advisory)` for a call an advisory
 * kept from being made. An exception escaping the call records `failed` (or `cancelled`
 * for an abort) and is thrown on; a call that ends without saying records no outcome:
 * mcp-breaker never guesses one.
 */
import {
  type Attributes,
  context,
  type Span,
  SpanKind,
  SpanStatusCode,
  type Tracer,
} from "@opentelemetry/api";
import { ExportResultCode, suppressTracing } from "@opentelemetry/core";
import {
  BatchSpanProcessor,
  type ReadableSpan,
  type Span as SdkSpan,
  type SpanExporter,
  type SpanProcessor,
} from "@opentelemetry/sdk-trace-base";
import type { Context } from "@opentelemetry/api";

import type { Advisory } from "./advisory.js";
import { recordedArguments } from "./calls.js";
import { ConfigError } from "./errors.js";
import { judge, type RecordedOutcome, type Verdict } from "./outcome.js";
import { redact } from "./redact.js";

export type { FailureClass, Verdict } from "./outcome.js";

export const TOOL_CALL_SPAN = "mcp.tool.call";
export const REFUSED_ATTRIBUTE = "mcp.breaker.refused";
const TOOL_SPAN_PREFIXES = ["tools/call", "MCP send tools/call"];
export const MAX_ERROR_CHARS = 4096; // the service keeps a 300-character redacted excerpt anyway
export const DEFAULT_MAX_QUEUE = 2048; // tool spans waiting; beyond it they are dropped
export const DEFAULT_MAX_BATCH = 256; // spans per export call
export const DEFAULT_EXPORT_TIMEOUT_MS = 30_000; // an export that never answers is given up

export interface PromptExportOptions {
  /**
   * Every other span. By default a `BatchSpanProcessor` on the same exporter, which then
   * shuts the exporter down; given one, this processor shuts its exporter down itself.
   */
  batch?: SpanProcessor;
  maxQueue?: number;
  maxBatch?: number;
  exportTimeoutMs?: number;
}

export interface PromptExportStats {
  exported: number;
  dropped: number; // the queue was full: the harness is never held up
  failed: number; // the exporter did not deliver them
}

export function isToolSpan(span: ReadableSpan): boolean {
  const name = span.name;
  if (name === TOOL_CALL_SPAN || TOOL_SPAN_PREFIXES.some((prefix) => name.startsWith(prefix))) {
    return true;
  }
  const attributes = span.attributes;
  return "mcp.tool.name" in attributes || attributes["mcp.method.name"] === "tools/call";
}

/** Exports tool-call spans as they end; everything else through `batch`. */
export class PromptToolSpanProcessor implements SpanProcessor {
  readonly stats: PromptExportStats = { exported: 0, dropped: 0, failed: 0 };
  private readonly exporter: SpanExporter;
  private readonly batch: SpanProcessor;
  private readonly ownsExporter: boolean;
  private readonly maxQueue: number;
  private readonly maxBatch: number;
  private readonly exportTimeoutMs: number;
  private queue: ReadableSpan[] = [];
  private exporting = false;
  private scheduled = false;
  private shutDown = false;
  private idle: Array<() => void> = []; // waiting for the queue to drain

  constructor(exporter: SpanExporter, options: PromptExportOptions = {}) {
    this.exporter = exporter;
    this.batch = options.batch ?? new BatchSpanProcessor(exporter);
    this.ownsExporter = options.batch !== undefined;
    this.maxQueue = options.maxQueue ?? DEFAULT_MAX_QUEUE;
    this.maxBatch = options.maxBatch ?? DEFAULT_MAX_BATCH;
    this.exportTimeoutMs = options.exportTimeoutMs ?? DEFAULT_EXPORT_TIMEOUT_MS;
    for (const [name, value] of Object.entries({
      maxQueue: this.maxQueue,
      maxBatch: this.maxBatch,
      exportTimeoutMs: this.exportTimeoutMs,
    })) {
      if (!Number.isInteger(value) || value < 1) {
        throw new ConfigError(
          `PromptToolSpanProcessor: ${name} must be a positive integer, but was ${value}`,
        );
      }
    }
  }

  onStart(span: SdkSpan, parentContext: Context): void {
    this.batch.onStart(span, parentContext);
  }

  onEnd(span: ReadableSpan): void {
    if (this.shutDown) return;
    if (!isToolSpan(span)) {
      this.batch.onEnd(span);
      return;
    }
    if (this.queue.length >= this.maxQueue) {
      this.stats.dropped++;
      return;
    }
    this.queue.push(span);
    this.schedule();
  }

  async forceFlush(): Promise<void> {
    await this.drained();
    await this.batch.forceFlush();
  }

  async shutdown(): Promise<void> {
    if (this.shutDown) return;
    this.shutDown = true;
    await this.drained(); // what was queued still goes
    await this.batch.shutdown();
    if (this.ownsExporter) await this.exporter.shutdown();
  }

  private drained(): Promise<void> {
    if (this.queue.length === 0 && !this.exporting) return Promise.resolve();
    return new Promise((resolve) => this.idle.push(resolve));
  }

  private schedule(): void {
    if (this.exporting || this.scheduled) return;
    this.scheduled = true;
    // Not in onEnd itself: the span ended on the harness's call path. setImmediate runs
    // after this turn's I/O, and takes every tool span that ended meanwhile in one export.
    setImmediate(() => {
      this.scheduled = false;
      this.exportSome();
    });
  }

  private exportSome(): void {
    if (this.queue.length === 0) {
      this.notifyIdle();
      return;
    }
    this.exporting = true;
    const spans = this.queue.splice(0, this.maxBatch);
    let settled = false;
    const settle = (delivered: boolean) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      if (delivered) this.stats.exported += spans.length;
      else this.stats.failed += spans.length;
      this.exporting = false;
      if (this.queue.length > 0) this.schedule();
      else this.notifyIdle();
    };
    const timer = setTimeout(() => settle(false), this.exportTimeoutMs);
    // As the SDK's own processors do: the exporter's gRPC/HTTP calls are not traced.
    context.with(suppressTracing(context.active()), () => {
      try {
        this.exporter.export(spans, (result) => settle(result.code === ExportResultCode.SUCCESS));
      } catch {
        settle(false);
      }
    });
  }

  private notifyIdle(): void {
    if (this.exporting || this.queue.length > 0) return;
    const waiting = this.idle;
    this.idle = [];
    for (const resolve of waiting) resolve();
  }
}

/**
 * The `mcp.tool.call` span of one call; say once how the call ended. It also keeps what it
 * wrote that bears on the outcome, so `verdict()` tells how mcp-breaker will read the span,
 * even when the span is not recorded (sampled out).
 */
export class ToolCallRecord {
  readonly span: Span;
  private said: string | null = null;
  private readonly written: Omit<RecordedOutcome, "outcome"> = {
    error: "",
    errorType: null,
    isError: null,
    statusError: false,
    exceptions: [],
    refused: false,
  };

  constructor(span: Span) {
    this.span = span;
  }

  /** What was said: ok, failed, cancelled (refused calls too); null if nothing yet. */
  get outcome(): string | null {
    return this.said;
  }

  ok(): void {
    this.setOutcome("ok");
    this.span.setAttribute("mcp.tool.is_error", false);
    this.written.isError = false;
  }

  /**
   * The call failed: `error` verbatim (redacted here, before the span goes anywhere);
   * `errorType` a JSON-RPC code as text or an error's name; `isError` the result's isError.
   */
  failed(error: string, options: { errorType?: string; isError?: boolean } = {}): void {
    this.setOutcome("failed");
    const text = redact(error, MAX_ERROR_CHARS);
    this.span.setAttribute("mcp.tool.error", text);
    this.written.error = text;
    if (options.errorType) {
      this.span.setAttribute("error.type", options.errorType);
      this.written.errorType = options.errorType;
    }
    if (options.isError !== undefined) {
      this.span.setAttribute("mcp.tool.is_error", options.isError);
      this.written.isError = options.isError;
    }
    this.span.setStatus({ code: SpanStatusCode.ERROR, message: text });
    this.written.statusError = true;
  }

  /** The harness stopped the call (neutral: neither a failure nor a success). */
  cancelled(): void {
    this.setOutcome("cancelled");
  }

  /** mcp-breaker's advisory kept the call from being made: neutral, marked refused. */
  refused(advisory: Advisory | null): void {
    this.setOutcome("cancelled");
    this.span.setAttribute(REFUSED_ATTRIBUTE, true);
    this.written.refused = true;
    if (advisory !== null) this.span.setAttribute("mcp.breaker.advisory", advisory.id);
  }

  /** This call tests a half-open circuit under the service's probe permit. */
  noteProbe(permit: number): void {
    this.span.setAttribute("mcp.breaker.probe_permit", permit);
  }

  /** Made although an advisory refuses it: the advisory is in shadow mode. */
  noteShadow(advisory: Advisory): void {
    this.span.setAttribute("mcp.breaker.shadow_advisory", advisory.id);
  }

  /** An `exception` event: the error's type and its message, redacted; no stack (paths). */
  noteException(kind: string, message: string): void {
    const text = redact(message, MAX_ERROR_CHARS);
    this.span.addEvent("exception", { "exception.type": kind, "exception.message": text });
    this.written.exceptions = [...this.written.exceptions, [kind, text]];
  }

  /**
   * The outcome mcp-breaker will read from this span (`outcome.ts`): `failed` with the
   * failure class the service will give it, `ok`, `neutral` or `unknown`.
   */
  verdict(): Verdict {
    return judge({ outcome: this.said, ...this.written });
  }

  private setOutcome(outcome: string): void {
    this.said = outcome;
    this.span.setAttribute("mcp.tool.outcome", outcome);
  }
}

export interface RecordedCall {
  tool: string;
  server?: string | null;
  turnId?: string | null; // mcp.turn.id; without it the trace id is the turn
  round?: number | null; // mcp.turn.round, from 1
  arguments?: unknown; // recorded as their digest (mcp.tool.args_hash), never as they are
  attributes?: Attributes;
}

/**
 * Run `body` inside an `mcp.tool.call` span, active for its duration (so the MCP SDK's
 * own spans nest under it, given a context manager); see the module comment.
 */
export async function recordToolCall<T>(
  tracer: Tracer,
  call: RecordedCall,
  body: (record: ToolCallRecord) => Promise<T> | T,
): Promise<T> {
  const attributes: Attributes = { "mcp.tool.name": call.tool };
  if (call.server) attributes["mcp.server.name"] = call.server;
  if (call.turnId) attributes["mcp.turn.id"] = call.turnId;
  if (call.round !== undefined && call.round !== null) attributes["mcp.turn.round"] = call.round;
  if (call.arguments !== undefined && call.arguments !== null) {
    Object.assign(attributes, recordedArguments(call.arguments));
  }
  Object.assign(attributes, call.attributes);
  return tracer.startActiveSpan(
    TOOL_CALL_SPAN,
    { kind: SpanKind.CLIENT, attributes },
    async (span) => {
      const record = new ToolCallRecord(span);
      try {
        return await body(record);
      } catch (error) {
        if (record.outcome === null) {
          if (isAbort(error)) {
            record.cancelled(); // the harness stopped it; the tool did not fail
          } else {
            const message = describeError(error);
            record.failed(message, { errorType: errorTypeOf(error) });
            // An exception event without the stack (file paths), its message redacted.
            record.noteException(errorName(error), message);
          }
        }
        throw error;
      } finally {
        span.end();
      }
    },
  );
}

export function describeError(error: unknown): string {
  return error instanceof Error ? `${error.name}: ${error.message}` : String(error);
}

/**
 * A JSON-RPC code as text when the error carries one (the MCP SDK's `McpError`:
 * mcp-breaker classes calls by it), else the error's name.
 */
export function errorTypeOf(error: unknown): string {
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code === "number" && Number.isInteger(code)) return String(code);
  return errorName(error);
}

function errorName(error: unknown): string {
  return error instanceof Error ? error.name : typeof error;
}

function isAbort(error: unknown): boolean {
  return error instanceof Error && error.name === "AbortError";
}
