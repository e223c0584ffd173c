/**
 * The fingerprint, byte for byte as mcp-breaker's Python code computes it: the committed
 * vectors (made by that code, and checked to be current), then randomized values judged
 * by the Python implementation itself.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { after, describe, test } from "node:test";

import {
  argumentsDigest,
  callFingerprint,
  callFingerprints,
  canonicalJson,
  DEEP_MARKER,
  fingerprint,
  fingerprints,
  resolveServer,
} from "@mcp-breaker/client";

import { PYTHON, requireVenv, VECTORS } from "./support/paths.js";
import { GENERATOR, PythonOracle, seeded } from "./support/python.js";

interface Vector {
  server: string;
  tool: string;
  arguments_json: string;
  canonical_json: string;
  fingerprint: string;
  arguments_digest: string;
  fingerprints: string[];
}

const vectors = JSON.parse(readFileSync(join(VECTORS, "fingerprint.json"), "utf8")) as Vector[];

describe("the shared vectors", () => {
  test("are what the Python implementation makes today", () => {
    requireVenv();
    const run = spawnSync(PYTHON, [GENERATOR, "--check"], { encoding: "utf8" });
    assert.equal(run.status, 0, `${run.stdout}${run.stderr}`);
  });

  test("give the same canonical JSON, digest and fingerprints in TypeScript", () => {
    assert.ok(vectors.length >= 200);
    for (const vector of vectors) {
      const value: unknown = JSON.parse(vector.arguments_json);
      const what = `${vector.server}/${vector.tool} ${vector.arguments_json.slice(0, 80)}`;
      assert.equal(canonicalJson(value), vector.canonical_json, what);
      assert.equal(
        fingerprint(vector.server || null, vector.tool, value),
        vector.fingerprint,
        what,
      );
      assert.equal(argumentsDigest(value), vector.arguments_digest, what);
      assert.deepEqual(
        fingerprints(vector.server || null, vector.tool, value),
        vector.fingerprints,
      );
    }
  });
});

describe("randomized values, judged by the Python implementation", () => {
  const oracle = new PythonOracle();
  after(() => oracle.close());

  test("any JSON value a harness sends fingerprints the same on both sides", async () => {
    const random = seeded(19);
    for (let i = 0; i < 400; i++) {
      const value = randomValue(random, 0);
      const server = pick(random, ["playwright", "", "ünï", "s\u{1f600}"]);
      const tool = pick(random, ["browser_navigate", "a__b", "t\u0000"]);
      const python = await oracle.fingerprint(server, tool, JSON.stringify(value));
      const what = JSON.stringify(value).slice(0, 200);
      assert.equal(canonicalJson(value), python.canonical_json, what);
      assert.equal(fingerprint(server, tool, value), python.fingerprint, what);
      assert.equal(argumentsDigest(value), python.arguments_digest, what);
      assert.deepEqual(fingerprints(server, tool, value), python.fingerprints, what);
    }
  });
});

describe("what JSON.stringify would send is what is hashed", () => {
  const same = (a: unknown, b: unknown) => assert.equal(canonicalJson(a), canonicalJson(b));

  test("undefined members are dropped, and undefined items are null", () => {
    same({ a: 1, b: undefined, c: () => 1 }, { a: 1 });
    same([1, undefined, () => 1], [1, null, null]);
  });

  test("NaN and the infinities are null, as the MCP SDK sends them", () => {
    same({ x: Number.NaN, y: Infinity, z: -Infinity }, { x: null, y: null, z: null });
  });

  test("toJSON, dates and class instances are what they serialize to", () => {
    const when = new Date("2026-08-18T01:06:36.875Z");
    same({ when }, { when: "2026-08-18T01:06:36.875Z" });
    same({ box: { toJSON: () => [1, 2] } }, { box: [1, 2] });
    class Point {
      constructor(
        readonly x: number,
        readonly y: number,
      ) {}
    }
    same(new Point(2, 3), { y: 3, x: 2 });
    same(new Map([["a", 1]]), {});
  });

  test("a value JSON cannot carry has no fingerprint, never a made-up one", () => {
    const cycle: Record<string, unknown> = { a: 1 };
    cycle.self = cycle;
    assert.equal(canonicalJson(cycle), undefined);
    assert.equal(fingerprint("s", "t", cycle), undefined);
    assert.equal(fingerprint("s", "t", { n: 10n }), undefined);
    assert.equal(fingerprint("s", "t", undefined), undefined);
    assert.deepEqual(
      fingerprints("s", "t", () => 1),
      [],
    );
  });

  test("nesting past 32 levels is one marker, and a deep value without a cycle still hashes", () => {
    let deep: unknown = "bottom";
    for (let i = 0; i < 40; i++) deep = [deep];
    const canonical = canonicalJson(deep) as string;
    assert.ok(canonical.includes(JSON.stringify(DEEP_MARKER)));
    assert.ok(!canonical.includes("bottom"));
  });

  test("keys sort by code point, not by UTF-16 unit", () => {
    // U+E000 sorts before U+10000 by code point; as UTF-16 units (0xD800...) it would not.
    assert.equal(canonicalJson({ "\u{10000}": 1, "\ue000": 2 }), '{"\ue000":2,"\u{10000}":1}');
  });
});

describe("a call as the service names it", () => {
  test("the server is the one given, else the server__tool prefix", () => {
    assert.equal(resolveServer("playwright", "browser_navigate"), "playwright");
    assert.equal(resolveServer(undefined, "playwright__browser_navigate"), "playwright");
    assert.equal(resolveServer(null, "__browser_navigate"), "");
    assert.equal(resolveServer("", "browser_navigate"), "");
  });

  test("the fingerprint of a recorded call is the one of its digest", () => {
    const args = { url: "https://example.test" };
    const digest = argumentsDigest(args) as string;
    assert.equal(callFingerprint("s", "t", args), fingerprint("s", "t", { args_hash: digest }));
    assert.deepEqual(callFingerprints("s", "t", args), fingerprints("s", "t", args));
    assert.equal(callFingerprint("s", "t", undefined), undefined);
    assert.equal(callFingerprint("s", "t", null), undefined);
    assert.deepEqual(callFingerprints("s", "t", null), []);
  });
});

// -- random JSON values ---------------------------------------------------------------------

const CHARS = [
  "a", "Z", "0", " ", '"', "\\", "/", "\n", "\t", "\u0000", "\u001f", "\u007f", "é", "ß",
  "日", "\u2028", "\ufeff", "\uffff", "\ue000", "\u{1f600}", "\u{10000}", "\ud800", "\udfff",
]; // prettier-ignore
const NUMBERS = [
  0, -0, 1, -1, 2.5, 0.1, 1e-7, 1.5e-7, 0.0001, 0.00001, 1e16, 1e21, 1e22, 123456789.125,
  2 ** 53, 2 ** 53 - 1, -(2 ** 53), 1.7976931348623157e308, 5e-324, 1 / 3, 12345678901234567890,
]; // prettier-ignore

function pick<T>(random: () => number, items: readonly T[]): T {
  return items[Math.floor(random() * items.length)] as T;
}

function randomString(random: () => number): string {
  let text = "";
  const length = Math.floor(random() * 8);
  for (let i = 0; i < length; i++) text += pick(random, CHARS);
  return text;
}

function randomNumber(random: () => number): number {
  const choice = random();
  if (choice < 0.4) return pick(random, NUMBERS);
  if (choice < 0.6) return Math.floor((random() - 0.5) * 2 ** Math.floor(random() * 70));
  // Any double: random bits, skipping NaN and the infinities.
  const view = new DataView(new ArrayBuffer(8));
  view.setUint32(0, Math.floor(random() * 2 ** 32));
  view.setUint32(4, Math.floor(random() * 2 ** 32));
  const value = view.getFloat64(0);
  return Number.isFinite(value) ? value : 0.5;
}

function randomValue(random: () => number, depth: number): unknown {
  const deep = depth < 36 && random() < 0.02; // now and then past the 32-level limit
  const choice = deep ? 0.95 : random();
  if (choice < 0.1 || depth > 38) return pick(random, [null, true, false]);
  if (choice < 0.35) return randomNumber(random);
  if (choice < 0.6 || depth > 5) {
    if (!deep) return randomString(random);
  }
  if (choice < 0.8 && !deep) {
    return Array.from({ length: Math.floor(random() * 4) }, () => randomValue(random, depth + 1));
  }
  const object: Record<string, unknown> = {};
  const size = deep ? 1 : Math.floor(random() * 5);
  for (let i = 0; i < size; i++) object[randomString(random)] = randomValue(random, depth + 1);
  return object;
}
