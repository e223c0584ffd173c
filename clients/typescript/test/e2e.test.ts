/**
 * The seed's turn, end to end, with every part real: mcp-breaker spares the tool 7 of 8
 * calls.
 *
 *     harness (this test)                                     tool server (child process)
 *     MCP SDK Client ─ wrapClient ───── stdio, MCP ─────────▶ McpServer: browser_navigate
 *          │ mcp.tool.call spans (PromptToolSpanProcessor)        └─▶ upstream: a closed port
 *          ▼                                                        "upstream MCP session is
 *     OTLP/gRPC ─▶ mcp-breaker serve (Python) ─▶ advisory ─┐        closed ..." (isError)
 *     AdvisoryClient mirror ◀──── Subscribe stream ◀───────┘
 *
 * The model asks for the same call in rounds 1, 5, 7, 7, 9, 9, 11, 11 of one turn (the
 * seed, sirens-echo #943). Without mcp-breaker all eight reach the tool and fail. With it,
 * the first fails, its span goes to mcp-breaker at once, the turn block comes back as an
 * advisory, and the other seven are answered from the mirror: an `isError` result naming
 * the outage, the tool never sees them, and it stays in the roster.
 *
 * One concession, as in the Python suite's tests/test_advisories_e2e.py: after the first
 * failing call the loop waits until its mirror holds the advisory before playing the next
 * round. A real model round takes seconds (the seed's came 10 s apart), far longer than
 * the span → advisory path; a test loop takes microseconds, and racing it against the
 * network would test the scheduler, not the breaker. The wait has a generous bound, and
 * how long it took is printed, never asserted.
 */
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";

import { type AdvisoryClient, silentLogger, subscribe } from "@mcp-breaker/client";
import { type BreakerClient, resultText, wrapClient } from "@mcp-breaker/client/mcp";

import { Harness } from "./support/harness.js";
import { BUILD_TEST } from "./support/paths.js";
import { freePort, LOOPBACK } from "./support/ports.js";
import { BreakerService } from "./support/service.js";
import { waitFor } from "./support/wait.js";

const TOOL_SERVER = join(BUILD_TEST, "fixtures", "dead-upstream-server.js");
const HARNESS = "e2e-harness";
const SERVER = "playwright";
const TOOL = "browser_navigate";
const TURN = "turn-0106";
const ROUNDS = [1, 5, 7, 7, 9, 9, 11, 11];
const ARGUMENTS = { url: "https://artifacts.example.test/run/1539078028959944794" };
const ADVISORY_WAIT_MS = 30_000; // generous: a bound on waiting, not a measurement

type Caller = Pick<Client, "callTool">;

describe("the seed's turn against a dead tool", () => {
  let directory = "";
  let upstreamPort = 0;
  before(async () => {
    directory = mkdtempSync(join(tmpdir(), "mcp-breaker-e2e-"));
    upstreamPort = await freePort(); // free, so nothing listens: the dead upstream
  });
  after(() => rmSync(directory, { recursive: true, force: true }));

  /** Start the tool server over stdio, and play the turn through `wrap(client)`. */
  async function playTheTurn(
    label: string,
    wrap: (client: Client) => Caller,
    afterFirst?: () => Promise<void>,
  ): Promise<{ results: CallToolResult[]; reached: number; listed: string[] }> {
    const invocations = join(directory, `${label}.txt`);
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [TOOL_SERVER],
      env: {
        ...process.env,
        INVOCATIONS_FILE: invocations,
        UPSTREAM_PORT: String(upstreamPort),
      } as Record<string, string>,
      stderr: "inherit",
    });
    const client = new Client({ name: HARNESS, version: "1.0.0" });
    await client.connect(transport);
    try {
      assert.deepEqual(
        (await client.listTools()).tools.map((tool) => tool.name),
        [TOOL],
      );
      const harness = wrap(client);
      const results: CallToolResult[] = [];
      for (const [index, round] of ROUNDS.entries()) {
        (harness as Partial<BreakerClient<Client>>).setTurn?.(TURN, round);
        results.push(
          (await harness.callTool({ name: TOOL, arguments: { ...ARGUMENTS } })) as CallToolResult,
        );
        if (index === 0) await afterFirst?.();
      }
      const listed = (await (harness as Client).listTools()).tools.map((tool) => tool.name);
      const reached = readFileSync(invocations, "utf8").split("\n").filter(Boolean).length;
      return { results, reached, listed };
    } finally {
      await client.close();
    }
  }

  test("without mcp-breaker, all eight calls reach the dead tool", async () => {
    const { results, reached } = await playTheTurn("without", (client) => client);
    assert.equal(reached, 8);
    for (const result of results) {
      assert.equal(result.isError, true);
      assert.match(resultText(result), /upstream MCP session is closed/);
    }
  });

  test("with mcp-breaker, one reaches it and seven are refused with the advisory's message", async () => {
    const running = await BreakerService.start();
    const harness = new Harness(running.otlpUrl, HARNESS);
    let advisories: AdvisoryClient | undefined;
    try {
      advisories = subscribe(running.advisoriesTarget, { harness: HARNESS, logger: silentLogger });
      const mirror = advisories;
      assert.ok(await mirror.waitUntilSynced(20_000));
      let waitedMs = 0;
      const waitForTheAdvisory = async () => {
        const started = performance.now();
        await waitFor(
          () =>
            mirror.check({ turn: TURN, server: SERVER, tool: TOOL, arguments: ARGUMENTS }).refused,
          "the advisory in the mirror",
          ADVISORY_WAIT_MS,
        );
        waitedMs = performance.now() - started;
      };
      const { results, reached, listed } = await playTheTurn(
        "with",
        (client) =>
          wrapClient(client, { advisories: mirror, tracer: harness.tracer, serverName: SERVER }),
        waitForTheAdvisory,
      );
      console.log(`failure returned → advisory in the harness's mirror: ${waitedMs.toFixed(1)} ms`);

      assert.equal(reached, 1);
      assert.deepEqual(listed, [TOOL], "the tool stays in the model's roster");
      const [first, ...refused] = results;
      assert.ok(first?.isError && /upstream MCP session is closed/.test(resultText(first)));
      assert.equal(refused.length, 7);
      for (const result of refused) {
        const text = resultText(result);
        assert.equal(result.isError, true);
        assert.ok(text.includes("unavailable") && text.includes(`\`${TOOL}\``), text);
        assert.ok(text.includes("upstream MCP session is closed"), text); // the recorded error
        assert.ok(text.includes(`${LOOPBACK}:${upstreamPort}`), text); // which upstream
      }

      // mcp-breaker saw all eight: one failure, and seven refusals that count for nothing.
      const refusals = { reason: "refused_by_advisory", server: SERVER, tool: TOOL };
      await waitFor(
        async () => (await running.metric("mcp_breaker_neutral_calls_total", refusals)) === 7,
        "the seven refusals at the service",
      );
      const failed = { server: SERVER, tool: TOOL, outcome: "failed", failure_class: "transport" };
      assert.equal(await running.metric("mcp_breaker_tool_calls_total", failed), 1);
      assert.equal(
        await running.metric("mcp_breaker_tool_calls_total", { server: SERVER, tool: TOOL }),
        8,
      );
      assert.equal(
        await running.metric("mcp_breaker_dead_calls_total"),
        0,
        "no dead call was made",
      );
    } finally {
      advisories?.close();
      await harness.shutdown();
      await running.stop();
    }
  });
});
