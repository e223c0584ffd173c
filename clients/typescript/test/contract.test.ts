/**
 * What the contract allows a service to send, and the real service does not (yet): values
 * a later version adds, snapshots in parts, a silent stream. A gRPC server in this
 * process plays the service, over real gRPC, with the contract's own proto file; it also
 * records what the client asked for, to check its resume requests.
 */
import assert from "node:assert/strict";
import * as grpc from "@grpc/grpc-js";
import { after, afterEach, before, describe, test } from "node:test";

import {
  type AdvisoryClient,
  ConfigError,
  Decision,
  reconnectDelayMs,
  DEFAULT_RECONNECT,
  silentLogger,
  subscribe,
} from "@mcp-breaker/client";
import { loadContract } from "@mcp-breaker/client/contract";

import { LOOPBACK } from "./support/ports.js";
import { waitFor } from "./support/wait.js";

const SERVER = "playwright";
const TOOL = "browser_navigate";

function wireAdvisory(fields: Record<string, unknown>): Record<string, unknown> {
  return {
    id: "a", scope: "SCOPE_TOOL", state: "STATE_OPEN", server: SERVER, tool: TOOL,
    turn: "", message: "`browser_navigate` is unavailable", enforced: true, ...fields,
  }; // prettier-ignore
}

type Stream = grpc.ServerWritableStream<Record<string, unknown>, Record<string, unknown>>;

/** A stand-in service: each Subscribe is handed to the test, which writes what it wants. */
class ScriptedService {
  readonly server = new grpc.Server();
  readonly requests: Array<Record<string, unknown>> = [];
  readonly streams: Stream[] = [];
  verdict: string | number = "VERDICT_ALLOW";
  port = 0;

  async start(): Promise<void> {
    const { Advisories } = loadContract();
    this.server.addService(Advisories.service, {
      Subscribe: (stream: Stream) => {
        this.requests.push(stream.request);
        this.streams.push(stream);
      },
      Check: (_call: unknown, callback: grpc.sendUnaryData<object>) =>
        callback(null, { verdict: this.verdict, advisory: wireAdvisory({ id: "checked" }) }),
      GetState: (_call: unknown, callback: grpc.sendUnaryData<object>) => callback(null, {}),
    });
    this.port = await new Promise<number>((resolve, reject) =>
      this.server.bindAsync(
        `${LOOPBACK}:0`,
        grpc.ServerCredentials.createInsecure(),
        (error, port) => (error ? reject(error) : resolve(port)),
      ),
    );
  }

  get latest(): Stream {
    return this.streams.at(-1) as Stream;
  }

  /** End the latest stream with `code`, as the service ends one it gives up on. */
  fail(code: grpc.status): void {
    this.latest.emit("error", { code, details: "ended by the test" });
  }

  send(message: Record<string, unknown>): void {
    this.latest.write({ epoch: "epoch-1", ...message });
  }
}

