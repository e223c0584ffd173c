/**
 * The TypeScript client's benchmark: `npm run bench` (about a minute), `npm run bench --
 * --quick` (a smoke test).
 *
 * 1. `check()` from the mirror. A service (`mcp-breaker serve`, every port on 127.0.0.1)
 *    whose across-turn circuits open only on failures in a row; failing spans sent by the
 *    OpenTelemetry JS SDK leave the client's mirror holding 200 turn blocks of a tool over
 *    20 servers, 20 exact-call blocks (a tool error with arguments), and 3 server circuits.
 *    Then `--checks` calls of each kind, alternated, each timed alone with
 *    `process.hrtime.bigint()` (the timer's own cost is in every figure): a call a turn
 *    block refuses, a call in a turn with no advisory, a call in a turn with an exact-call
 *    advisory for other arguments (its fingerprint is computed), a call a server circuit
 *    refuses; and as the floor, `Map.get` of a key built per call, as the mirror builds one.
 * 2. From failure to mirror. A second service whose circuits never open (each failure is one
 *    turn block). A harness as the README sets one up: the OpenTelemetry JS SDK with
 *    `PromptToolSpanProcessor` and the OTLP/gRPC exporter, an `AdvisoryClient` subscribed
 *    with the harness's name; `--events` failures `--interval-ms` apart, each in a turn of
 *    its own. t0 just after `failed(...)`, before the span ends; t1 when `check()` for that
 *    turn first says DENY (looked at on each `update` event: the moment the mirror changes).
 *    The Python client's figure comes from the same service in the same run:
 *    `python_failure_to_mirror.py` runs part 5 of `bench/advisories.py` (`failures_to_mirror`,
 *    which polls `check` every 0.1 ms), and the two alternate, twice each.
 *
 * Figures only: nothing here judges a time. It checks its own work (every verdict right,
 * the mirror holding what the spans made, every failure reaching both mirrors) and exits 1
 * when that fails.
 */
import { spawn, spawnSync } from "node:child_process";
import { cpus, release, totalmem } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { parseArgs } from "node:util";

import type { Tracer } from "@opentelemetry/api";
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-grpc";
import { resourceFromAttributes } from "@opentelemetry/resources";
import { BasicTracerProvider } from "@opentelemetry/sdk-trace-base";

import { type AdvisoryClient, Decision, silentLogger, subscribe } from "@mcp-breaker/client";
import { PromptToolSpanProcessor, recordToolCall } from "@mcp-breaker/client/tracing";

import { PACKAGE_ROOT, PYTHON } from "../test/support/paths.js";
import { BreakerService } from "../test/support/service.js";
import { waitFor } from "../test/support/wait.js";

const { values: flags } = parseArgs({
  options: {
    quick: { type: "boolean", default: false },
    checks: { type: "string" },
    events: { type: "string" },
    "interval-ms": { type: "string" },
  },
});
const QUICK = flags.quick === true;
const CHECKS = Number(flags.checks ?? (QUICK ? 2_000 : 20_000));
const EVENTS = Number(flags.events ?? (QUICK ? 20 : 200)); // per client, over two rounds
const INTERVAL_MS = Number(flags["interval-ms"] ?? 100);
const WARMUP_EVENTS = 10;
const ROUNDS = 2;
const SERVERS = 20;
const TURNS = 200;
const EXACT_CALLS = 20;
const DOWN_SERVERS = 3;
const TOOL = "fetch_page";
const CALL_TOOL = "query";
const ERROR =
  'upstream MCP session is closed (reconnect also failed: reconnect upstream MCP "http://127.0.0.1:8931/mcp": ' +
  'sending "notifications/initialized": Bad Request)';
const TOOL_ERROR = 'query failed: column "customer_ref" does not exist';
const ARGUMENTS = { url: "https://artifacts.example.test/run/1539078028959944794" };
const CALL_ARGUMENTS = { table: "orders", where: "customer_ref = 42", limit: 50 };
const CORRECTED_ARGUMENTS = { table: "orders", where: "customer_id = 42", limit: 50 };
const HARNESS = "ts-bench-harness";
const WAIT_MS = 30_000;
const GOAL_P99_MS = 50;
const PYTHON_SCRIPT = join(PACKAGE_ROOT, "bench", "python_failure_to_mirror.py");

