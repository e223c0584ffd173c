/**
 * The span processor and the `mcp.tool.call` record, on the real OpenTelemetry JS SDK
 * (its in-memory exporter stands for the OTLP one; the tests against the service send
 * through the real OTLP/gRPC exporter).
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";

import { type ExportResult, ExportResultCode } from "@opentelemetry/core";
import {
  BasicTracerProvider,
  BatchSpanProcessor,
  InMemorySpanExporter,
  type ReadableSpan,
  type SpanExporter,
} from "@opentelemetry/sdk-trace-base";
import { SpanStatusCode } from "@opentelemetry/api";

import { type Advisory, argumentsDigest } from "@mcp-breaker/client";
import { isToolSpan, PromptToolSpanProcessor, recordToolCall } from "@mcp-breaker/client/tracing";

import { waitFor } from "./support/wait.js";

const ARGS = { url: "https://artifacts.example.test/run/1", query: "who is alice@example.com" };
const HOUR_MS = 3_600_000;

function setUp(exporter: SpanExporter = new InMemorySpanExporter(), options = {}) {
  // Other spans wait an hour in the batch processor: only a flush sends them.
  const batch = new BatchSpanProcessor(exporter, { scheduledDelayMillis: HOUR_MS });
  const processor = new PromptToolSpanProcessor(exporter, { batch, ...options });
  const provider = new BasicTracerProvider({ spanProcessors: [processor] });
  return { processor, provider, tracer: provider.getTracer("tests") };
}

/** An exporter whose exports wait until released, counting what it was given. */
class HeldExporter implements SpanExporter {
  readonly exported: ReadableSpan[][] = [];
  private readonly held: Array<() => void> = [];
  shutDown = false;

  export(spans: ReadableSpan[], done: (result: ExportResult) => void): void {
    this.exported.push(spans);
    this.held.push(() => done({ code: ExportResultCode.SUCCESS }));
  }

  release(): void {
    for (const finish of this.held.splice(0)) finish();
  }

  async shutdown(): Promise<void> {
    this.shutDown = true;
  }
}

describe("PromptToolSpanProcessor", () => {
  test("sends a tool span as it ends, and leaves other spans to the batch processor", async () => {
    const exporter = new InMemorySpanExporter();
    const { processor, provider, tracer } = setUp(exporter);
    tracer.startSpan("http GET /").end();
    await recordToolCall(tracer, { tool: "browser_navigate", server: "playwright" }, (call) =>
      call.ok(),
    );
    await waitFor(() => exporter.getFinishedSpans().length > 0, "the tool span");
    assert.deepEqual(
      exporter.getFinishedSpans().map((span) => span.name),
      ["mcp.tool.call"],
    );
    await waitFor(() => processor.stats.exported === 1, "the export's answer");
    await provider.forceFlush();
    assert.deepEqual(
      exporter
        .getFinishedSpans()
        .map((span) => span.name)
        .sort(),
      ["http GET /", "mcp.tool.call"],
    );
    await provider.shutdown();
  });

  test("one export in flight; what ends meanwhile goes in the next; a full queue drops and counts", async () => {
    const exporter = new HeldExporter();
    const { processor, provider, tracer } = setUp(exporter, { maxQueue: 2 });
    const end = (name: string) =>
      tracer.startSpan(name, { attributes: { "mcp.tool.name": name } }).end();
    end("first");
    await waitFor(() => exporter.exported.length === 1, "the first export");
    for (const name of ["second", "third", "fourth"]) end(name);
    assert.equal(processor.stats.dropped, 1); // the queue holds two while the first is out
    exporter.release();
    await waitFor(() => exporter.exported.length === 2, "the second export");
    assert.deepEqual(
      exporter.exported[1]?.map((span) => span.name),
      ["second", "third"],
    );
    const flushed = processor.forceFlush();
    exporter.release();
    await flushed;
    assert.equal(processor.stats.exported, 3);
    await provider.shutdown();
    assert.ok(exporter.shutDown, "with a batch processor of its own, it shuts its exporter down");
  });

  test("shutdown sends what is queued first, then shuts the exporter down", async () => {
    const exporter = new HeldExporter();
    const processor = new PromptToolSpanProcessor(exporter); // its batch processor owns the exporter
    const provider = new BasicTracerProvider({ spanProcessors: [processor] });
    const tracer = provider.getTracer("tests");
    tracer.startSpan("queued", { attributes: { "mcp.tool.name": "t" } }).end();
    let done = false;
    const stopping = provider.shutdown().then(() => (done = true));
    await waitFor(() => exporter.exported.length === 1, "the queued span's export");
    assert.ok(!done, "shutdown waits for the export in flight");
    exporter.release();
    await stopping;
    assert.equal(processor.stats.exported, 1);
    assert.ok(exporter.shutDown);
    tracer.startSpan("after", { attributes: { "mcp.tool.name": "t" } }).end();
    assert.equal(exporter.exported.length, 1, "nothing is taken after shutdown");
  });

  test("knows the tool spans of every dialect mcp-breaker reads", () => {
    const { provider, tracer } = setUp();
    const named = (name: string, attributes = {}) => {
      const span = tracer.startSpan(name, { attributes });
      span.end();
      return isToolSpan(span as unknown as ReadableSpan);
    };
    assert.ok(named("mcp.tool.call"));
    assert.ok(named("tools/call browser_navigate"));
    assert.ok(named("MCP send tools/call browser_navigate"));
    assert.ok(named("execute", { "mcp.method.name": "tools/call" }));
    assert.ok(named("anything", { "mcp.tool.name": "x" }));
    assert.ok(!named("tools/list"));
    assert.ok(!named("mcp.tools.list"));
    void provider.shutdown();
  });
});

