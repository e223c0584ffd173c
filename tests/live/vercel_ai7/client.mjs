// AI SDK 7 capture client, run by tests/live/client_vercel_ai7.py (which passes the
// scenario as JSON in MCP_BREAKER_SCENARIO): generateText with @ai-sdk/otel's OpenTelemetry
// integration registered (telemetry is on by default in v7; LegacyOpenTelemetry with
// MCP_BREAKER_VARIANT=legacy), tools from @ai-sdk/mcp's client over stdio, and the SDK's own
// MockLanguageModelV4 scripted to call PLAN[n] in step n, then answer FINAL_TEXT (../vercel_common.mjs).
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

import { PROMPT, readRun, scriptedModel, startTracing, writeResult } from '../vercel_common.mjs';

const { args, scenario } = readRun();
const otel = {
  BatchSpanProcessor,
  NodeTracerProvider,
  OTLPTraceExporter,
  SimpleSpanProcessor,
  resourceFromAttributes,
};
const { provider, traceIds } = startTracing(otel, 'vercel-ai7-client', args);
// The docs' set-up, once at start-up. MCP_BREAKER_VARIANT=legacy registers the integration
// that keeps AI SDK 6's ai.* span names and attributes instead.
const legacy = process.env.MCP_BREAKER_VARIANT === 'legacy';
registerTelemetry(legacy ? new LegacyOpenTelemetry() : new OpenTelemetry());

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
    model: scriptedModel(MockLanguageModelV4, scenario),
    tools: await mcpClient.tools(),
    prompt: PROMPT,
    stopWhen: isStepCount(scenario.plan.length + 4),
  });
} finally {
  await mcpClient.close();
}
await provider.shutdown();

writeResult(args, {
  framework: legacy ? 'vercel_ai7-legacy' : 'vercel_ai7',
  traceIds,
  result,
  packages: [
    'ai',
    '@ai-sdk/mcp',
    '@ai-sdk/otel',
    '@opentelemetry/sdk-trace-node',
    '@opentelemetry/exporter-trace-otlp-grpc',
  ],
  projectUrl: import.meta.url,
});
