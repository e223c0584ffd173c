/**
 * TLS, mutual TLS and bearer tokens against the real service: a tenant sees only its own
 * advisories, a wrong token stops the client for good (a retry cannot fix it), and a
 * client without the certificate the service asks for is not let in.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { after, before, describe, test } from "node:test";

import {
  type AdvisoryClient,
  type ClientOptions,
  silentLogger,
  subscribe,
  tlsFromFiles,
} from "@mcp-breaker/client";

import { makeCertificates } from "./support/certificates.js";
import { ARGUMENTS, Harness, SERVER, TOOL } from "./support/harness.js";
import { BreakerService } from "./support/service.js";
import { waitFor } from "./support/wait.js";

const HARNESS = "ts-security-tests";

describe("TLS, mutual TLS and bearer tokens", () => {
  let directory = "";
  let running: BreakerService;
  const clients: AdvisoryClient[] = [];
  const file = (name: string) => join(directory, name);
  const client = (options: ClientOptions, target = running.advisoriesTarget) => {
    const made = subscribe(target, {
      harness: HARNESS,
      reconnect: { initialMs: 50, maxMs: 200 },
      logger: silentLogger,
      ...options,
    });
    clients.push(made);
    return made;
  };
  const mutualTls = () =>
    tlsFromFiles({
      rootCertificates: file("ca.pem"),
      certificateChain: file("client.pem"),
      privateKey: file("client.key"),
    });
  const refuses = (advisories: AdvisoryClient, turn: string) =>
    advisories.check({ turn, server: SERVER, tool: TOOL, arguments: ARGUMENTS }).refused;

  before(async () => {
    directory = mkdtempSync(join(tmpdir(), "mcp-breaker-tls-"));
    makeCertificates(directory);
    running = await BreakerService.start(
      `advisories.tls.cert_file=${file("server.pem")}`,
      `advisories.tls.key_file=${file("server.key")}`,
      `advisories.tls.client_ca_file=${file("ca.pem")}`,
      "advisories.tokens=secret-a=team-a,secret-b=team-b",
    );
    for (const tenant of ["team-a", "team-b"]) {
      const spans = new Harness(running.otlpUrl, HARNESS, tenant);
      await spans.fail(`turn-of-${tenant}`);
      await spans.shutdown();
    }
  });

  after(async () => {
    for (const made of clients) made.close();
    await running?.stop();
    rmSync(directory, { recursive: true, force: true });
  });

  test("over mutual TLS, a token's tenant sees its own advisories and no other's", async () => {
    const advisories = client({ token: "secret-a", tls: mutualTls() });
    assert.ok(await advisories.waitUntilSynced(20_000), advisories.failure);
    await waitFor(() => refuses(advisories, "turn-of-team-a"), "team-a's advisory");
    assert.ok(!refuses(advisories, "turn-of-team-b"));
    assert.ok(advisories.advisories().every((advisory) => advisory.tenant === "team-a"));
    const remote = await advisories.checkRemote({
      turn: "turn-of-team-b",
      server: SERVER,
      tool: TOOL,
      arguments: ARGUMENTS,
    });
    assert.ok(remote.answered && !remote.refused); // Check answers for its own tenant only
    const own = await advisories.checkRemote({
      turn: "turn-of-team-a",
      server: SERVER,
      tool: TOOL,
      arguments: ARGUMENTS,
    });
    assert.ok(own.answered && own.refused);
  });

  test("the certificate is checked against the host name the client dials", async () => {
    const advisories = client(
      { token: "secret-b", tls: mutualTls() },
      `localhost:${running.ports.advisories}`,
    );
    assert.ok(await advisories.waitUntilSynced(20_000), advisories.failure);
    await waitFor(() => refuses(advisories, "turn-of-team-b"), "team-b's advisory");
  });

  for (const [what, token] of [
    ["a wrong token", "not-a-token"],
    ["no token", undefined],
  ] as const) {
    test(`${what} stops the client for good, saying why`, async () => {
      const failures: string[] = [];
      const advisories = client({ token, tls: mutualTls() });
      advisories.on("failure", (reason) => failures.push(reason));
      assert.equal(await advisories.waitUntilSynced(20_000), false);
      assert.match(advisories.failure, /^UNAUTHENTICATED/);
      assert.deepEqual(failures, [advisories.failure]);
      await sleep(500); // ten backoff periods: a retrying client would have connected again
      assert.equal(advisories.stats.connects, 1);
      assert.ok(!advisories.check({ turn: "turn-of-team-a", server: SERVER, tool: TOOL }).refused);
      const remote = await advisories.checkRemote({
        turn: "turn-of-team-a",
        server: SERVER,
        tool: TOOL,
      });
      assert.equal(remote.answered, false); // refused by the service: fails open
    });
  }

  test("a client without the certificate the service asks for is not let in", async () => {
    const advisories = client({
      token: "secret-a",
      tls: tlsFromFiles({ rootCertificates: file("ca.pem") }),
    });
    assert.equal(await advisories.waitUntilSynced(2_000), false);
    assert.equal(advisories.advisories().length, 0);
    assert.ok(advisories.stats.connects >= 2, "not a permanent refusal: it keeps trying");
  });

  test("a client that does not trust the service's CA is not connected", async () => {
    const advisories = client({ token: "secret-a", tls: { certificateChain: undefined } });
    assert.equal(await advisories.waitUntilSynced(2_000), false);
    assert.equal(advisories.advisories().length, 0);
  });
});
