/**
 * `AdvisoryClient` against the real service (`mcp-breaker serve`, the Python package of
 * this repository), over real gRPC. Failures are sent as the OpenTelemetry JS SDK writes
 * them through its OTLP/gRPC exporter; the advisories they raise come back over the
 * `Subscribe` stream. Broken networks are made by a TCP proxy between client and service.
 */
import assert from "node:assert/strict";
import { afterEach, describe, test } from "node:test";

import {
  type AdvisoryClient,
  type ClientOptions,
  Decision,
  silentLogger,
  subscribe,
} from "@mcp-breaker/client";

import { ARGUMENTS, Harness, SERVER, TOOL } from "./support/harness.js";
import { freePort, LOOPBACK } from "./support/ports.js";
import { TcpProxy } from "./support/proxy.js";
import { BreakerService } from "./support/service.js";
import { waitFor } from "./support/wait.js";

const HARNESS = "ts-subscriber-tests";
const FAST: ClientOptions = { reconnect: { initialMs: 50, maxMs: 500 }, logger: silentLogger };

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function service(...settings: string[]): Promise<BreakerService> {
  const started = await BreakerService.start(...settings);
  cleanups.push(() => started.stop());
  return started;
}

function client(target: string, options: ClientOptions = {}): AdvisoryClient {
  const made = subscribe(target, { harness: HARNESS, ...FAST, ...options });
  cleanups.push(() => made.close());
  return made;
}

function harness(running: BreakerService, tenant = ""): Harness {
  const made = new Harness(running.otlpUrl, HARNESS, tenant);
  cleanups.push(() => made.shutdown());
  return made;
}

async function proxy(target: string): Promise<TcpProxy> {
  const made = await TcpProxy.start(target);
  cleanups.push(() => made.close());
  return made;
}

const callIn = (turn: string) => ({ turn, server: SERVER, tool: TOOL, arguments: ARGUMENTS });
const refuses = (advisories: AdvisoryClient, turn: string) =>
  advisories.check(callIn(turn)).refused;

