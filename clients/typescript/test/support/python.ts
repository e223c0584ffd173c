/**
 * The Python implementation as an oracle: `test/vectors/generate.py --oracle`, one JSON
 * request a line in, one answer a line out, so randomized inputs are judged by the code
 * the service itself runs.
 */
import { type ChildProcessWithoutNullStreams, spawn } from "node:child_process";
import { join } from "node:path";
import { createInterface, type Interface } from "node:readline";

import { PYTHON, requireVenv, VECTORS } from "./paths.js";

export const GENERATOR = join(VECTORS, "generate.py");

export interface FingerprintAnswer {
  canonical_json: string;
  fingerprint: string;
  arguments_digest: string;
  fingerprints: string[];
}

export class PythonOracle {
  private readonly child: ChildProcessWithoutNullStreams;
  private readonly lines: Interface;
  private readonly waiting: Array<(line: string) => void> = [];
  private stderr = "";

  constructor() {
    requireVenv();
    this.child = spawn(PYTHON, [GENERATOR, "--oracle"], { stdio: ["pipe", "pipe", "pipe"] });
    this.child.stderr.on("data", (chunk: Buffer) => (this.stderr += chunk.toString()));
    this.lines = createInterface({ input: this.child.stdout });
    this.lines.on("line", (line) => this.waiting.shift()?.(line));
    this.child.on("exit", (code) => {
      for (const reject of this.waiting.splice(0)) reject(`{"exit": ${code}}`);
    });
  }

  async ask<T>(request: object): Promise<T> {
    const line = await new Promise<string>((resolve) => {
      this.waiting.push(resolve);
      this.child.stdin.write(`${JSON.stringify(request)}\n`);
    });
    const answer = JSON.parse(line) as T & { exit?: number };
    if (answer.exit !== undefined) throw new Error(`the Python oracle exited: ${this.stderr}`);
    return answer;
  }

  fingerprint(server: string, tool: string, argumentsJson: string): Promise<FingerprintAnswer> {
    return this.ask({ kind: "fingerprint", server, tool, arguments_json: argumentsJson });
  }

  async redact(text: string, maxChars: number): Promise<string> {
    const answer = await this.ask<{ redacted: string }>({
      kind: "redact",
      text,
      max_chars: maxChars,
    });
    return answer.redacted;
  }

  close(): void {
    this.child.stdin.end();
  }
}

/** A small seeded generator (mulberry32): the same cases on every run. */
export function seeded(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
