/**
 * `AdvisoryClient`: a harness's subscription to mcp-breaker's advisories, kept in a mirror.
 *
 *     service ──Subscribe stream──▶ AdvisoryClient ──▶ Mirror ◀── check()   (local, µs)
 *     service ◀──────── Check ───────────────────────────────── checkRemote()   (probes)
 *
 * One `Subscribe` stream is held open and what it says is applied to a `Mirror`
 * (snapshot, then changes). `check` answers from the mirror without touching the network,
 * so it can run before every tool call; `checkRemote` asks the service's `Check` (for a
 * half-open circuit's probe permit) with a short deadline and, when the service cannot
 * answer, *fails open*: the call is allowed. mcp-breaker must never be the reason a
 * working tool cannot be called.
 *
 * The stream, as `docs/advisories.md` asks of a subscriber (and as the Python client in
 * `clients/python/mcp_breaker_client/subscriber.py` does):
 *
 * - **Resume**: after a broken stream it subscribes again with the last epoch and seq it
 *   received; the service sends exactly the changes missed, or a snapshot with `resync`
 *   set (it restarted, or no longer holds them), which replaces the mirror.
 * - **Cut off** (`RESOURCE_EXHAUSTED` after the stream delivered: it fell behind):
 *   subscribe again *without* resuming, for a fresh snapshot; replaying the backlog it
 *   could not keep up with would only cut it off again.
 * - **Silence**: no message (heartbeats included) for `idleTimeoutMs` means the stream is
 *   dead though the socket may not know it; a watchdog cancels it and it reconnects.
 * - **Backoff**: exponential with jitter between attempts, reset once a stream delivers;
 *   gRPC's own reconnect backoff is held to the same bounds.
 * - **Stop** on `UNAUTHENTICATED`, `PERMISSION_DENIED`, `INVALID_ARGUMENT` or
 *   `UNIMPLEMENTED`: retrying cannot help until a person changes the token or the
 *   configuration. `failure` says why; the mirror keeps what it had (and expires it).
 *
 * While disconnected, `check` keeps answering from the mirror as it stood, with expiry
 * applied, and `synced` is false.
 */
import * as grpc from "@grpc/grpc-js";
import { EventEmitter } from "node:events";
import { performance } from "node:perf_hooks";

import type { Advisory } from "./advisory.js";
import { callFingerprint, resolveServer } from "./calls.js";
import { bearerMetadata, channelSecurity } from "./channel.js";
import { loadContract } from "./contract.js";
import { consoleLogger, type Logger } from "./log.js";
import { CheckResult, Decision, Mirror, type StreamMessage, type ToolCall } from "./mirror.js";
import {
  type ClientOptions,
  reconnectDelayMs,
  type ResolvedOptions,
  resolveOptions,
} from "./options.js";
import {
  fromCheckResponse,
  toStreamMessage,
  type WireCheckResponse,
  type WireSubscribeResponse,
} from "./wire.js";

/** After these, subscribing again cannot help until a person changes something. */
export const PERMANENT_CODES: ReadonlySet<grpc.status> = new Set([
  grpc.status.UNAUTHENTICATED,
  grpc.status.PERMISSION_DENIED,
  grpc.status.INVALID_ARGUMENT,
  grpc.status.UNIMPLEMENTED,
]);

export interface SubscriberStats {
  connects: number; // streams opened
  snapshots: number;
  resyncs: number; // snapshots answering a resume the service could not honour
  resumed: number; // streams that resumed with exactly the changes missed
  changes: number;
  heartbeats: number;
  broken: number; // streams that ended with an error (any code)
  cutOff: number; // ended with RESOURCE_EXHAUSTED after delivering: fell behind
  stalled: number; // cancelled by the watchdog: silent for idleTimeoutMs
  remoteChecks: number;
  remoteChecksFailedOpen: number; // the service did not answer: allowed
}

export interface AdvisoryClientEvents {
  /** A snapshot part or a change was applied to the mirror. */
  update: [message: StreamMessage];
  /** A stream is up and the mirror is as current as the service. */
  synced: [];
  /** The stream ended; the client subscribes again unless it was closed or refused. */
  disconnected: [reason: string];
  /** The service refused the subscription for good (a bad token, ...). */
  failure: [reason: string];
  /** close() was called. */
  closed: [];
}

type AdvisoriesStub = grpc.Client & {
  Subscribe(
    request: object,
    metadata: grpc.Metadata,
  ): grpc.ClientReadableStream<WireSubscribeResponse>;
  Check(
    request: object,
    metadata: grpc.Metadata,
    options: grpc.CallOptions,
    callback: (error: grpc.ServiceError | null, response?: WireCheckResponse) => void,
  ): grpc.ClientUnaryCall;
};

/** Subscribes to the advisory port at `target` (host:port); see the module comment. */
export function subscribe(target: string, options: ClientOptions = {}): AdvisoryClient {
  return new AdvisoryClient(target, options);
}