describe("against a service that says what a later contract may", () => {
  const service = new ScriptedService();
  let advisories: AdvisoryClient;
  before(() => service.start());
  after(() => service.server.forceShutdown());
  afterEach(() => advisories?.close());

  const connect = async (options = {}) => {
    const before = service.streams.length;
    advisories = subscribe(`${LOOPBACK}:${service.port}`, {
      harness: "contract-tests",
      reconnect: { initialMs: 20, maxMs: 100 },
      logger: silentLogger,
      ...options,
    });
    await waitFor(() => service.streams.length > before, "the subscription");
  };
  const check = (turn = "turn-1") => advisories.check({ turn, server: SERVER, tool: TOOL });

  test("an unknown state in a change refuses; an unknown scope matches no call", async () => {
    await connect();
    service.send({ seq: 0, snapshot: { advisories: [], first: true } });
    assert.ok(await advisories.waitUntilSynced(5_000));

    service.send({ seq: 1, change: wireAdvisory({ id: "future-state", state: 42 }) });
    await waitFor(() => advisories.advisories().length === 1, "the change");
    const [held] = advisories.advisories();
    assert.equal(held?.state, 42); // kept as the number it is
    assert.ok(check().refused, "a state this version does not know refuses");

    service.send({ seq: 2, change: wireAdvisory({ id: "future-state", state: "STATE_CLOSED" }) });
    service.send({ seq: 3, change: wireAdvisory({ id: "future-scope", scope: 99 }) });
    await waitFor(() => advisories.advisories()[0]?.id === "future-scope", "the second change");
    assert.equal(advisories.advisories().length, 1);
    assert.equal(
      check().decision,
      Decision.ALLOW,
      "a scope this version does not know matches nothing",
    );
    assert.equal(advisories.position.seq, 3n);
  });

  test("a snapshot in parts is whole only at its last part; then it resumes from it", async () => {
    await connect();
    service.send({
      seq: 7,
      snapshot: { advisories: [wireAdvisory({ id: "a" })], first: true, more: true },
    });
    await waitFor(() => advisories.advisories().length === 1, "the first part");
    assert.equal(advisories.synced, false);
    service.send({
      seq: 7,
      snapshot: {
        advisories: [wireAdvisory({ id: "b", scope: "SCOPE_SERVER", tool: "" })],
        more: false,
      },
    });
    assert.ok(await advisories.waitUntilSynced(5_000));
    assert.deepEqual(
      advisories.advisories().map((a) => a.id),
      ["a", "b"],
    );
    service.send({ seq: 8, heartbeat: { atUnixNano: 1 } });
    await waitFor(() => advisories.stats.heartbeats === 1, "the heartbeat");

    const count = service.requests.length;
    service.fail(grpc.status.UNAVAILABLE);
    await waitFor(() => service.requests.length > count, "the resubscription");
    const resume = service.requests.at(-1) as Record<string, unknown>;
    assert.equal(resume.resumeEpoch, "epoch-1");
    assert.equal(String(resume.resumeAfterSeq), "7"); // not the heartbeat's 8
    assert.equal(resume.harness, "contract-tests");
  });

  test("a stream cut off after delivering resubscribes without resuming, for a fresh snapshot", async () => {
    await connect();
    service.send({ seq: 5, snapshot: { advisories: [], first: true } });
    assert.ok(await advisories.waitUntilSynced(5_000));
    const count = service.requests.length;
    service.fail(grpc.status.RESOURCE_EXHAUSTED);
    await waitFor(() => service.requests.length > count, "the resubscription");
    assert.equal(service.requests.at(-1)?.resumeEpoch, "");
    assert.equal(advisories.stats.cutOff, 1);
  });

  test("a stream that says nothing is given up on by the watchdog", async () => {
    await connect({ idleTimeoutMs: 300 });
    service.send({ seq: 0, snapshot: { advisories: [], first: true } });
    assert.ok(await advisories.waitUntilSynced(5_000));
    const count = service.requests.length;
    await waitFor(
      () => advisories.stats.stalled >= 1 && service.requests.length > count,
      "the watchdog",
    );
  });

  test("an unknown verdict from Check allows the call", async () => {
    await connect();
    service.verdict = 7;
    const result = await advisories.checkRemote({ turn: "t", server: SERVER, tool: TOOL });
    assert.equal(result.decision, Decision.ALLOW);
    assert.equal(result.advisory?.id, "checked");
    service.verdict = "VERDICT_DENY";
    assert.ok((await advisories.checkRemote({ turn: "t", server: SERVER, tool: TOOL })).refused);
  });
});

describe("options", () => {
  test("bad values are refused when given, naming the option and the value", () => {
    assert.throws(() => subscribe("x:1", { idleTimeoutMs: 0 }), /idleTimeoutMs.*0/);
    assert.throws(() => subscribe("x:1", { reconnect: { initialMs: 10, maxMs: 5 } }), ConfigError);
    assert.throws(() => subscribe("x:1", { reconnect: { randomization: 1 } }), /randomization/);
    assert.throws(() => subscribe("x:1", { tls: { privateKey: "k" } }), /go together/);
  });

  test("the backoff grows to its cap, spread by the jitter", () => {
    const policy = { ...DEFAULT_RECONNECT };
    assert.equal(reconnectDelayMs(policy, 0, 0.5), 200);
    assert.equal(reconnectDelayMs(policy, 3, 0.5), 1600);
    assert.equal(reconnectDelayMs(policy, 1000, 0.5), 30_000);
    assert.equal(reconnectDelayMs(policy, 0, 0), 100);
    assert.ok(reconnectDelayMs(policy, 0, 0.999) < 300);
  });
});
