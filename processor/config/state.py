"""Where the breaker's state lives: in this process (the default), or shared on Redis.

With ``state.backend: redis`` every replica appends the events its engines consume to one
Redis Stream and applies everyone's, in stream order (``processor/state/``). These are
the settings of that: where Redis is, how to log in, how long to wait for it, and what a
replica does while it is away.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from urllib.parse import urlsplit

DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"
DEFAULT_KEY_PREFIX = "mcp-breaker"
DEFAULT_REDIS_TIMEOUT_S = 2.0  # per Redis command: connect, append, read, lease
# A replica buffers its own events while Redis is away, at most this many; past it the
# oldest are dropped (and counted): they were applied here, the others never hear of them.
DEFAULT_BUFFER_EVENTS = 100_000
# How long a starting replica waits for Redis before it starts on its own (and catches up
# when Redis comes).
DEFAULT_STARTUP_WAIT_S = 10.0
# The stream keeps the events of this long, at least: the longest window the engines look
# back over (breaker.window_s, turn_idle_s and open_max_s are an hour by default).
DEFAULT_RETAIN_S = 2 * 3600.0
DEFAULT_TICK_S = 1.0  # how often one replica marks the stream's time, for expiry

_SCHEMES = ("redis", "rediss", "unix")


class Backend(enum.StrEnum):
    MEMORY = "memory"
    REDIS = "redis"


@dataclass(frozen=True, kw_only=True)
class RedisConfig:
    """The Redis every replica shares; one Redis, or a managed service, Sentinel aside."""

    url: str = DEFAULT_REDIS_URL  # redis://, rediss:// (TLS) or unix://; no password in it
    username: str = ""
    # The password: set it here (from the environment, MCP_BREAKER_STATE_REDIS_PASSWORD), or
    # name a file that holds it (a mounted Secret). Never printed, never in an error.
    password: str = ""
    password_file: str = ""
    ca_file: str = ""  # for rediss://: the CA that signed the server's certificate
    key_prefix: str = DEFAULT_KEY_PREFIX  # several deployments can share one Redis
    timeout_s: float = DEFAULT_REDIS_TIMEOUT_S
    buffer_events: int = DEFAULT_BUFFER_EVENTS
    startup_wait_s: float = DEFAULT_STARTUP_WAIT_S
    retain_s: float = DEFAULT_RETAIN_S
    tick_s: float = DEFAULT_TICK_S

    def validate(self, prefix: str) -> list[str]:
        problems = [
            f"{prefix}.{key}: must be positive, got {getattr(self, key)}"
            for key in ("timeout_s", "buffer_events", "retain_s", "tick_s")
            if getattr(self, key) <= 0
        ]
        if self.startup_wait_s < 0:
            problems.append(
                f"{prefix}.startup_wait_s: must not be negative, got {self.startup_wait_s}"
            )
        parts = urlsplit(self.url)
        if parts.scheme not in _SCHEMES:
            problems.append(
                f"{prefix}.url: must start with redis://, rediss:// or unix://, "
                f"got {_without_password(self.url)!r}"
            )
        elif parts.password:
            problems.append(
                f"{prefix}.url: must not hold a password; set {prefix}.password or "
                f"{prefix}.password_file"
            )
        if self.password and self.password_file:
            problems.append(f"{prefix}: password and password_file go one at a time, got both")
        if self.ca_file and parts.scheme != "rediss":
            problems.append(f"{prefix}.ca_file: only for a rediss:// (TLS) url")
        if not self.key_prefix.strip() or any(c.isspace() for c in self.key_prefix):
            problems.append(f"{prefix}.key_prefix: must be a word without spaces")
        return problems


@dataclass(frozen=True, kw_only=True)
class StateConfig:
    """``memory``: one process, nothing to install. ``redis``: replicas share one breaker."""

    backend: Backend = Backend.MEMORY
    redis: RedisConfig = field(default_factory=RedisConfig)

    def validate(self, prefix: str) -> list[str]:
        if self.backend is Backend.MEMORY:
            return []
        return self.redis.validate(f"{prefix}.redis")


def retention_problems(
    state: StateConfig, *, needed_s: float, needed_by: str, prefix: str = "state"
) -> list[str]:
    """A restarting replica rebuilds its engines by replaying the stream, so the stream
    must keep (``retain_s``) at least the longest window the engines look back over
    (``needed_s``, named by ``needed_by``); a shorter one forgets open circuits and turn
    blocks across a restart. Nothing to check with the memory backend."""
    if state.backend is not Backend.REDIS:
        return []
    retain_s = state.redis.retain_s
    if retain_s <= 0 or retain_s >= needed_s:
        return []  # a non-positive retain_s is reported by RedisConfig.validate
    return [
        f"{prefix}.redis.retain_s: must be at least {needed_by} ({needed_s}), the longest "
        f"window a restarting replica replays, got {retain_s}"
    ]


def _without_password(url: str) -> str:
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.rsplit("@", 1)[1]
    user = f"{parts.username}:***@" if parts.username else "***@"
    return parts._replace(netloc=user + netloc).geturl()