const problems: string[] = [];

// -- shared pieces ----------------------------------------------------------------------------

class Harness {
  readonly provider: BasicTracerProvider;
  readonly tracer: Tracer;
  readonly advisories: AdvisoryClient;

  constructor(service: BreakerService) {
    const processor = new PromptToolSpanProcessor(new OTLPTraceExporter({ url: service.otlpUrl }));
    this.provider = new BasicTracerProvider({
      resource: resourceFromAttributes({ "service.name": HARNESS }),
      spanProcessors: [processor],
    });
    this.tracer = this.provider.getTracer(HARNESS);
    this.advisories = subscribe(service.advisoriesTarget, {
      harness: HARNESS,
      logger: silentLogger,
    });
  }

  fail(
    turn: string,
    server: string,
    options: { tool?: string; error?: string; arguments?: unknown } = {},
  ) {
    const call = {
      tool: options.tool ?? TOOL,
      server,
      turnId: turn,
      round: 1,
      arguments: options.arguments ?? ARGUMENTS,
    };
    return recordToolCall(this.tracer, call, (record) => record.failed(options.error ?? ERROR));
  }

  async close(): Promise<void> {
    this.advisories.close();
    await this.provider.shutdown();
  }
}

function quantile(values: readonly number[], q: number): number {
  const ordered = [...values].sort((a, b) => a - b);
  if (ordered.length === 0) return Number.NaN;
  return ordered[
    Math.max(0, Math.min(ordered.length, Math.ceil(q * ordered.length)) - 1)
  ] as number;
}

const fixed = (value: number, digits: number) => value.toFixed(digits).padStart(8);

// -- part 1: check() from the mirror ----------------------------------------------------------

async function checkLatency(): Promise<Array<[string, number[]]>> {
  const failuresInARow = Math.ceil(TURNS / SERVERS) + 1; // more than any turn-block server gets
  const service = await BreakerService.start(
    `breaker.consecutive_failures=${failuresInARow}`,
    `breaker.min_calls=${2 ** 31 - 1}`,
  );
  const harness = new Harness(service);
  try {
    const advisories = harness.advisories;
    if (!(await advisories.waitUntilSynced(WAIT_MS))) throw new Error("the mirror never synced");
    for (let i = 0; i < TURNS; i++) await harness.fail(`block-${i}`, `bench-mcp-${i % SERVERS}`);
    for (let i = 0; i < EXACT_CALLS; i++) {
      await harness.fail(`exact-${i}`, `bench-db-${i % SERVERS}`, {
        tool: CALL_TOOL,
        error: TOOL_ERROR,
        arguments: CALL_ARGUMENTS,
      });
    }
    for (let j = 0; j < DOWN_SERVERS; j++) {
      for (let k = 0; k < failuresInARow; k++) await harness.fail(`down-${j}`, `bench-down-${j}`);
    }
    const held = (scope: string) => advisories.advisories().filter((a) => a.scope === scope).length;
    await waitFor(
      () =>
        held("SCOPE_TURN_TOOL") >= TURNS + DOWN_SERVERS &&
        held("SCOPE_TURN_CALL") >= EXACT_CALLS &&
        held("SCOPE_SERVER") >= DOWN_SERVERS,
      "the mirror to hold what the spans made",
      WAIT_MS,
    ).catch((error: Error) => problems.push(error.message));
    const population = ["SCOPE_TURN_TOOL", "SCOPE_TURN_CALL", "SCOPE_SERVER", "SCOPE_TOOL"]
      .map((scope) => `${held(scope)} ${scope}`)
      .join(", ");
    console.log(`  the mirror holds ${advisories.advisories().length} advisories: ${population}`);

    const table = new Map(
      advisories.advisories().map((a) => [`${a.turn}\u0000${a.server}\u0000${a.tool}`, a]),
    );
    const [turn, server] = ["block-100", `bench-mcp-${100 % SERVERS}`];
    const cases: Array<[string, () => unknown, Decision | null]> = [
      ["Map.get, the baseline", () => table.get(`${turn}\u0000${server}\u0000${TOOL}`), null],
      ["refused by a turn block", () => advisories.check({ turn, server, tool: TOOL, arguments: ARGUMENTS }).decision, Decision.DENY],
      ["a turn with no advisory", () => advisories.check({ turn: "free", server, tool: TOOL, arguments: ARGUMENTS }).decision, Decision.ALLOW],
      ["a turn with an exact-call advisory (fingerprints)", () => advisories.check({ turn: "exact-0", server: "bench-db-0", tool: CALL_TOOL, arguments: CORRECTED_ARGUMENTS }).decision, Decision.ALLOW],
      ["refused by a server circuit", () => advisories.check({ turn: "free", server: "bench-down-0", tool: TOOL, arguments: ARGUMENTS }).decision, Decision.DENY],
    ]; // prettier-ignore
    const samples = cases.map(() => [] as number[]);
    let wrong = 0;
    for (let round = 0; round < 2; round++) {
      const timed = round === 1; // the first round warms the JIT up
      for (let i = 0; i < CHECKS; i++) {
        cases.forEach(([, call, expected], index) => {
          const began = process.hrtime.bigint();
          const answer = call();
          const took = Number(process.hrtime.bigint() - began) / 1000;
          if (timed) samples[index]?.push(took);
          if (expected !== null && answer !== expected) wrong++;
        });
      }
    }
    if (wrong > 0) problems.push(`${wrong} check() answers were wrong`);
    return cases.map(([name], index) => [name, samples[index] as number[]]);
  } finally {
    await harness.close();
    await service.stop();
  }
}

