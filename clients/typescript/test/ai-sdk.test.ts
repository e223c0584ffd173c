/**
 * `breakerTools` on the real Vercel AI SDK: `generateText` with the SDK's own
 * `MockLanguageModelV3` scripted to call the tools, which come from the real `@ai-sdk/mcp`
 * client over stdio against the repository's Python MCP server
 * (`tests/live/server_frameworks.py`, run by the repository's venv). The advisories come
 * from a stand-in source, as in mcp.test.ts.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { before, describe, test } from "node:test";

import { createMCPClient } from "@ai-sdk/mcp";
import { Experimental_StdioMCPTransport } from "@ai-sdk/mcp/mcp-stdio";
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
} from "@opentelemetry/sdk-trace-base";
import { generateText, stepCountIs } from "ai";
import { MockLanguageModelV3 } from "ai/test";

import { type Advisory, CheckResult, Decision, type ToolCall } from "@mcp-breaker/client";
import { breakerTools } from "@mcp-breaker/client/ai-sdk";
import { type AdvisorySource, LOCAL_ID_PREFIX } from "@mcp-breaker/client/mcp";
import { PYTHON, REPO_ROOT } from "./support/paths.js";

const SERVER = "billing"; // the server's own name (tests/live/frameworks_common.py)
const SERVER_SCRIPT = join(REPO_ROOT, "tests", "live", "server_frameworks.py");
const WEATHER = "Sunny in Paris, 21 C";
const REFUSED = "Connection refused"; // what fetch_invoice's backend does
const FINAL = "Paris is sunny; the invoice could not be fetched.";
const OUT_MESSAGE =
  "`fetch_invoice` is unavailable: the billing backend refuses connections " +
  "(Connection refused). Do not call it again; answer what you can without it.";

function advisory(fields: Partial<Advisory> = {}): Advisory {
  return {
    id: "tool:billing/fetch_invoice", scope: "SCOPE_TOOL", key: "tool:billing/fetch_invoice",
    state: "STATE_OPEN", server: SERVER, tool: "fetch_invoice", turn: "", fingerprint: "",
    cause: "transport", retryAfterSeconds: 30, expiresUnixNano: 0n, message: OUT_MESSAGE,
    evidence: null, enforced: true, tenant: "", harness: "tests", ...fields,
  }; // prettier-ignore
}

/** Says the tools in `out` are out, allows the rest; remembers what it was asked. */
class Source implements AdvisorySource {
  readonly asked: ToolCall[] = [];
  constructor(private readonly out: ReadonlySet<string> = new Set()) {}
  check(call: ToolCall): CheckResult {
    this.asked.push(call);
    return this.out.has(call.tool)
      ? new CheckResult(Decision.DENY, { advisory: advisory({ tool: call.tool }) })
      : new CheckResult(Decision.ALLOW);
  }
  async checkRemote(): Promise<CheckResult> {
    return new CheckResult(Decision.ALLOW);
  }
  rosterCollapse(): Advisory | null {
    return null;
  }
}

type Plan = ReadonlyArray<readonly [string, Record<string, unknown>]>;

const usage = {
  inputTokens: { total: 10, noCache: 10, cacheRead: undefined, cacheWrite: undefined },
  outputTokens: { total: 5, text: 5, reasoning: undefined },
};

/** The SDK's mock model: `plan[n]` as the tool call of step n, then `FINAL` in text. */
function scriptedModel(plan: Plan) {
  const prompts: unknown[] = []; // what the model was sent at each step
  let step = 0;
  const model = new MockLanguageModelV3({
    modelId: "scripted-plan",
    doGenerate: async (options) => {
      prompts.push(options.prompt);
      const n = step++;
      const planned = plan[n];
      if (planned !== undefined) {
        const [toolName, input] = planned;
        const toolCallId = `call_${n}`;
        return {
          content: [{ type: "tool-call", toolCallId, toolName, input: JSON.stringify(input) }],
          finishReason: { unified: "tool-calls", raw: "tool_calls" },
          usage,
          warnings: [],
        };
      }
      return {
        content: [{ type: "text", text: FINAL }],
        finishReason: { unified: "stop", raw: "stop" },
        usage,
        warnings: [],
      };
    },
  });
  return { model, prompts, round: () => step }; // a call runs in the round that asked for it
}

