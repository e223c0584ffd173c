// AI SDK 7 capture client, run by tests/live/client_vercel_ai7.py (which passes the
// scenario as JSON in MCP_BREAKER_SCENARIO): generateText with @ai-sdk/otel's OpenTelemetry
// integration registered (telemetry is on by default in v7; LegacyOpenTelemetry with
// MCP_BREAKER_VARIANT=legacy), tools from @ai-sdk/mcp's client over stdio, and the SDK's own
// MockLanguageModelV4 scripted to call PLAN[n] in step n, then answer FINAL_TEXT.
import { readFileSync, writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';

import { createMCPClient } from '@ai-sdk/mcp';
import { LegacyOpenTelemetry, OpenTelemetry } from '@ai-sdk/otel';
import { Experimental_StdioMCPTransport } from '@ai-sdk/mcp/mcp-stdio';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-grpc';
import { resourceFromAttributes } from '@opentelemetry/resources';
import {
  BatchSpanProcessor,
  NodeTracerProvider,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-node';
import { generateText, isStepCount, registerTelemetry } from 'ai';
import { MockLanguageModelV4 } from 'ai/test';

const { values: args } = parseArgs({
  options: {
    endpoint: { type: 'string' },
    out: { type: 'string' },
    simple: { type: 'boolean', default: false },
  },
});
const scenario = JSON.parse(process.env.MCP_BREAKER_SCENARIO);

// The trace ids of the root spans (the generateText runs), for result.json.
const traceIds = new Set();
const rootRecorder = {
  onStart(span) {
    if (!span.parentSpanContext) traceIds.add(span.spanContext().traceId);
  },
  onEnd() {},
  forceFlush: async () => {},
  shutdown: async () => {},
};
const spanProcessors = [rootRecorder];
if (args.endpoint !== 'none') {
  const exporter = new OTLPTraceExporter({ url: `http://${args.endpoint}` });
  spanProcessors.push(
    args.simple ? new SimpleSpanProcessor(exporter) : new BatchSpanProcessor(exporter),
  );
}
const provider = new NodeTracerProvider({
  resource: resourceFromAttributes({ 'service.name': 'vercel-ai7-client' }),
  spanProcessors,
});
provider.register(); // the global tracer provider, which @ai-sdk/otel uses
// The docs' set-up, once at start-up. MCP_BREAKER_VARIANT=legacy registers the integration
// that keeps AI SDK 6's ai.* span names and attributes instead.
const legacy = process.env.MCP_BREAKER_VARIANT === 'legacy';
registerTelemetry(legacy ? new LegacyOpenTelemetry() : new OpenTelemetry());

const usage = {
  inputTokens: { total: 10, noCache: 10, cacheRead: undefined, cacheWrite: undefined },
  outputTokens: { total: 5, text: 5, reasoning: undefined },
};
let step = 0;
const model = new MockLanguageModelV4({
  modelId: 'scripted-plan',
  doGenerate: async () => {
    const n = step++;
    if (n < scenario.plan.length) {
      const [toolName, input] = scenario.plan[n];
      return {
        content: [
          { type: 'tool-call', toolCallId: `call_${n}`, toolName, input: JSON.stringify(input) },
        ],
        finishReason: { unified: 'tool-calls', raw: 'tool_calls' },
        usage,
        warnings: [],
      };
    }
    return {
      content: [{ type: 'text', text: scenario.final }],
      finishReason: { unified: 'stop', raw: 'stop' },
      usage,
      warnings: [],
    };
  },
});

const transport = new Experimental_StdioMCPTransport({
  command: scenario.server.command,
  args: scenario.server.args,
});
// @ai-sdk/mcp 2.x probes with server/discover and gives a stdio server 1 s to answer before
// it falls back to initialize; the Python server takes about that long to start, and then
// rejects the initialize on a connection it already serves as 2026-07-28. Wait for the answer
// (MCPTransport.waitsForProtocolVersionDiscovery) so the run keeps the modern protocol.
transport.waitsForProtocolVersionDiscovery = true;
const mcpClient = await createMCPClient({ transport });
let result;
try {
  result = await generateText({
    model,
    tools: await mcpClient.tools(),
    prompt: 'Check the weather in Paris, invoice INV-1 and order A-1.',
    stopWhen: isStepCount(scenario.plan.length + 4),
  });
} finally {
  await mcpClient.close();
}
await provider.shutdown();

// What each tool call handed back to the model: the tool-result / tool-error parts.
// An MCP tool's output is its CallToolResult: keep the text of its content and its isError.
const text = (output) =>
  Array.isArray(output?.content)
    ? output.content.map((c) => c.text ?? JSON.stringify(c)).join(' ')
    : JSON.stringify(output);
const calls = result.steps
  .flatMap((s) => s.content)
  .filter((part) => part.type === 'tool-result' || part.type === 'tool-error')
  .map((part) => ({
    tool: part.toolName,
    arguments: part.input,
    tool_call_id: part.toolCallId,
    part: part.type,
    is_error: part.type === 'tool-error' ? null : (part.output?.isError ?? null),
    text: (part.type === 'tool-error' ? String(part.error) : text(part.output)).slice(0, 300),
  }));
const PACKAGES = [
  'ai',
  '@ai-sdk/mcp',
  '@ai-sdk/otel',
  '@opentelemetry/sdk-trace-node',
  '@opentelemetry/exporter-trace-otlp-grpc',
];
const version = (name) =>
  JSON.parse(readFileSync(new URL(`./node_modules/${name}/package.json`, import.meta.url))).version;
const result_ = {
  framework: legacy ? 'vercel_ai7-legacy' : 'vercel_ai7',
  trace_ids: [...traceIds],
  calls,
  final: result.text.trim(),
  versions: Object.fromEntries(PACKAGES.map((name) => [name, version(name)])),
};
writeFileSync(args.out, JSON.stringify(result_, null, 2));