// -- part 2: failure → mirror -----------------------------------------------------------------

async function typescriptRun(
  service: BreakerService,
  label: string,
  count: number,
): Promise<number[]> {
  const harness = new Harness(service);
  try {
    const advisories = harness.advisories;
    if (!(await advisories.waitUntilSynced(WAIT_MS)))
      throw new Error("the TypeScript harness never synced");
    const pending = new Map<string, { server: string; t0: bigint }>();
    const latencies: number[] = [];
    advisories.on("update", (message) => {
      if (message.kind !== "change") return;
      const failure = pending.get(message.change.turn);
      if (failure === undefined) return;
      const call = {
        turn: message.change.turn,
        server: failure.server,
        tool: TOOL,
        arguments: ARGUMENTS,
      };
      if (!advisories.check(call).refused) return;
      latencies.push(Number(process.hrtime.bigint() - failure.t0) / 1e6);
      pending.delete(message.change.turn);
    });
    const began = performance.now();
    for (let i = 0; i < count; i++) {
      await sleep(Math.max(0, began + i * INTERVAL_MS - performance.now()));
      const turn = `ts-${label}-turn-${i}`;
      const server = `bench-sdk-mcp-${i % SERVERS}`;
      await recordToolCall(
        harness.tracer,
        { tool: TOOL, server, turnId: turn, round: 1, arguments: ARGUMENTS },
        (call) => {
          call.failed(ERROR);
          pending.set(turn, { server, t0: process.hrtime.bigint() }); // the span ends as this returns
        },
      );
    }
    await waitFor(() => pending.size === 0, "every failure in the mirror", WAIT_MS).catch(
      () => undefined,
    );
    return latencies;
  } finally {
    await harness.close();
  }
}

function pythonRun(service: BreakerService, label: string, count: number): Promise<number[]> {
  const argv = [
    PYTHON_SCRIPT,
    service.otlpTarget,
    service.advisoriesTarget,
    String(count),
    String(INTERVAL_MS),
    label,
  ];
  return new Promise((resolve, reject) => {
    const child = spawn(PYTHON, argv, { stdio: ["ignore", "pipe", "inherit"] });
    let output = "";
    child.stdout.on("data", (chunk: Buffer) => (output += chunk.toString()));
    child.on("exit", (code) => {
      try {
        const answer = JSON.parse(output) as { latencies_ms?: number[]; error?: string };
        if (code !== 0 || answer.latencies_ms === undefined)
          throw new Error(answer.error ?? `exit ${code}`);
        resolve(answer.latencies_ms);
      } catch (error) {
        reject(new Error(`the Python harness failed: ${(error as Error).message} ${output}`));
      }
    });
  });
}