describe("recordToolCall", () => {
  async function recorded(body: Parameters<typeof recordToolCall>[2], call = {}) {
    const exporter = new InMemorySpanExporter();
    const { provider, tracer } = setUp(exporter);
    const outcome = await recordToolCall(
      tracer,
      {
        tool: "browser_navigate",
        server: "playwright",
        turnId: "turn-1",
        round: 7,
        arguments: ARGS,
        ...call,
      },
      body,
    ).catch((error: unknown) => error);
    await provider.forceFlush();
    const [span] = exporter.getFinishedSpans();
    await provider.shutdown();
    assert.ok(span !== undefined);
    return { span, outcome };
  }

  test("writes the harness convention, and the arguments only as their digest", async () => {
    const { span } = await recorded((call) => call.ok());
    assert.equal(span.name, "mcp.tool.call");
    assert.deepEqual(span.attributes, {
      "mcp.tool.name": "browser_navigate",
      "mcp.server.name": "playwright",
      "mcp.turn.id": "turn-1",
      "mcp.turn.round": 7,
      "mcp.tool.args_hash": argumentsDigest(ARGS),
      "mcp.tool.outcome": "ok",
      "mcp.tool.is_error": false,
    });
    assert.ok(!JSON.stringify(span.attributes).includes("alice"));
  });

  test("a failure is recorded redacted, with an error status", async () => {
    const error =
      'upstream MCP session is closed (reconnect "http://u:hunter2@127.0.0.1:8931/mcp?token=abc")';
    const { span } = await recorded((call) => call.failed(error, { isError: true }));
    const recordedError = String(span.attributes["mcp.tool.error"]);
    assert.ok(recordedError.includes("upstream MCP session is closed"));
    assert.ok(!recordedError.includes("hunter2") && !recordedError.includes("abc"), recordedError);
    assert.equal(span.attributes["mcp.tool.outcome"], "failed");
    assert.equal(span.attributes["mcp.tool.is_error"], true);
    assert.equal(span.status.code, SpanStatusCode.ERROR);
  });

  test("an error thrown by the call is recorded as failed, with its JSON-RPC code, and thrown on", async () => {
    const thrown = Object.assign(
      new Error("MCP error -32602: Invalid params at /home/alice/x.ts"),
      {
        name: "McpError",
        code: -32602,
      },
    );
    const { span, outcome } = await recorded(() => {
      throw thrown;
    });
    assert.equal(outcome, thrown);
    assert.equal(span.attributes["mcp.tool.outcome"], "failed");
    assert.equal(span.attributes["error.type"], "-32602");
    const [event] = span.events;
    assert.equal(event?.name, "exception");
    assert.equal(event?.attributes?.["exception.type"], "McpError");
    assert.ok(!String(event?.attributes?.["exception.message"]).includes("alice"));
    assert.ok(!("exception.stacktrace" in (event?.attributes ?? {})));
  });

  test("an aborted call is cancelled, not failed", async () => {
    const { span } = await recorded(() => {
      throw new DOMException("the harness stopped", "AbortError");
    });
    assert.equal(span.attributes["mcp.tool.outcome"], "cancelled");
    assert.notEqual(span.status.code, SpanStatusCode.ERROR);
  });

  test("a refused call is cancelled and marked refused, with the advisory's id", async () => {
    const advisory = { id: "turn_tool:turn-1:playwright/browser_navigate" } as Advisory;
    const { span } = await recorded((call) => call.refused(advisory));
    assert.equal(span.attributes["mcp.tool.outcome"], "cancelled");
    assert.equal(span.attributes["mcp.breaker.refused"], true);
    assert.equal(span.attributes["mcp.breaker.advisory"], advisory.id);
  });

  test("a call that says nothing records no outcome: mcp-breaker never guesses", async () => {
    const { span } = await recorded(() => undefined, { arguments: undefined });
    assert.ok(!("mcp.tool.outcome" in span.attributes));
    assert.ok(!("mcp.tool.args_hash" in span.attributes));
  });
});
