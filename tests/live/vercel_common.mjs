// What the AI SDK 6 and 7 capture clients (vercel_ai6/client.mjs, vercel_ai7/client.mjs)
// share: the run's arguments and scenario, the exporting tracer provider, the scripted mock
// model and the result.json. It imports only node's own modules: each client hands it the
// classes of its own pinned packages (one npm project per major version).
import { readFileSync, writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';

export const PROMPT = 'Check the weather in Paris, invoice INV-1 and order A-1.';

/** The command line (--endpoint, --out, --simple) and the scenario client_vercel_ai*.py passes. */
export function readRun() {
  const { values: args } = parseArgs({
    options: {
      endpoint: { type: 'string' },
      out: { type: 'string' },
      simple: { type: 'boolean', default: false },
    },
  });
  return { args, scenario: JSON.parse(process.env.MCP_BREAKER_SCENARIO) };
}

/**
 * A NodeTracerProvider exporting over OTLP/gRPC to --endpoint (batched, or span by span with
 * --simple), registered as the global one, and the trace ids of the root spans it started.
 */
export function startTracing(otel, serviceName, args) {
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
    const exporter = new otel.OTLPTraceExporter({ url: `http://${args.endpoint}` });
    spanProcessors.push(
      args.simple ? new otel.SimpleSpanProcessor(exporter) : new otel.BatchSpanProcessor(exporter),
    );
  }
  const provider = new otel.NodeTracerProvider({
    resource: otel.resourceFromAttributes({ 'service.name': serviceName }),
    spanProcessors,
  });
  provider.register(); // the global tracer provider, which the AI SDK's telemetry uses
  return { provider, traceIds };
}

/** The SDK's own mock model (``MockModel``), calling PLAN[n] in step n, then answering. */
export function scriptedModel(MockModel, scenario) {
  const usage = {
    inputTokens: { total: 10, noCache: 10, cacheRead: undefined, cacheWrite: undefined },
    outputTokens: { total: 5, text: 5, reasoning: undefined },
  };
  let step = 0;
  return new MockModel({
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
}

/**
 * result.json: what each tool call handed back to the model (the tool-result / tool-error
 * parts; an MCP tool's output is its CallToolResult: the text of its content and its
 * isError), the final text, and the versions of ``packages`` in the client's node_modules.
 */
export function writeResult(args, { framework, traceIds, result, packages, projectUrl }) {
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
  const version = (name) =>
    JSON.parse(readFileSync(new URL(`./node_modules/${name}/package.json`, projectUrl))).version;
  const written = {
    framework,
    trace_ids: [...traceIds],
    calls,
    final: result.text.trim(),
    versions: Object.fromEntries(packages.map((name) => [name, version(name)])),
  };
  writeFileSync(args.out, JSON.stringify(written, null, 2));
}
