/**
 * `wrapClient` on the real MCP TypeScript SDK, client and server in this process over the
 * SDK's in-memory transport; the advisories come from a stand-in source, so each verdict
 * (deny, probe, shadow) is played exactly. The run against the real service is e2e.test.ts.
 */
import assert from "node:assert/strict";
import { AsyncLocalStorage } from "node:async_hooks";
import { after, before, describe, test } from "node:test";

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { type Context, type ContextManager, context, ROOT_CONTEXT } from "@opentelemetry/api";
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
} from "@opentelemetry/sdk-trace-base";
import { z } from "zod";

import {
  type Advisory,
  CheckResult,
  callFingerprint,
  Decision,
  type Logger,
  redact,
  type ToolCall,
} from "@mcp-breaker/client";
import {
  type AdvisorySource,
  FailureNotes,
  LOCAL_ID_PREFIX,
  refusalResult,
  resultText,
  type TurnKey,
  turnBlockMessage,
  wrapClient,
} from "@mcp-breaker/client/mcp";
import { MAX_ERROR_CHARS, recordToolCall } from "@mcp-breaker/client/tracing";
import { PythonOracle } from "./support/python.js";

const redactedError = (text: string) => redact(text, MAX_ERROR_CHARS); // as a record writes it

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

const DEAD = "upstream MCP session is closed"; // a transport failure: the tool is out
const PICKY = "no results: the query language was not understood"; // a tool error: the call

interface SetUpOptions {
  setTurn?: boolean; // setTurn("turn-1", 3) before the calls (the default)
  turnKey?: TurnKey | null;
  logger?: Logger;
  parallel?: number; // `twin` answers once this many of its calls are in flight
}

