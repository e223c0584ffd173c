/**
 * A harness as a TypeScript harness author sets one up: the OpenTelemetry JS SDK, the
 * OTLP/gRPC exporter to mcp-breaker, and this package's PromptToolSpanProcessor.
 */
import type { Tracer } from "@opentelemetry/api";
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-grpc";
import { resourceFromAttributes } from "@opentelemetry/resources";
import { BasicTracerProvider } from "@opentelemetry/sdk-trace-base";

import { PromptToolSpanProcessor, recordToolCall } from "@mcp-breaker/client/tracing";

export const SERVER = "playwright";
export const TOOL = "browser_navigate";
export const ARGUMENTS = { url: "https://artifacts.example.test/run/1" };
export const CLOSED_UPSTREAM =
  "upstream MCP session is closed (connect 127.0.0.1:9: connection refused)";

export class Harness {
  readonly provider: BasicTracerProvider;
  readonly processor: PromptToolSpanProcessor;
  readonly tracer: Tracer;

  constructor(otlpUrl: string, name: string, tenant = "") {
    this.processor = new PromptToolSpanProcessor(new OTLPTraceExporter({ url: otlpUrl }));
    this.provider = new BasicTracerProvider({
      resource: resourceFromAttributes({
        "service.name": name,
        ...(tenant ? { "tenant.id": tenant } : {}),
      }),
      spanProcessors: [this.processor],
    });
    this.tracer = this.provider.getTracer(name);
  }

  /** One failed browser_navigate per turn, as the harness records it; sent at once. */
  async fail(...turns: string[]): Promise<void> {
    for (const turn of turns) {
      await recordToolCall(
        this.tracer,
        { tool: TOOL, server: SERVER, turnId: turn, round: 1, arguments: ARGUMENTS },
        (call) => call.failed(CLOSED_UPSTREAM, { isError: true }),
      );
    }
  }

  async shutdown(): Promise<void> {
    await this.provider.shutdown();
  }
}