describe("subscribed to the real service", () => {
  test("a snapshot first, then each change; check and checkRemote agree", async () => {
    const running = await service();
    const spans = harness(running);
    await spans.fail("turn-before");
    await waitFor(
      async () => (await running.metric("mcp_breaker_tool_calls_total")) >= 1,
      "the span",
    );

    const advisories = client(running.advisoriesTarget);
    assert.ok(await advisories.waitUntilSynced(20_000));
    await waitFor(() => refuses(advisories, "turn-before"), "the snapshot's turn block");
    assert.equal(advisories.stats.snapshots, 1);
    const [held] = advisories.advisories();
    assert.equal(held?.scope, "SCOPE_TURN_TOOL");
    assert.equal(held?.state, "STATE_TURN_BLOCKED");
    assert.match(held?.message ?? "", /unavailable.*upstream MCP session is closed/);
    assert.equal(held?.harness, HARNESS);
    assert.equal(held?.evidence?.failureClass, "transport");

    const updates: string[] = [];
    advisories.on("update", (message) => updates.push(message.kind));
    await spans.fail("turn-after");
    await waitFor(() => refuses(advisories, "turn-after"), "the change");
    assert.ok(advisories.stats.changes >= 1 && updates.includes("change"));
    assert.equal(advisories.stats.snapshots, 1);
    assert.ok(!refuses(advisories, "a third turn"));
    assert.ok(advisories.position.epoch !== "" && advisories.position.seq >= 2n);

    const remote = await advisories.checkRemote(callIn("turn-after"));
    assert.equal(remote.decision, Decision.DENY);
    assert.ok(
      remote.answered && remote.advisory?.id === held?.id.replace("turn-before", "turn-after"),
    );
    const allowed = await advisories.checkRemote({
      turn: "a third turn",
      server: SERVER,
      tool: TOOL,
    });
    assert.ok(allowed.decision === Decision.ALLOW && allowed.answered);
  });

  test("after a broken connection it resumes with exactly what it missed", async () => {
    const running = await service();
    const relay = await proxy(running.advisoriesTarget);
    const advisories = client(relay.endpoint);
    assert.ok(await advisories.waitUntilSynced(20_000));
    relay.cut(true);
    await waitFor(() => !advisories.synced, "the client to notice");

    await harness(running).fail("turn-while-away");
    await waitFor(
      async () => (await running.metric("mcp_breaker_tool_calls_total")) >= 1,
      "the span",
    );
    assert.ok(!refuses(advisories, "turn-while-away"));

    relay.release();
    await waitFor(() => refuses(advisories, "turn-while-away"), "the missed change");
    const { snapshots, resumed, resyncs, broken } = advisories.stats;
    assert.deepEqual({ snapshots, resumed, resyncs }, { snapshots: 1, resumed: 1, resyncs: 0 });
    assert.ok(broken >= 1);
  });

  test("after the service restarts, the resume cannot be honoured and the mirror is replaced", async () => {
    const running = await service();
    await harness(running).fail("turn-1");
    const advisories = client(running.advisoriesTarget);
    await waitFor(() => refuses(advisories, "turn-1"), "the first advisory");
    const before = advisories.position;

    await running.restart(); // the same ports: a new epoch, nothing in force
    await waitFor(() => advisories.stats.resyncs === 1, "the resync snapshot");
    assert.ok(!refuses(advisories, "turn-1"));
    assert.deepEqual(advisories.advisories(), []);
    assert.notEqual(advisories.position.epoch, before.epoch);

    await harness(running).fail("turn-2"); // and it goes on with the new epoch
    await waitFor(() => refuses(advisories, "turn-2"), "a change after the restart");
  });

  test("cut off for falling behind, it comes back with a fresh snapshot", async () => {
    const running = await service("advisories.subscriber_queue=1");
    const advisories = client(running.advisoriesTarget);
    assert.ok(await advisories.waitUntilSynced(20_000));
    // Three advisories from one request are published before the stream can send any.
    const turns = ["turn-a", "turn-b", "turn-c"];
    const spans = harness(running);
    await Promise.all(turns.map((turn) => spans.fail(turn)));
    await waitFor(() => turns.every((turn) => refuses(advisories, turn)), "all three advisories");
    assert.equal(advisories.stats.cutOff, 1);
    assert.equal(advisories.stats.snapshots, 2); // the first, and the fresh one after the cut-off
    assert.equal(await running.metric("mcp_breaker_advisory_subscribers_cut_off_total"), 1);
  });

  test("a silent stream is abandoned and subscribed again", async () => {
    const running = await service();
    const relay = await proxy(running.advisoriesTarget);
    const advisories = client(relay.endpoint, { idleTimeoutMs: 1000 });
    assert.ok(await advisories.waitUntilSynced(20_000));
    relay.freeze(); // no heartbeats get through, and no error either
    await waitFor(() => advisories.stats.stalled >= 1, "the watchdog");
    relay.thaw();
    await waitFor(() => advisories.synced && advisories.stats.connects >= 2, "a new stream");
    await harness(running).fail("turn-after-silence");
    await waitFor(() => refuses(advisories, "turn-after-silence"), "a change on the new stream");
  });

  test("a half-open circuit gives exactly one probe permit", async () => {
    const running = await service(
      "breaker.min_calls=1",
      "breaker.consecutive_failures=1",
      "breaker.open_base_s=2",
      "breaker.open_jitter=0",
    );
    const advisories = client(running.advisoriesTarget);
    assert.ok(await advisories.waitUntilSynced(20_000));
    await harness(running).fail("turn-1");
    // One failure opens the server's circuit, for every turn; after its open period (2 s)
    // it is half-open.
    await waitFor(
      () => advisories.advisories().some((a) => a.scope === "SCOPE_SERVER"),
      "the circuit",
    );
    await waitFor(
      () =>
        advisories.check({ turn: "a later turn", server: SERVER, tool: TOOL }).decision ===
        Decision.PROBE_NEEDED,
      "half-open after the open period",
    );
    const first = await advisories.checkRemote(callIn("a later turn"));
    const second = await advisories.checkRemote(callIn("yet another turn"));
    assert.equal(first.decision, Decision.PROBE);
    assert.ok(first.probePermit > 0);
    assert.equal(second.decision, Decision.DENY); // another caller holds the permit
    assert.match(second.advisory?.message ?? "", /testing/);
  });
});

describe("a service that is down", () => {
  test("allows every call, fails checkRemote open, and syncs once the service is up", async () => {
    const port = await freePort();
    const target = `${LOOPBACK}:${port}`;
    const advisories = client(target);
    assert.equal(await advisories.waitUntilSynced(1500), false);
    assert.ok(advisories.stats.connects >= 2, "it keeps trying, with backoff");
    assert.equal(advisories.failure, "");
    assert.equal(
      advisories.check({ turn: "t", server: SERVER, tool: TOOL }).decision,
      Decision.ALLOW,
    );

    const remote = await advisories.checkRemote(
      { turn: "t", server: SERVER, tool: TOOL },
      { timeoutMs: 500 },
    );
    assert.equal(remote.decision, Decision.ALLOW);
    assert.equal(remote.answered, false);
    assert.equal(advisories.stats.remoteChecksFailedOpen, 1);

    const running = await BreakerService.startOn({ advisories: port });
    cleanups.push(() => running.stop());
    assert.equal(running.advisoriesTarget, target);
    assert.ok(await advisories.waitUntilSynced(20_000), "synced once the service listens");
  });

  test("keeps what it knew when the service goes away, until it expires", async () => {
    const running = await service();
    const advisories = client(running.advisoriesTarget);
    await harness(running).fail("turn-1");
    await waitFor(() => refuses(advisories, "turn-1"), "the advisory");
    await running.stop();
    await waitFor(() => !advisories.synced, "the stream to end");
    assert.ok(refuses(advisories, "turn-1"));
    const remote = await advisories.checkRemote(
      { turn: "turn-1", server: SERVER, tool: TOOL },
      { timeoutMs: 500 },
    );
    assert.ok(remote.decision === Decision.ALLOW && !remote.answered);
  });
});
