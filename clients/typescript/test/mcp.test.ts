/**
 * `wrapClient` on the real MCP TypeScript SDK, client and server in this process over the
 * SDK's in-memory transport; the advisories come from a stand-in source, so each verdict
 * (deny, probe, shadow) is played exactly. The run against the real service is e2e.test.ts.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
} from "@opentelemetry/sdk-trace-base";
import { z } from "zod";

import { type Advisory, CheckResult, Decision, type ToolCall } from "@mcp-breaker/client";
import { type AdvisorySource, resultText, wrapClient } from "@mcp-breaker/client/mcp";

const SERVER = "playwright";

function advisory(fields: Partial<Advisory> = {}): Advisory {
  return {
    id: "turn_tool:turn-1:playwright/browser_navigate", scope: "SCOPE_TURN_TOOL", key: "",
    state: "STATE_TURN_BLOCKED", server: SERVER, tool: "browser_navigate", turn: "turn-1",
    fingerprint: "", cause: "transport", retryAfterSeconds: 0, expiresUnixNano: 0n,
    message: "`browser_navigate` is unavailable for the rest of this turn: upstream MCP session is closed.",
    evidence: null, enforced: true, tenant: "", harness: "tests", ...fields,
  }; // prettier-ignore
}

/** Answers as told, and remembers what it was asked. */
class Source implements AdvisorySource {
  local = new CheckResult(Decision.ALLOW);
  remote = new CheckResult(Decision.ALLOW);
  readonly asked: ToolCall[] = [];
  readonly askedRemote: ToolCall[] = [];
  check(call: ToolCall): CheckResult {
    this.asked.push(call);
    return this.local;
  }
  async checkRemote(call: ToolCall): Promise<CheckResult> {
    this.askedRemote.push(call);
    return this.remote;
  }
  rosterCollapse(turn: string): Advisory | null {
    return turn === "collapsed"
      ? advisory({ scope: "SCOPE_TURN_ROSTER", state: "STATE_ROSTER_COLLAPSED" })
      : null;
  }
}

async function setUp(source: Source | null) {
  let reached = 0;
  const server = new McpServer({ name: "tools", version: "1.0.0" });
  server.registerTool("browser_navigate", { inputSchema: { url: z.string() } }, async ({ url }) => {
    reached++;
    return url === "fail"
      ? { content: [{ type: "text", text: "upstream MCP session is closed" }], isError: true }
      : { content: [{ type: "text", text: `navigated to ${url}` }] };
  });
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  await server.connect(serverSide);
  const client = new Client({ name: "tests", version: "1.0.0" });
  await client.connect(clientSide);
  const exporter = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  const tools = wrapClient(client, {
    advisories: source,
    tracer: provider.getTracer("tests"),
    serverName: SERVER,
  });
  tools.setTurn("turn-1", 3);
  const call = async (url: string) =>
    (await tools.callTool({ name: "browser_navigate", arguments: { url } })) as CallToolResult;
  const spans = async () => {
    await provider.forceFlush();
    return exporter.getFinishedSpans();
  };
  const close = async () => {
    await client.close();
    await provider.shutdown();
  };
  return { client, tools, call, spans, close, reached: () => reached };
}

describe("wrapClient", () => {
  test("a refused call never reaches the tool; the model reads why; the tool stays listed", async () => {
    const source = new Source();
    source.local = new CheckResult(Decision.DENY, { advisory: advisory() });
    const { tools, call, spans, close, reached } = await setUp(source);
    const result = await call("https://example.test");
    assert.equal(reached(), 0);
    assert.equal(result.isError, true);
    assert.equal(resultText(result), advisory().message);
    assert.deepEqual(
      (await tools.listTools()).tools.map((tool) => tool.name),
      ["browser_navigate"],
    );
    assert.deepEqual(source.asked[0], {
      turn: "turn-1",
      server: SERVER,
      tool: "browser_navigate",
      arguments: { url: "https://example.test" },
    });
    const [span] = await spans();
    assert.equal(span?.attributes["mcp.tool.outcome"], "cancelled");
    assert.equal(span?.attributes["mcp.breaker.refused"], true);
    assert.equal(span?.attributes["mcp.turn.round"], 3);
    await close();
  });

  test("an advisory without a message still tells the model what is out", async () => {
    const source = new Source();
    source.local = new CheckResult(Decision.DENY, { advisory: advisory({ message: "" }) });
    const { call, close } = await setUp(source);
    assert.match(
      resultText(await call("x")),
      /`browser_navigate` is unavailable right now: transport\./,
    );
    await close();
  });

  test("half-open: the permit holder makes the call; any other asker is refused", async () => {
    const source = new Source();
    source.local = new CheckResult(Decision.PROBE_NEEDED, {
      advisory: advisory({ state: "STATE_HALF_OPEN" }),
    });
    source.remote = new CheckResult(Decision.PROBE, { advisory: advisory(), probePermit: 17 });
    const { call, spans, close, reached } = await setUp(source);
    assert.equal((await call("https://example.test")).isError, undefined);
    assert.equal(reached(), 1);
    assert.equal(source.askedRemote.length, 1);
    assert.equal((await spans())[0]?.attributes["mcp.breaker.probe_permit"], 17);

    source.remote = new CheckResult(Decision.DENY, {
      advisory: advisory({ message: "being tested" }),
    });
    assert.equal(resultText(await call("https://example.test")), "being tested");
    assert.equal(reached(), 1);
    await close();
  });

  test("shadow mode makes the call and notes the advisory that would have refused it", async () => {
    const source = new Source();
    source.local = new CheckResult(Decision.ALLOW, { advisory: advisory({ enforced: false }) });
    const { call, spans, close, reached } = await setUp(source);
    await call("https://example.test");
    assert.equal(reached(), 1);
    const [span] = await spans();
    assert.equal(span?.attributes["mcp.breaker.shadow_advisory"], advisory().id);
    assert.equal(span?.attributes["mcp.tool.outcome"], "ok");
    await close();
  });

  test("a result with isError is recorded as failed with its text", async () => {
    const { call, spans, close } = await setUp(new Source());
    assert.equal((await call("fail")).isError, true);
    const [span] = await spans();
    assert.equal(span?.attributes["mcp.tool.outcome"], "failed");
    assert.equal(span?.attributes["mcp.tool.error"], "upstream MCP session is closed");
    await close();
  });

  test("without advisories it only records; the rest of the client is its own", async () => {
    const { client, tools, call, spans, close, reached } = await setUp(null);
    await call("https://example.test");
    assert.equal(reached(), 1);
    assert.equal((await spans()).length, 1);
    assert.ok(tools instanceof Client);
    assert.equal(tools.unwrapped, client);
    assert.deepEqual(tools.getServerVersion(), { name: "tools", version: "1.0.0" });
    assert.equal(tools.rosterCollapse(), null);
    await close();
  });

  test("a roster collapse of the current turn is passed on", async () => {
    const { tools, close } = await setUp(new Source());
    tools.setTurn("collapsed", 9);
    assert.equal(tools.rosterCollapse()?.state, "STATE_ROSTER_COLLAPSED");
    assert.equal(tools.turnId, "collapsed");
    assert.equal(tools.round, 9);
    await close();
  });
});