/** The text blocks of an MCP tool result, as the model reads them. */
function textOf(output: unknown): string {
  const content = (output as { content?: Array<{ type: string; text?: string }> }).content;
  assert.ok(Array.isArray(content), `not an MCP tool result: ${JSON.stringify(output)}`);
  return content.flatMap((block) => (block.type === "text" ? [block.text ?? ""] : [])).join("\n");
}

/** One generateText turn over the real MCP client, its tools behind breakerTools. */
async function runTurn(plan: Plan, source: Source | null) {
  const exporter = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  const mcpClient = await createMCPClient({
    transport: new Experimental_StdioMCPTransport({ command: PYTHON, args: [SERVER_SCRIPT] }),
  });
  const executed: string[] = []; // what reached the MCP tools' own execute
  try {
    const original = await mcpClient.tools();
    const counted = Object.fromEntries(
      Object.entries(original).map(([name, tool]) => {
        const execute = tool.execute!;
        return [
          name,
          {
            ...tool,
            execute: (input: unknown, options: Parameters<typeof execute>[1]) => {
              executed.push(name);
              return execute(input, options);
            },
          },
        ];
      }),
    ) as typeof original;
    const { model, prompts, round } = scriptedModel(plan);
    const tools = breakerTools(counted, source, {
      server: SERVER,
      tracer: provider.getTracer("tests"),
      turn: () => ({ turnId: "turn-1", round: round() }),
    });
    assert.deepEqual(Object.keys(tools).sort(), Object.keys(original).sort()); // all still offered
    const result = await generateText({
      model,
      tools,
      prompt: "Check the weather in Paris and fetch invoice INV-1.",
      stopWhen: stepCountIs(plan.length + 2),
    });
    await provider.forceFlush();
    const spans = exporter.getFinishedSpans().filter((span) => span.name === "mcp.tool.call");
    const toolResults = result.steps.flatMap((step) => step.toolResults);
    return { result, toolResults, executed, prompts, spans };
  } finally {
    await mcpClient.close();
    await provider.shutdown();
  }
}