export class AdvisoryClient extends EventEmitter<AdvisoryClientEvents> {
  readonly target: string;
  readonly options: ResolvedOptions;
  readonly stats: SubscriberStats = {
    connects: 0, snapshots: 0, resyncs: 0, resumed: 0, changes: 0, heartbeats: 0,
    broken: 0, cutOff: 0, stalled: 0, remoteChecks: 0, remoteChecksFailedOpen: 0,
  }; // prettier-ignore
  private readonly clock: () => number;
  private readonly random: () => number;
  private readonly log: Logger;
  private readonly metadata: grpc.Metadata;
  private readonly stub: AdvisoriesStub;
  private readonly mirror: Mirror;
  private call: grpc.ClientReadableStream<WireSubscribeResponse> | null = null;
  private lastMessageAt = 0; // performance.now() of the last message of the stream
  private attempt = 0;
  private isSynced = false;
  private failureReason = "";
  private stopping = false;
  private retryTimer: NodeJS.Timeout | undefined;
  private readonly watchdog: NodeJS.Timeout;

  constructor(target: string, options: ClientOptions = {}) {
    super();
    this.target = target;
    this.options = resolveOptions(options);
    this.clock = options.clock ?? Date.now;
    this.random = options.random ?? Math.random;
    this.log = options.logger ?? consoleLogger;
    this.metadata = bearerMetadata(options.token);
    this.mirror = new Mirror({ maxAdvisories: this.options.maxAdvisories });
    const { credentials, options: security } = channelSecurity(options.tls);
    const { reconnect } = this.options;
    const { Advisories } = loadContract();
    this.stub = new Advisories(target, credentials, {
      // gRPC's own reconnect backoff (1 s growing to 120 s by default) would otherwise
      // keep a channel idle long after the service is back.
      "grpc.initial_reconnect_backoff_ms": Math.round(reconnect.initialMs),
      "grpc.max_reconnect_backoff_ms": Math.round(reconnect.maxMs),
      ...security,
      ...options.channelOptions,
    }) as unknown as AdvisoriesStub;
    const every = this.options.idleTimeoutMs / 4;
    this.watchdog = setInterval(() => this.watch(), every).unref();
    this.connect(false);
  }

  // -- what a harness calls ----------------------------------------------------------------

  /** May this call go now? From the local mirror; no network. */
  check(call: ToolCall): CheckResult {
    return this.mirror.check(call, this.clock());
  }

  /**
   * Ask the service's `Check` (for a probe permit); ALLOW with `answered: false` when it
   * cannot answer within `timeoutMs` (`checkTimeoutMs` by default).
   */
  checkRemote(call: ToolCall, options: { timeoutMs?: number } = {}): Promise<CheckResult> {
    if (this.stopping) return Promise.resolve(new CheckResult(Decision.ALLOW, { answered: false }));
    const server = resolveServer(call.server, call.tool);
    const fingerprint = call.fingerprint ?? callFingerprint(server, call.tool, call.arguments);
    const request = {
      turn: call.turn,
      server,
      tool: call.tool,
      fingerprint: fingerprint ?? "",
      harness: this.options.harness,
    };
    const deadline = Date.now() + (options.timeoutMs ?? this.options.checkTimeoutMs);
    return new Promise((resolve) => {
      this.stub.Check(request, this.metadata, { deadline }, (error, response) => {
        this.stats.remoteChecks++;
        if (error !== null || response === undefined) {
          this.stats.remoteChecksFailedOpen++;
          this.log.warn(
            `advisories: Check at ${this.target} failed (${codeName(error?.code)}); allowing the call`,
          );
          resolve(new CheckResult(Decision.ALLOW, { answered: false }));
          return;
        }
        resolve(fromCheckResponse(response));
      });
    });
  }

  /**
   * The turn's roster-collapse advisory: re-list the tools before the next model request
   * (its `message` says so); null when the turn's roster is fine.
   */
  rosterCollapse(turn: string): Advisory | null {
    return this.mirror.rosterCollapse(turn, this.clock());
  }

  /** A stream is up and has delivered: the mirror is as current as the service. */
  get synced(): boolean {
    return this.isSynced;
  }

  /** Why the client stopped subscribing for good (a bad token, ...); "" otherwise. */
  get failure(): string {
    return this.failureReason;
  }

  /** True once synced; false if `timeoutMs` passes first or the client stops for good. */
  waitUntilSynced(timeoutMs: number): Promise<boolean> {
    if (this.isSynced) return Promise.resolve(true);
    if (this.failureReason || this.stopping) return Promise.resolve(false);
    return new Promise((resolve) => {
      const done = (value: boolean) => {
        clearTimeout(timer);
        this.off("synced", onSynced);
        this.off("failure", onStop);
        this.off("closed", onStop);
        resolve(value);
      };
      const onSynced = () => done(true);
      const onStop = () => done(false);
      const timer = setTimeout(() => done(this.isSynced), timeoutMs);
      this.on("synced", onSynced);
      this.on("failure", onStop);
      this.on("closed", onStop);
    });
  }

