// AI SDK 6 capture client, run by tests/live/client_vercel_ai6.py (which passes the
// scenario as JSON in MCP_BREAKER_SCENARIO): generateText with experimental_telemetry on,
// tools from @ai-sdk/mcp's client over stdio, and the SDK's own MockLanguageModelV3
// scripted to call PLAN[n] in step n, then answer FINAL_TEXT (../vercel_common.mjs).
import { createMCPClient } from '@ai-sdk/mcp';
import { Experimental_StdioMCPTransport } from '@ai-sdk/mcp/mcp-stdio';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-grpc';
import { resourceFromAttributes } from '@opentelemetry/resources';
import {
  BatchSpanProcessor,
  NodeTracerProvider,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-node';
import { generateText, stepCountIs } from 'ai';
import { MockLanguageModelV3 } from 'ai/test';

import { PROMPT, readRun, scriptedModel, startTracing, writeResult } from '../vercel_common.mjs';

const { args, scenario } = readRun();
const otel = {
  BatchSpanProcessor,
  NodeTracerProvider,
  OTLPTraceExporter,
  SimpleSpanProcessor,
  resourceFromAttributes,
};
const { provider, traceIds } = startTracing(otel, 'vercel-ai6-client', args);

const mcpClient = await createMCPClient({
  transport: new Experimental_StdioMCPTransport({
    command: scenario.server.command,
    args: scenario.server.args,
  }),
});
let result;
try {
  result = await generateText({
    model: scriptedModel(MockLanguageModelV3, scenario),
    tools: await mcpClient.tools(),
    prompt: PROMPT,
    stopWhen: stepCountIs(scenario.plan.length + 4),
    experimental_telemetry: { isEnabled: true },
  });
} finally {
  await mcpClient.close();
}
await provider.shutdown();

writeResult(args, {
  framework: 'vercel_ai6',
  traceIds,
  result,
  packages: [
    'ai',
    '@ai-sdk/mcp',
    '@opentelemetry/sdk-trace-node',
    '@opentelemetry/exporter-trace-otlp-grpc',
  ],
  projectUrl: import.meta.url,
});