describe("breakerTools with the AI SDK's generateText and @ai-sdk/mcp", () => {
  before(() => {
    // The server needs the Python MCP SDK: the repository's venv has it. Not found: fail.
    if (!existsSync(PYTHON)) {
      throw new Error(
        `${PYTHON} is missing: the AI SDK tests run tests/live/server_frameworks.py with the ` +
          "repository's venv; run scripts/test-typescript (or ./scripts/test) from the " +
          "repository root first",
      );
    }
    const probe = spawnSync(PYTHON, ["-c", "import mcp.server"], { encoding: "utf8" });
    if (probe.status !== 0) {
      throw new Error(
        `${PYTHON} cannot import the mcp package, which tests/live/server_frameworks.py ` +
          `needs: ${probe.stderr || probe.error?.message}`,
      );
    }
  });

  test("a tool that is out: the model gets the advisory, the tool is not called; the rest work", async () => {
    const source = new Source(new Set(["fetch_invoice"]));
    const { result, toolResults, executed, prompts, spans } = await runTurn(
      [
        ["fetch_invoice", { invoice_id: "INV-1" }],
        ["get_weather", { city: "Paris" }],
      ],
      source,
    );
    assert.equal(result.text, FINAL);
    assert.deepEqual(executed, ["get_weather"]); // fetch_invoice's execute never ran

    const [refused, weather] = toolResults;
    assert.equal(toolResults.length, 2);
    assert.equal(refused?.toolName, "fetch_invoice");
    assert.deepEqual(refused?.output, {
      isError: true,
      content: [{ type: "text", text: OUT_MESSAGE }],
    });
    assert.equal(weather?.toolName, "get_weather");
    assert.equal(textOf(weather?.output), WEATHER);
    assert.notEqual((weather?.output as { isError?: boolean }).isError, true);
    // What the model was sent next: the advisory's message as fetch_invoice's result.
    assert.ok(JSON.stringify(prompts[1]).includes(JSON.stringify(OUT_MESSAGE).slice(1, -1)));

    assert.deepEqual(
      source.asked.map(({ turn, server, tool, arguments: args }) => [turn, server, tool, args]),
      [
        ["turn-1", SERVER, "fetch_invoice", { invoice_id: "INV-1" }],
        ["turn-1", SERVER, "get_weather", { city: "Paris" }],
      ],
    );
    assert.deepEqual(
      spans.map((span) => [
        span.attributes["mcp.tool.name"],
        span.attributes["mcp.tool.outcome"],
        span.attributes["mcp.breaker.refused"],
        span.attributes["mcp.turn.id"],
        span.attributes["mcp.turn.round"],
        span.attributes["mcp.server.name"],
      ]),
      [
        ["fetch_invoice", "cancelled", true, "turn-1", 1, SERVER],
        ["get_weather", "ok", undefined, "turn-1", 2, SERVER],
      ],
    );
  });

  test("nothing out: the failing call is made and recorded failed; its repeat is refused", async () => {
    const { result, toolResults, executed, spans } = await runTurn(
      [
        ["fetch_invoice", { invoice_id: "INV-1" }],
        ["fetch_invoice", { invoice_id: "INV-2" }], // a transport failure closed the tool
        ["get_weather", { city: "Paris" }],
      ],
      new Source(),
    );
    assert.equal(result.text, FINAL);
    assert.deepEqual(executed, ["fetch_invoice", "get_weather"]);

    const [failed, repeat, weather] = toolResults;
    assert.equal(failed?.toolName, "fetch_invoice");
    assert.equal((failed?.output as { isError?: boolean }).isError, true);
    assert.match(textOf(failed?.output), new RegExp(REFUSED));
    assert.equal((repeat?.output as { isError?: boolean }).isError, true);
    assert.match(textOf(repeat?.output), /^`fetch_invoice` on MCP server `billing` is unavailable/);
    assert.equal(textOf(weather?.output), WEATHER);

    const [failedSpan, repeatSpan, weatherSpan] = spans;
    assert.equal(spans.length, 3);
    assert.equal(failedSpan?.attributes["mcp.tool.outcome"], "failed");
    assert.match(String(failedSpan?.attributes["mcp.tool.error"]), new RegExp(REFUSED));
    assert.equal(repeatSpan?.attributes["mcp.tool.outcome"], "cancelled");
    assert.equal(repeatSpan?.attributes["mcp.breaker.refused"], true);
    assert.ok(String(repeatSpan?.attributes["mcp.breaker.advisory"]).startsWith(LOCAL_ID_PREFIX));
    assert.equal(weatherSpan?.attributes["mcp.tool.outcome"], "ok");
  });
});

describe("breakerTools", () => {
  test("a thrown error is recorded and thrown on; tools without execute pass as they are", async () => {
    const exporter = new InMemorySpanExporter();
    const provider = new BasicTracerProvider({
      spanProcessors: [new SimpleSpanProcessor(exporter)],
    });
    const provided = { description: "runs at the provider" };
    const tools = breakerTools(
      {
        boom: {
          execute: async (_input: { id: string }, _options: unknown): Promise<never> => {
            throw new Error("socket hang up");
          },
        },
        provided,
      },
      new Source(),
      { server: SERVER, tracer: provider.getTracer("tests"), turn: "turn-2" },
    );
    assert.equal(tools.provided, provided);
    await assert.rejects(
      tools.boom.execute({ id: "x" }, { toolCallId: "c1", messages: [] }),
      /socket hang up/,
    );
    await provider.forceFlush();
    const [span] = exporter.getFinishedSpans();
    assert.equal(span?.attributes["mcp.tool.outcome"], "failed");
    assert.equal(span?.attributes["mcp.turn.id"], "turn-2");
    assert.match(String(span?.attributes["mcp.tool.error"]), /socket hang up/);
    await provider.shutdown();
  });
});
