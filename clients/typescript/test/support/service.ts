/**
 * mcp-breaker itself, the Python service from this repository, run as `mcp-breaker serve`
 * in a child process on loopback ports chosen free, every port passed explicitly.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { setTimeout as sleep } from "node:timers/promises";

import { MCP_BREAKER, REPO_ROOT, requireVenv } from "./paths.js";
import { freePort, LOOPBACK } from "./ports.js";

const START_TIMEOUT_MS = 60_000;
const STOP_TIMEOUT_MS = 15_000;
/** Heartbeats every 0.2 s, so a silent stream is told from an idle one quickly. */
export const QUICK_HEARTBEATS = "advisories.heartbeat_s=0.2";

export interface Ports {
  otlp: number;
  metrics: number;
  advisories: number;
}

export class BreakerService {
  readonly ports: Ports;
  readonly settings: readonly string[];
  private child: ChildProcess | null = null;
  private log = "";

  private constructor(ports: Ports, settings: readonly string[]) {
    this.ports = ports;
    this.settings = settings;
  }

  /** Start a service; `settings` are `--set key=value` overrides. */
  static start(...settings: string[]): Promise<BreakerService> {
    return BreakerService.startOn({}, ...settings);
  }

  /** Start a service on the ports given, free ones for the others. */
  static async startOn(given: Partial<Ports>, ...settings: string[]): Promise<BreakerService> {
    const ports = {
      otlp: given.otlp ?? (await freePort()),
      metrics: given.metrics ?? (await freePort()),
      advisories: given.advisories ?? (await freePort()),
    };
    const service = new BreakerService(ports, [QUICK_HEARTBEATS, ...settings]);
    await service.run();
    return service;
  }

  /** host:port of the OTLP/gRPC receiver. */
  get otlpTarget(): string {
    return `${LOOPBACK}:${this.ports.otlp}`;
  }

  /** The URL the OpenTelemetry JS OTLP/gRPC exporter takes. */
  get otlpUrl(): string {
    return `http://${this.otlpTarget}`;
  }

  get advisoriesTarget(): string {
    return `${LOOPBACK}:${this.ports.advisories}`;
  }

  get running(): boolean {
    return this.child !== null && this.child.exitCode === null && this.child.signalCode === null;
  }

  get output(): string {
    return this.log;
  }

  /** Start again on the same ports (after `stop`): a new epoch, nothing in force. */
  async run(): Promise<void> {
    requireVenv();
    const { otlp, metrics, advisories } = this.ports;
    const argv = ["serve", "--log-level", "info"];
    for (const setting of [
      `receivers.grpc.endpoint=${LOOPBACK}:${otlp}`,
      "receivers.http.enabled=false",
      `telemetry.metrics_endpoint=${LOOPBACK}:${metrics}`,
      `advisories.endpoint=${LOOPBACK}:${advisories}`,
      ...this.settings,
    ]) {
      argv.push("--set", setting);
    }
    const child = spawn(MCP_BREAKER, argv, { cwd: REPO_ROOT, stdio: ["ignore", "pipe", "pipe"] });
    this.child = child;
    const keep = (chunk: Buffer) => (this.log = (this.log + chunk.toString()).slice(-20_000));
    child.stdout?.on("data", keep);
    child.stderr?.on("data", keep);
    const deadline = Date.now() + START_TIMEOUT_MS;
    while (!(await this.ready())) {
      if (!this.running) throw new Error(`mcp-breaker serve exited:\n${this.log}`);
      if (Date.now() > deadline) throw new Error(`mcp-breaker serve not ready:\n${this.log}`);
      await sleep(50);
    }
  }

  /** SIGTERM, as an orchestrator stops it; SIGKILL if it does not stop in time. */
  async stop(): Promise<void> {
    const child = this.child;
    if (child === null || !this.running) return;
    const exited = new Promise((resolve) => child.once("exit", resolve));
    child.kill("SIGTERM");
    const timer = setTimeout(() => child.kill("SIGKILL"), STOP_TIMEOUT_MS);
    await exited;
    clearTimeout(timer);
  }

  async restart(): Promise<void> {
    await this.stop();
    await this.run();
  }

  private async ready(): Promise<boolean> {
    try {
      const response = await fetch(`http://${LOOPBACK}:${this.ports.metrics}/readyz`);
      return response.status === 200;
    } catch {
      return false;
    }
  }

  async metricsText(): Promise<string> {
    const response = await fetch(`http://${LOOPBACK}:${this.ports.metrics}/metrics`);
    return response.text();
  }

  /** The sum of a metric's samples whose labels include `labels`; 0 when there is none. */
  async metric(name: string, labels: Record<string, string> = {}): Promise<number> {
    let sum = 0;
    for (const line of (await this.metricsText()).split("\n")) {
      const sample = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)/.exec(line);
      if (sample === null || sample[1] !== name) continue;
      const found = new Map<string, string>();
      for (const label of (sample[2] ?? "").matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) {
        found.set(label[1] as string, label[2] as string);
      }
      if (Object.entries(labels).every(([key, value]) => found.get(key) === value)) {
        sum += Number(sample[3]);
      }
    }
    return sum;
  }
}