async function failureToMirror(): Promise<{
  python: number[];
  typescript: number[];
  perRound: number;
}> {
  // Across-turn circuits never open: each failure makes exactly one change, its turn's block.
  const service = await BreakerService.start(
    "breaker.consecutive_failures=0",
    `breaker.min_calls=${2 ** 31 - 1}`,
  );
  const perRound = Math.ceil(EVENTS / ROUNDS);
  const python: number[] = [];
  const typescript: number[] = [];
  try {
    await pythonRun(service, "warmup", WARMUP_EVENTS);
    await typescriptRun(service, "warmup", WARMUP_EVENTS);
    for (let round = 0; round < ROUNDS; round++) {
      python.push(...(await pythonRun(service, `round-${round}`, perRound)));
      typescript.push(...(await typescriptRun(service, `round-${round}`, perRound)));
    }
  } finally {
    await service.stop();
  }
  for (const [who, seen] of [
    ["Python", python],
    ["TypeScript", typescript],
  ] as const) {
    if (seen.length !== perRound * ROUNDS) {
      problems.push(`${who}: ${perRound * ROUNDS - seen.length} failures never reached the mirror`);
    }
  }
  return { python, typescript, perRound };
}

// -- the report -------------------------------------------------------------------------------

async function main(): Promise<number> {
  const python = spawnSync(PYTHON, ["-V"], { encoding: "utf8" }).stdout.trim();
  const cpu = cpus();
  console.log(`mcp-breaker TypeScript client benchmark${QUICK ? " (--quick)" : ""}`);
  console.log(
    `  ${new Date().toISOString().slice(0, 10)}; ${cpu.length} × ${cpu[0]?.model.trim()}, ` +
      `${Math.round(totalmem() / 2 ** 30)} GiB, Linux ${release()}; Node ${process.version}, ${python}`,
  );

  console.log(
    `\n1. check() from the mirror: ${CHECKS.toLocaleString("en")} calls of each, alternated (µs)`,
  );
  const checks = await checkLatency();
  const baseline = quantile(checks[0]?.[1] ?? [], 0.5);
  console.log(`  ${"".padEnd(52)}     p50      p99   p50 / baseline`);
  for (const [name, values] of checks) {
    const p50 = quantile(values, 0.5);
    console.log(
      `  ${name.padEnd(52)}${fixed(p50, 2)} ${fixed(quantile(values, 0.99), 2)}   ${(p50 / baseline).toFixed(1)}x`,
    );
  }

  console.log(`\n2. a tool call fails in the harness → its mirror holds the advisory (ms)`);
  const { python: py, typescript: ts, perRound } = await failureToMirror();
  console.log(
    `  ${ROUNDS} rounds of ${perRound} failures per client, ${INTERVAL_MS} ms apart, alternating; same service`,
  );
  console.log(`  ${"".padEnd(52)}     p50      p99      max`);
  for (const [name, values] of [
    ["Python client (clients/python)", py],
    ["TypeScript client (@mcp-breaker/client)", ts],
  ] as const) {
    console.log(
      `  ${name.padEnd(52)}${fixed(quantile(values, 0.5), 1)} ${fixed(quantile(values, 0.99), 1)} ${fixed(quantile(values, 1), 1)}`,
    );
  }
  console.log(
    "  (the Python harness polls check() every 0.1 ms; the TypeScript one checks on each update event)",
  );
  const ratio = (q: number) => (quantile(ts, q) / quantile(py, q)).toFixed(2);
  console.log(`  TypeScript / Python: ${ratio(0.5)} at p50, ${ratio(0.99)} at p99`);
  const p99 = quantile(ts, 0.99);
  console.log(
    `  goal, p99 under ${GOAL_P99_MS} ms on loopback: ${p99 < GOAL_P99_MS ? "met" : "NOT met"} (${p99.toFixed(1)} ms)`,
  );

  if (problems.length > 0) {
    console.log(`\nFAILED checks:\n${problems.map((problem) => `  - ${problem}`).join("\n")}`);
    return 1;
  }
  console.log(
    "\nchecks: every verdict right, the mirror as the spans made it, every failure in both mirrors",
  );
  return 0;
}

process.exitCode = await main();
