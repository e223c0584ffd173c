/**
 * The subscriber's options: defaults as named constants with their units, checked once
 * when the client is made (a bad value throws `ConfigError` naming the option and the
 * value; nothing is clamped silently).
 */
import type * as grpc from "@grpc/grpc-js";

import type { TlsConfig } from "./channel.js";
import { ConfigError } from "./errors.js";
import type { Logger } from "./log.js";
import { DEFAULT_MAX_ADVISORIES } from "./mirror.js";

export const DEFAULT_RECONNECT_INITIAL_MS = 200;
export const DEFAULT_RECONNECT_MAX_MS = 30_000;
export const DEFAULT_RECONNECT_MULTIPLIER = 2;
export const DEFAULT_RECONNECT_RANDOMIZATION = 0.5;
/** Three of the service's heartbeat intervals (advisories.heartbeat_s, 5 s by default). */
export const DEFAULT_IDLE_TIMEOUT_MS = 15_000;
/** checkRemote runs just before a tool call: a slow answer is worse than none. */
export const DEFAULT_CHECK_TIMEOUT_MS = 1_000;
const MAX_BACKOFF_EXPONENT = 64; // beyond it the delay is maxMs anyway

/**
 * Delays between subscribe attempts: `initialMs * multiplier ** attempt` up to `maxMs`,
 * each spread over [d*(1-r), d*(1+r)], so harnesses that lost the service together do not
 * come back together.
 */
export interface ReconnectPolicy {
  initialMs: number;
  maxMs: number;
  multiplier: number;
  randomization: number;
}

export const DEFAULT_RECONNECT: Readonly<ReconnectPolicy> = Object.freeze({
  initialMs: DEFAULT_RECONNECT_INITIAL_MS,
  maxMs: DEFAULT_RECONNECT_MAX_MS,
  multiplier: DEFAULT_RECONNECT_MULTIPLIER,
  randomization: DEFAULT_RECONNECT_RANDOMIZATION,
});

/** The wait after failed attempt `attempt` (0-based); `jitter` is in [0, 1). */
export function reconnectDelayMs(policy: ReconnectPolicy, attempt: number, jitter: number): number {
  const exponent = Math.min(attempt, MAX_BACKOFF_EXPONENT);
  const base = Math.min(policy.initialMs * policy.multiplier ** exponent, policy.maxMs);
  const spread = policy.randomization * base;
  return base - spread + 2 * spread * jitter;
}

export interface ClientOptions {
  /** Sent as `authorization: Bearer <token>`; maps to the tenant whose advisories you see. */
  token?: string;
  /** TLS or mutual TLS; plaintext (loopback, sidecars) without it. */
  tls?: TlsConfig;
  /** This harness's `service.name`: only its own turn-scoped advisories are sent. */
  harness?: string;
  /** Only advisories about these MCP servers; all when empty. */
  servers?: string[];
  /** For the service's logs and metrics; the harness name when empty. */
  subscriberName?: string;
  reconnect?: Partial<ReconnectPolicy>;
  /** No message for this long (heartbeats included): the stream is dead; reconnect. */
  idleTimeoutMs?: number;
  /** The deadline of `checkRemote`; past it the call is allowed. */
  checkTimeoutMs?: number;
  maxAdvisories?: number;
  /** Wall-clock milliseconds since the epoch: advisories expire in wall time. */
  clock?: () => number;
  /** In [0, 1), for the reconnect jitter. */
  random?: () => number;
  logger?: Logger;
  /** More gRPC channel options (keepalive, proxies, ...). */
  channelOptions?: grpc.ChannelOptions;
}

export interface ResolvedOptions {
  harness: string;
  servers: string[];
  subscriberName: string;
  reconnect: ReconnectPolicy;
  idleTimeoutMs: number;
  checkTimeoutMs: number;
  maxAdvisories: number;
}

export function resolveOptions(options: ClientOptions): ResolvedOptions {
  const reconnect = { ...DEFAULT_RECONNECT, ...options.reconnect };
  const positive = (name: string, value: number) => {
    if (!Number.isFinite(value) || value <= 0) {
      throw new ConfigError(`${name} must be a positive number of milliseconds, but was ${value}`);
    }
  };
  positive("reconnect.initialMs", reconnect.initialMs);
  positive("reconnect.maxMs", reconnect.maxMs);
  if (reconnect.initialMs > reconnect.maxMs) {
    throw new ConfigError(
      `reconnect.initialMs (${reconnect.initialMs}) must not exceed reconnect.maxMs (${reconnect.maxMs})`,
    );
  }
  if (!(reconnect.multiplier >= 1)) {
    throw new ConfigError(
      `reconnect.multiplier must be at least 1, but was ${reconnect.multiplier}`,
    );
  }
  if (!(reconnect.randomization >= 0 && reconnect.randomization < 1)) {
    throw new ConfigError(
      `reconnect.randomization must be in [0, 1), but was ${reconnect.randomization}`,
    );
  }
  const idleTimeoutMs = options.idleTimeoutMs ?? DEFAULT_IDLE_TIMEOUT_MS;
  const checkTimeoutMs = options.checkTimeoutMs ?? DEFAULT_CHECK_TIMEOUT_MS;
  positive("idleTimeoutMs", idleTimeoutMs);
  positive("checkTimeoutMs", checkTimeoutMs);
  const maxAdvisories = options.maxAdvisories ?? DEFAULT_MAX_ADVISORIES;
  if (!Number.isInteger(maxAdvisories) || maxAdvisories < 1) {
    throw new ConfigError(`maxAdvisories must be a positive integer, but was ${maxAdvisories}`);
  }
  const harness = options.harness ?? "";
  return {
    harness,
    servers: [...(options.servers ?? [])],
    subscriberName: options.subscriberName || harness || "harness",
    reconnect,
    idleTimeoutMs,
    checkTimeoutMs,
    maxAdvisories,
  };
}