  /** Every advisory the mirror holds (a new array; do not modify the items). */
  advisories(): Advisory[] {
    return this.mirror.advisories();
  }

  /** The epoch and seq the next subscription resumes after. */
  get position(): { epoch: string; seq: bigint } {
    return { epoch: this.mirror.epoch, seq: this.mirror.lastSeq };
  }

  /** Stop subscribing; idempotent. */
  close(): void {
    if (this.stopping) return;
    this.stopping = true;
    clearTimeout(this.retryTimer);
    clearInterval(this.watchdog);
    const call = this.call;
    this.call = null;
    call?.cancel();
    this.stub.close();
    if (this.isSynced) {
      this.isSynced = false;
      this.emit("disconnected", "closed");
    }
    this.emit("closed");
  }

  // -- the stream ------------------------------------------------------------------------

  /** Open one stream; `fresh`: without resuming (after a cut-off, for a fresh snapshot). */
  private connect(fresh: boolean): void {
    if (this.stopping) return;
    const resuming = this.mirror.epoch !== "" && !fresh;
    const request = {
      servers: this.options.servers,
      harness: this.options.harness,
      subscriberName: this.options.subscriberName,
      ...(resuming
        ? { resumeEpoch: this.mirror.epoch, resumeAfterSeq: this.mirror.lastSeq.toString() }
        : {}),
    };
    const call = this.stub.Subscribe(request, this.metadata);
    this.call = call;
    this.lastMessageAt = performance.now();
    this.stats.connects++;
    let delivered = false;
    let ended = false;
    const end = (code: grpc.status, details: string) => {
      if (ended) return;
      ended = true;
      this.ended(call, delivered, code, details);
    };
    call.on("data", (wire: WireSubscribeResponse) => {
      if (this.call !== call) return; // a stream given up on (watchdog, close)
      const message = toStreamMessage(wire);
      this.mirror.applyMessage(message);
      this.count(message, !delivered, resuming);
      delivered = true;
      this.lastMessageAt = performance.now();
      if (message.kind === "snapshot" || message.kind === "change") this.emit("update", message);
      if (!this.isSynced && this.mirror.complete) {
        this.isSynced = true;
        this.emit("synced");
      }
    });
    call.on("error", (error: grpc.ServiceError) => end(error.code, error.details));
    call.on("status", (status: grpc.StatusObject) => end(status.code, status.details));
  }

  private ended(
    call: grpc.ClientReadableStream<WireSubscribeResponse>,
    delivered: boolean,
    code: grpc.status,
    details: string,
  ): void {
    if (this.call === call) this.call = null;
    if (code !== grpc.status.OK) this.stats.broken++;
    const reason = code === grpc.status.OK ? "closed by the service" : codeName(code);
    if (this.isSynced) {
      this.isSynced = false;
      this.emit("disconnected", reason);
    }
    if (this.stopping) return;
    if (PERMANENT_CODES.has(code)) {
      this.failureReason = `${codeName(code)}: ${details}`;
      this.log.error(
        `advisories: ${this.target} refused the subscription (${this.failureReason}); not retrying`,
      );
      clearInterval(this.watchdog);
      this.emit("failure", this.failureReason);
      return;
    }
    const fresh = code === grpc.status.RESOURCE_EXHAUSTED && delivered;
    if (fresh) {
      this.stats.cutOff++;
      this.log.warn("advisories: fell behind and was cut off; resubscribing");
    }
    if (delivered) this.attempt = 0; // it worked until now: start the backoff over
    const delayMs = reconnectDelayMs(this.options.reconnect, this.attempt, this.random());
    this.attempt++;
    const said = `advisories: stream to ${this.target} ended (${reason}); subscribing again in ${(delayMs / 1000).toFixed(2)}s`;
    if (this.attempt === 1) this.log.warn(said);
    else this.log.debug(said);
    this.retryTimer = setTimeout(() => this.connect(fresh), delayMs);
  }

  private count(message: StreamMessage, first: boolean, resuming: boolean): void {
    const stats = this.stats;
    if (message.kind === "snapshot") {
      stats.snapshots++;
      if (message.snapshot.resync) {
        stats.resyncs++;
        this.log.info("advisories: the service could not resume the stream; resynced");
      }
    } else if (message.kind === "change") {
      stats.changes++;
    } else if (message.kind === "heartbeat") {
      stats.heartbeats++;
    }
    if (first && resuming && message.kind !== "snapshot") stats.resumed++;
  }

  private watch(): void {
    const call = this.call;
    if (call === null || performance.now() - this.lastMessageAt <= this.options.idleTimeoutMs) {
      return;
    }
    this.stats.stalled++;
    const seconds = Math.round(this.options.idleTimeoutMs / 1000);
    this.log.warn(`advisories: no message from ${this.target} for ${seconds}s; reconnecting`);
    call.cancel(); // ends with CANCELLED, and the stream is opened again
  }
}

function codeName(code: grpc.status | undefined): string {
  return code === undefined ? "no status" : (grpc.status[code] ?? `code ${code}`);
}