async function setUp(source: Source | null, options: SetUpOptions = {}) {
  let reached = 0;
  const calls: string[] = [];
  const server = new McpServer({ name: "tools", version: "1.0.0" });
  server.registerTool("browser_navigate", { inputSchema: { url: z.string() } }, async ({ url }) => {
    reached++;
    calls.push(`browser_navigate ${url}`);
    return url === "fail"
      ? { content: [{ type: "text", text: DEAD }], isError: true }
      : { content: [{ type: "text", text: `navigated to ${url}` }] };
  });
  if (options.parallel !== undefined) {
    // Only where asked: the first test lists the tools.
    server.registerTool("search", { inputSchema: { query: z.string() } }, async ({ query }) => {
      calls.push(`search ${query}`);
      return query === "good"
        ? { content: [{ type: "text", text: "found" }] }
        : { content: [{ type: "text", text: PICKY }], isError: true };
    });
    server.registerTool("status", {}, async () => {
      calls.push("status");
      return { content: [{ type: "text", text: "quota exhausted for today" }], isError: true };
    });
    server.registerTool("ask", { inputSchema: { url: z.string() } }, async ({ url }) => {
      calls.push(`ask ${url}`);
      const text = "the user declined the permission prompt";
      return { content: [{ type: "text", text }], isError: true };
    });
    let arrived = 0;
    let allIn: () => void = () => {};
    const together = new Promise<void>((resolve) => (allIn = resolve));
    server.registerTool("twin", { inputSchema: { url: z.string() } }, async ({ url }) => {
      calls.push(`twin ${url}`);
      if (++arrived >= (options.parallel ?? 1)) allIn();
      await together;
      return { content: [{ type: "text", text: DEAD }], isError: true };
    });
  }
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  await server.connect(serverSide);
  const client = new Client({ name: "tests", version: "1.0.0" });
  await client.connect(clientSide);
  const exporter = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  const tracer = provider.getTracer("tests");
  const tools = wrapClient(client, {
    advisories: source,
    tracer,
    serverName: SERVER,
    ...(options.turnKey !== undefined ? { turnKey: options.turnKey } : {}),
    ...(options.logger !== undefined ? { logger: options.logger } : {}),
  });
  if (options.setTurn ?? true) tools.setTurn("turn-1", 3);
  const call = async (url: string) =>
    (await tools.callTool({ name: "browser_navigate", arguments: { url } })) as CallToolResult;
  const callOf = async (name: string, args?: Record<string, unknown>) =>
    (await tools.callTool(
      args === undefined ? { name } : { name, arguments: args },
    )) as CallToolResult;
  const spans = async () => {
    await provider.forceFlush();
    return exporter.getFinishedSpans();
  };
  const close = async () => {
    await client.close();
    await provider.shutdown();
  };
  return { client, tools, tracer, call, callOf, calls, spans, close, reached: () => reached };
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
      /^`browser_navigate` on MCP server `playwright` is unavailable right now, .*\(the error: transport\)\.$/,
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

/** Spans active across `await`, as the Node SDK's AsyncLocalStorageContextManager makes them. */
class AsyncLocalContextManager implements ContextManager {
  private readonly storage = new AsyncLocalStorage<Context>();
  active(): Context {
    return this.storage.getStore() ?? ROOT_CONTEXT;
  }
  with<A extends unknown[], F extends (...args: A) => ReturnType<F>>(
    active: Context,
    fn: F,
    thisArg?: ThisParameterType<F>,
    ...args: A
  ): ReturnType<F> {
    return this.storage.run(active, () => fn.apply(thisArg, args));
  }
  bind<T>(_active: Context, target: T): T {
    return target;
  }
  enable(): this {
    return this;
  }
  disable(): this {
    this.storage.disable();
    return this;
  }
}

const toolWideRefusal = (tool: string, why: string) =>
  `\`${tool}\` on MCP server \`${SERVER}\` is unavailable for the rest of this turn, so do ` +
  `not call it again; answer what you can without it (the error: ${why}).`;

describe("wrapClient: a repeat the mirror cannot know of yet", () => {
  // The source allows everything: the advisory is still on its way to the mirror.
  test("a dead session's tool is refused for the rest of the turn, whatever the arguments", async () => {
    const { call, callOf, calls, spans, close } = await setUp(new Source(), { parallel: 1 });
    assert.equal((await call("fail")).isError, true);
    const again = await call("fail");
    const other = await call("https://other.test");
    assert.equal((await callOf("search", { query: "good" })).isError, undefined);
    assert.deepEqual(calls, ["browser_navigate fail", "search good"]);
    assert.equal(again.isError, true);
    assert.equal(resultText(again), toolWideRefusal("browser_navigate", DEAD));
    assert.equal(resultText(other), resultText(again));
    const [first, second] = await spans();
    assert.equal(first?.attributes["mcp.tool.outcome"], "failed");
    assert.equal(second?.attributes["mcp.tool.outcome"], "cancelled");
    assert.equal(second?.attributes["mcp.breaker.refused"], true);
    assert.equal(
      second?.attributes["mcp.breaker.advisory"],
      `${LOCAL_ID_PREFIX}turn_tool|turn-1|${SERVER}/browser_navigate`,
    );
    await close();
  });

  test("another turn is not refused", async () => {
    const { tools, call, calls, close } = await setUp(new Source(), { parallel: 1 });
    await call("fail");
    tools.setTurn("turn-2", 1);
    await call("fail");
    assert.deepEqual(calls, ["browser_navigate fail", "browser_navigate fail"]);
    await close();
  });

  test("a tool error refuses only the identical call; a correction goes", async () => {
    const { callOf, calls, close } = await setUp(new Source(), { parallel: 1 });
    await callOf("search", { query: "bad" });
    const again = await callOf("search", { query: "bad" });
    assert.equal((await callOf("search", { query: "good" })).isError, undefined);
    assert.deepEqual(calls, ["search bad", "search good"]);
    assert.equal(
      resultText(again),
      `This exact call to \`search\` on MCP server \`${SERVER}\` already failed in this turn, ` +
        `so do not repeat it; change the arguments or answer without it (the error: ${PICKY}).`,
    );
    await close();
  });

  test("what the service would not block is not refused", async () => {
    // A user's "no" is neutral; a tool error without arguments has no fingerprint.
    const { callOf, calls, close } = await setUp(new Source(), { parallel: 1 });
    await callOf("ask", { url: "u" });
    await callOf("ask", { url: "u" });
    await callOf("status");
    await callOf("status");
    assert.deepEqual(calls, ["ask u", "ask u", "status", "status"]);
    await close();
  });

  test('turnKey "tool" blocks the tool after any failure; null blocks nothing', async () => {
    const byTool = await setUp(new Source(), { parallel: 1, turnKey: "tool" });
    await byTool.callOf("search", { query: "bad" });
    await byTool.callOf("search", { query: "good" });
    assert.deepEqual(byTool.calls, ["search bad"]);
    await byTool.close();
    const off = await setUp(new Source(), { parallel: 1, turnKey: null });
    await off.call("fail");
    await off.call("fail");
    assert.deepEqual(off.calls, ["browser_navigate fail", "browser_navigate fail"]);
    await off.close();
  });

  test("a thrown timeout closes the tool for the turn", async () => {
    const source = new Source();
    const provider = new BasicTracerProvider();
    let made = 0;
    const timingOut = {
      async callTool(): Promise<never> {
        made++;
        throw Object.assign(new Error("Request timed out"), { name: "McpError", code: -32001 });
      },
    };
    const tools = wrapClient(timingOut as unknown as Client, {
      advisories: source,
      tracer: provider.getTracer("tests"),
      serverName: SERVER,
    });
    tools.setTurn("turn-1");
    await assert.rejects(tools.callTool({ name: "browser_navigate", arguments: { url: "u" } }));
    const refused = (await tools.callTool({
      name: "browser_navigate",
      arguments: { url: "v" },
    })) as CallToolResult;
    assert.equal(made, 1);
    // The words are the service's (checked against its code below); here, what is out.
    assert.match(
      resultText(refused),
      /^`browser_navigate` on MCP server `playwright` is unavailable for the rest of this turn, .*Request timed out/,
    );
  });

  test("once the mirror has the advisory, the mirror answers", async () => {
    const source = new Source();
    const { call, calls, close } = await setUp(source, { parallel: 1 });
    await call("fail");
    assert.match(resultText(await call("fail")), /unavailable for the rest of this turn/);
    const serviceSays = advisory({
      id: "|turn_tool|turn-1|playwright/browser_navigate",
      message: "the service's own words",
    });
    source.local = new CheckResult(Decision.DENY, { advisory: serviceSays });
    assert.equal(resultText(await call("fail")), "the service's own words");
    // The service withdrew it (or sent it in shadow mode): the mirror's word stands.
    source.local = new CheckResult(Decision.ALLOW);
    assert.equal(resultText(await call("fail")), DEAD);
    assert.deepEqual(calls, ["browser_navigate fail", "browser_navigate fail"]);
    await close();
  });

  test("calls in flight together all go; the one after them is refused", async () => {
    const { callOf, calls, close } = await setUp(new Source(), { parallel: 2 });
    const both = await Promise.all([callOf("twin", { url: "u" }), callOf("twin", { url: "u" })]);
    assert.deepEqual(both.map(resultText), [DEAD, DEAD]);
    assert.match(resultText(await callOf("twin", { url: "u" })), /unavailable for the rest/);
    assert.deepEqual(calls, ["twin u", "twin u"]);
    await close();
  });

  test("the notes are bounded and expire as the service's advisory would", () => {
    let now = 1_000_000;
    const notes = new FailureNotes({
      maxTurns: 2,
      maxBlocksPerTurn: 2,
      ttlMs: 60_000,
      now: () => now,
    });
    const transport = { outcome: "failed", failureClass: "transport", excerpt: "gone" } as const;
    const toolError = { outcome: "failed", failureClass: "tool_error", excerpt: "no" } as const;
    assert.notEqual(notes.note("a", SERVER, "dead", undefined, transport), null);
    assert.notEqual(notes.note("b", SERVER, "dead", undefined, transport), null);
    assert.notEqual(notes.check("a", SERVER, "dead", undefined), null); // "b" goes next
    notes.note("c", SERVER, "dead", undefined, transport);
    assert.equal(notes.check("b", SERVER, "dead", undefined), null);
    assert.notEqual(notes.check("a", SERVER, "dead", undefined), null);
    assert.notEqual(notes.check("c", SERVER, "dead", undefined), null);

    const first = notes.note("a", SERVER, "picky", { q: 1 }, toolError);
    assert.equal(first?.fingerprint, callFingerprint(SERVER, "picky", { q: 1 }));
    assert.equal(first?.scope, "SCOPE_TURN_CALL");
    assert.equal(notes.note("a", SERVER, "picky", { q: 2 }, toolError), null); // turn full
    assert.equal(notes.check("a", SERVER, "picky", { q: 2 }), null);
    assert.equal(notes.size, 3);

    now += 60_000;
    assert.equal(notes.check("a", SERVER, "dead", undefined), null);
    assert.equal(notes.check("a", SERVER, "picky", { q: 1 }), null);
    assert.equal(notes.check("c", SERVER, "dead", undefined), null);
    assert.equal(notes.size, 0);
  });
});

describe("wrapClient: the turn without setTurn", () => {
  before(() => context.setGlobalContextManager(new AsyncLocalContextManager()));
  after(() => context.disable());

  test("inside an active span, its trace is the turn, and a repeat is refused", async () => {
    const source = new Source();
    const warnings: string[] = [];
    const logger = { debug() {}, info() {}, warn: (m: string) => warnings.push(m), error() {} };
    const { tracer, call, calls, close } = await setUp(source, { setTurn: false, logger });
    const traceId = await tracer.startActiveSpan("agent turn", async (turn) => {
      await call("fail");
      const again = await call("fail");
      assert.match(resultText(again), /unavailable for the rest of this turn/);
      turn.end();
      return turn.spanContext().traceId;
    });
    assert.equal(traceId.length, 32);
    assert.deepEqual(
      source.asked.map((asked) => asked.turn),
      [traceId, traceId],
    );
    assert.deepEqual(calls, ["browser_navigate fail"]);
    assert.deepEqual(warnings, []);
    await close();
  });

  test("with neither a turn nor an active span, it warns once", async () => {
    const source = new Source();
    const warnings: string[] = [];
    const logger = { debug() {}, info() {}, warn: (m: string) => warnings.push(m), error() {} };
    const { call, calls, close } = await setUp(source, { setTurn: false, logger });
    await call("fail");
    await call("fail");
    assert.deepEqual(
      source.asked.map((asked) => asked.turn),
      ["", ""],
    );
    assert.deepEqual(calls, ["browser_navigate fail", "browser_navigate fail"]);
    assert.deepEqual(warnings, [
      `no turn for calls to ${SERVER}: call setTurn(turnId) before each model round, or make ` +
        "the calls inside an active span for the turn (its trace is the turn); without either, " +
        "each call is a turn of its own and a repeated call cannot be refused",
    ]);
    await close();
  });
});

describe("ToolCallRecord.verdict() reads a span as the service does", () => {
  test("against the service's own judge", async () => {
    const oracle = new PythonOracle();
    const texts = [
      DEAD,
      PICKY,
      "Request timed out",
      "deadline exceeded",
      "Unknown tool: browser_navigate",
      "tool `x` was not found",
      "HTTP 503 from upstream",
      "connection refused (ECONNREFUSED 127.0.0.1:8931)",
      "the user declined the permission prompt",
      "operation cancelled",
      "invalid params: url must be a string",
      "mcp-beaver: upstream MCP session is closed (reconnect also failed: reconnect upstream " +
        'MCP "http://127.0.0.1:8931/mcp": sending "notifications/initialized": Bad Request)',
      "token=sk-abcdefabcdefabcdefabcdef failed in /home/me/secret.txt",
      "",
    ];
    interface Case {
      outcome: "ok" | "failed";
      error: string;
      errorType: string | null;
      isError: boolean | null;
      exceptions: Array<[string, string]>;
    }
    const cases: Case[] = [];
    for (const text of texts) {
      cases.push(
        { outcome: "failed", error: text, errorType: null, isError: true, exceptions: [] },
        { outcome: "failed", error: text, errorType: "-32001", isError: null, exceptions: [] },
        { outcome: "failed", error: text, errorType: "-32602", isError: null, exceptions: [] },
        { outcome: "failed", error: text, errorType: "-32099", isError: null, exceptions: [] },
        {
          outcome: "failed",
          error: `Error: ${text}`,
          errorType: "Error",
          isError: null,
          exceptions: [["Error", `Error: ${text}`]],
        },
        {
          outcome: "failed",
          error: `McpError: ${text}`,
          errorType: "-32000",
          isError: null,
          exceptions: [["McpError", text]],
        },
      );
    }
    cases.push({ outcome: "ok", error: "", errorType: null, isError: false, exceptions: [] });
    try {
      for (const recorded of cases) {
        const provider = new BasicTracerProvider();
        const verdict = await recordToolCall(
          provider.getTracer("t"),
          { tool: "x" },
          async (record) => {
            if (recorded.outcome === "ok") record.ok();
            else {
              record.failed(recorded.error, {
                ...(recorded.errorType !== null ? { errorType: recorded.errorType } : {}),
                ...(recorded.isError !== null ? { isError: recorded.isError } : {}),
              });
              for (const [kind, message] of recorded.exceptions) {
                record.noteException(kind, message);
              }
            }
            return record.verdict();
          },
        );
        const expected = await oracle.ask<{
          outcome: string;
          failureClass: string | null;
          excerpt: string;
        }>({
          kind: "verdict",
          outcome: recorded.outcome,
          error: recorded.outcome === "failed" ? redactedError(recorded.error) : "",
          errorType: recorded.errorType,
          isError: recorded.isError,
          statusError: recorded.outcome === "failed",
          exceptions: recorded.exceptions.map(([kind, message]) => [kind, redactedError(message)]),
          refused: false,
        });
        const got = {
          outcome: verdict.outcome,
          failureClass: verdict.failureClass,
          excerpt: verdict.outcome === "failed" ? verdict.excerpt : "",
        };
        assert.deepEqual(got, expected, JSON.stringify(recorded));
      }
    } finally {
      oracle.close();
    }
  });
});

describe("turnBlockMessage", () => {
  test("ends an error that has its own period with one period, as the service does", () => {
    for (const toolWide of [true, false]) {
      const message = turnBlockMessage(
        "t3_queue_list",
        "",
        toolWide,
        "The operation could not be completed.",
      );
      assert.match(message, /could not be completed\)\.$/);
      assert.ok(!message.includes(".."), message);
      assert.ok(turnBlockMessage("x", "", toolWide, "").endsWith("(it failed)."));
    }
  });

  test("writes the service's words, word for word (its own Python code answers)", async () => {
    const oracle = new PythonOracle();
    const whys = [
      "",
      "upstream MCP session is closed",
      "The operation could not be completed. ",
      "a (b) c",
    ];
    try {
      for (const server of ["", "billing"]) {
        for (const why of whys) {
          const cases: Array<[string, string]> = [
            ["turn_tool_blocked", turnBlockMessage("fetch_invoice", server, true, why)],
            ["turn_call_blocked", turnBlockMessage("fetch_invoice", server, false, why)],
            [
              "refused_without_message",
              resultText(
                refusalResult("fetch_invoice", advisory({ message: "", server, cause: why })),
              ),
            ],
          ];
          for (const [template, written] of cases) {
            const expected = await oracle.ask<{ message: string }>({
              kind: "message",
              template,
              tool: "fetch_invoice",
              server,
              why,
            });
            assert.equal(written, expected.message, `${template} ${server} ${why}`);
          }
        }
      }
    } finally {
      oracle.close();
    }
  });
});
