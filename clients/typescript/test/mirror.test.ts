/**
 * The mirror as plain data: what the stream says, what a call is told. The clock is passed
 * in, so expiry is tested without waiting.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";

import {
  type Advisory,
  callFingerprint,
  ConfigError,
  Decision,
  fingerprint,
  Mirror,
  type StreamMessage,
} from "@mcp-breaker/client";

const NOW_MS = 1_787_011_200_000; // 2026-08-18, the seed's night
const NS_PER_MS = 1_000_000n;
const ARGS = { url: "https://artifacts.example.test/run/1" };

function advisory(fields: Partial<Advisory>): Advisory {
  return {
    id: "id", scope: "SCOPE_TURN_TOOL", key: "", state: "STATE_TURN_BLOCKED",
    server: "playwright", tool: "browser_navigate", turn: "turn-1", fingerprint: "",
    cause: "transport", message: "`browser_navigate` is unavailable", retryAfterSeconds: 0,
    expiresUnixNano: 0n, evidence: null, enforced: true, tenant: "", harness: "h",
    ...fields,
  }; // prettier-ignore
}

const call = { turn: "turn-1", server: "playwright", tool: "browser_navigate", arguments: ARGS };

function mirrorWith(...advisories: Advisory[]): Mirror {
  const mirror = new Mirror();
  mirror.replace("epoch-1", 1n, advisories);
  return mirror;
}

function change(seq: bigint, advisory: Advisory): StreamMessage {
  return { kind: "change", epoch: "epoch-1", seq, change: advisory };
}

function snapshot(
  seq: bigint,
  advisories: Advisory[],
  flags: Partial<Record<"first" | "more" | "resync", boolean>> = {},
): StreamMessage {
  const part = { advisories, resync: false, more: false, first: false, ...flags };
  return { kind: "snapshot", epoch: "epoch-1", seq, snapshot: part };
}

describe("matching a call", () => {
  test("an empty mirror allows everything", () => {
    assert.equal(new Mirror().check(call, NOW_MS).decision, Decision.ALLOW);
  });

  test("each scope refuses exactly the calls the contract says", () => {
    const cases: Array<[Partial<Advisory>, boolean, object]> = [
      [{ scope: "SCOPE_SERVER", tool: "" }, true, { tool: "other_tool", turn: "turn-9" }],
      [{ scope: "SCOPE_SERVER", tool: "" }, false, { server: "other" }],
      [{ scope: "SCOPE_TOOL" }, true, { turn: "turn-9" }],
      [{ scope: "SCOPE_TOOL" }, false, { tool: "other_tool" }],
      [{ scope: "SCOPE_TURN_TOOL" }, true, {}],
      [{ scope: "SCOPE_TURN_TOOL" }, false, { turn: "turn-2" }],
      [{ scope: "SCOPE_TURN_CALL", fingerprint: callFingerprint("playwright", "browser_navigate", ARGS) }, true, {}],
      [{ scope: "SCOPE_TURN_CALL", fingerprint: fingerprint("playwright", "browser_navigate", ARGS) }, true, {}],
      [{ scope: "SCOPE_TURN_CALL", fingerprint: callFingerprint("playwright", "browser_navigate", ARGS) }, false, { arguments: { url: "corrected" } }],
    ]; // prettier-ignore
    for (const [fields, refused, differs] of cases) {
      const mirror = mirrorWith(advisory({ state: "STATE_OPEN", ...fields }));
      const result = mirror.check({ ...call, ...differs }, NOW_MS);
      assert.equal(result.refused, refused, JSON.stringify({ fields, differs }));
      if (refused) assert.equal(result.advisory?.id, "id");
    }
  });

  test("the server comes from the server__tool prefix when the call names none", () => {
    const mirror = mirrorWith(advisory({ scope: "SCOPE_SERVER", tool: "" }));
    assert.ok(mirror.check({ turn: "t", tool: "playwright__browser_navigate" }, NOW_MS).refused);
    assert.ok(!mirror.check({ turn: "t", tool: "browser_navigate" }, NOW_MS).refused);
  });

  test("a fingerprint given instead of the arguments is used as it is", () => {
    const mirror = mirrorWith(advisory({ scope: "SCOPE_TURN_CALL", fingerprint: "f".repeat(32) }));
    assert.ok(mirror.check({ ...call, fingerprint: "f".repeat(32) }, NOW_MS).refused);
    assert.ok(!mirror.check(call, NOW_MS).refused);
  });

  test("shadow mode allows, with the advisory that would have refused", () => {
    const result = mirrorWith(advisory({ enforced: false })).check(call, NOW_MS);
    assert.equal(result.decision, Decision.ALLOW);
    assert.ok(result.shadow && result.advisory?.id === "id");
  });

  test("half-open asks for a probe; a refusal elsewhere wins over it", () => {
    const halfOpen = advisory({ id: "circuit", scope: "SCOPE_TOOL", state: "STATE_HALF_OPEN" });
    assert.equal(mirrorWith(halfOpen).check(call, NOW_MS).decision, Decision.PROBE_NEEDED);
    const both = mirrorWith(halfOpen, advisory({ id: "block" }));
    assert.equal(both.check(call, NOW_MS).advisory?.id, "block");
  });

  test("closed, forced closed and unspecified let calls go", () => {
    for (const state of ["STATE_FORCED_CLOSED", "STATE_UNSPECIFIED"] as const) {
      assert.ok(!mirrorWith(advisory({ state })).check(call, NOW_MS).refused, state);
    }
    assert.equal(mirrorWith(advisory({ state: "STATE_CLOSED" })).size, 0);
  });

  test("a state this version does not know refuses; a scope it does not know matches nothing", () => {
    const unknownState = mirrorWith(advisory({ scope: "SCOPE_TOOL", state: 42 }));
    assert.ok(unknownState.check(call, NOW_MS).refused);
    const unknownScope = mirrorWith(advisory({ scope: 99, state: "STATE_OPEN" }));
    assert.equal(unknownScope.size, 1); // held, and still replaced or removed by its id
    assert.ok(!unknownScope.check(call, NOW_MS).refused);
  });

  test("a roster collapse is told apart and refuses no call", () => {
    const roster = advisory({
      id: "roster",
      scope: "SCOPE_TURN_ROSTER",
      state: "STATE_ROSTER_COLLAPSED",
      tool: "",
    });
    const mirror = mirrorWith(roster);
    assert.equal(mirror.rosterCollapse("turn-1", NOW_MS)?.id, "roster");
    assert.equal(mirror.rosterCollapse("turn-2", NOW_MS), null);
    assert.ok(!mirror.check(call, NOW_MS).refused);
  });
});

describe("expiry", () => {
  const at = (ms: number) => BigInt(ms) * NS_PER_MS;

  test("an expired turn block no longer refuses, whatever the stream says", () => {
    const mirror = mirrorWith(advisory({ expiresUnixNano: at(NOW_MS + 1000) }));
    assert.ok(mirror.check(call, NOW_MS).refused);
    assert.ok(!mirror.check(call, NOW_MS + 1000).refused);
  });

  test("an open circuit past its open period reads as half-open, not as allowed", () => {
    const circuit = advisory({
      scope: "SCOPE_SERVER",
      tool: "",
      state: "STATE_OPEN",
      expiresUnixNano: at(NOW_MS),
    });
    const mirror = mirrorWith(circuit);
    assert.ok(mirror.check(call, NOW_MS - 1).refused);
    assert.equal(mirror.check(call, NOW_MS + 1).decision, Decision.PROBE_NEEDED);
  });
});

describe("what the stream says", () => {
  test("a change replaces by id, and a closed change removes", () => {
    const mirror = mirrorWith(advisory({}));
    mirror.applyMessage(change(2n, advisory({ message: "new" })));
    assert.equal(mirror.size, 1);
    assert.equal(mirror.get("id")?.message, "new");
    mirror.applyMessage(change(3n, advisory({ state: "STATE_CLOSED" })));
    assert.equal(mirror.size, 0);
    assert.equal(mirror.lastSeq, 3n);
    assert.ok(!mirror.check(call, NOW_MS).refused);
  });

  test("a snapshot in parts: the first replaces, the rest add, whole only at the last", () => {
    const mirror = mirrorWith(advisory({ id: "stale" }));
    mirror.applyMessage(snapshot(7n, [advisory({ id: "a" })], { first: true, more: true }));
    assert.ok(!mirror.complete);
    assert.equal(mirror.epoch, ""); // a stream broken between parts must start over
    mirror.applyMessage(snapshot(7n, [advisory({ id: "b", turn: "turn-2" })], { more: false }));
    assert.ok(mirror.complete);
    assert.deepEqual(
      mirror.advisories().map((a) => a.id),
      ["a", "b"],
    );
    assert.equal(mirror.epoch, "epoch-1");
    assert.equal(mirror.lastSeq, 7n);
  });

  test("a heartbeat does not move the position", () => {
    const mirror = mirrorWith();
    mirror.applyMessage({ kind: "heartbeat", epoch: "epoch-1", seq: 99n, atUnixNano: 0n });
    assert.equal(mirror.lastSeq, 1n);
  });

  test("the mirror is bounded: the oldest advisory goes first", () => {
    const mirror = new Mirror({ maxAdvisories: 2 });
    for (const turn of ["turn-1", "turn-2", "turn-3"]) {
      mirror.apply("e", 1n, advisory({ id: turn, turn }));
    }
    assert.deepEqual(
      mirror.advisories().map((a) => a.id),
      ["turn-2", "turn-3"],
    );
    assert.equal(mirror.evicted, 1);
    assert.ok(!mirror.check(call, NOW_MS).refused); // turn-1's block went with it
    assert.throws(() => new Mirror({ maxAdvisories: 0 }), ConfigError);
  });

  test("names that share separators cannot reach each other's index", () => {
    const mirror = mirrorWith(advisory({ server: "a|1:b", tool: "c" }));
    assert.ok(!mirror.check({ turn: "turn-1", server: "a", tool: "b|1:c" }, NOW_MS).refused);
  });
});
