"""The whole service (``mcp-breaker serve``): every component's config, and the checks
that span components (tokens, workers, the state stream's retention).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from processor.config.advisories import AdvisoriesConfig
from processor.config.auth import AuthConfig
from processor.config.breaker import BreakerConfig
from processor.config.checks import not_positive
from processor.config.classify import ClassifyConfig
from processor.config.forward import ForwardConfig, QueueStorage
from processor.config.receivers import ReceiverAuth, ReceiversConfig
from processor.config.roster import RosterConfig
from processor.config.state import Backend, StateConfig, retention_problems
from processor.config.telemetry import LogConfig, TelemetryConfig


@dataclass(frozen=True, kw_only=True)
class ServerConfig:
    """The process: how many workers share the receiver ports on this machine."""

    # Processes that each run the whole hop, sharing the receiver and advisory ports
    # (SO_REUSEPORT: the kernel spreads connections over them) and one telemetry port
    # whose metrics are their sum. They share breaker state the way replicas do, so more
    # than one needs state.backend: redis.
    workers: int = 1

    def validate(self, prefix: str) -> list[str]:
        return not_positive(prefix, self, "workers")


@dataclass(frozen=True, kw_only=True)
class ServiceConfig:
    """Everything ``mcp-breaker serve`` reads. Empty input gives exactly these defaults."""

    server: ServerConfig = field(default_factory=ServerConfig)
    receivers: ReceiversConfig = field(default_factory=ReceiversConfig)
    forward: ForwardConfig = field(default_factory=ForwardConfig)
    classify: ClassifyConfig = field(default_factory=ClassifyConfig)
    breaker: BreakerConfig = field(default_factory=BreakerConfig)
    roster: RosterConfig = field(default_factory=RosterConfig)
    telemetry: TelemetryConfig = field(default_factory=TelemetryConfig)
    advisories: AdvisoriesConfig = field(default_factory=AdvisoriesConfig)
    auth: AuthConfig = field(default_factory=AuthConfig)
    state: StateConfig = field(default_factory=StateConfig)
    log: LogConfig = field(default_factory=LogConfig)

    def validate(self) -> list[str]:
        return (
            self.server.validate("server")
            + self.receivers.validate("receivers")
            + self.forward.validate("forward")
            + self.classify.validate("classify")
            + self.breaker.validate("breaker")
            + self.roster.validate("roster")
            + self.telemetry.validate("telemetry")
            + self.advisories.validate("advisories")
            + self.auth.validate("auth")
            + self.state.validate("state")
            + self.log.validate("log")
            + self._token_problems()
            + self._worker_problems()
            + retention_problems(
                self.state,
                needed_s=max(
                    self.breaker.window_s,
                    self.breaker.turn_idle_s,
                    self.breaker.open_max_s,
                    self.roster.turn_idle_s,
                ),
                needed_by="the longest of breaker.window_s, breaker.turn_idle_s, "
                "breaker.open_max_s and roster.turn_idle_s",
            )
        )

    def _worker_problems(self) -> list[str]:
        workers = self.server.workers
        if workers <= 1:
            return []
        problems = []
        if self.state.backend is Backend.MEMORY:
            problems.append(
                f"server.workers: {workers} workers need state.backend: redis: each worker "
                "is a process with a breaker of its own, and with the memory backend each "
                "would judge only the connections it happens to get. Set state.backend: "
                "redis and state.redis.url (docs/scaling.md), or run one worker"
            )
        if self.forward.queue.storage is QueueStorage.DISK:
            problems.append(
                f"server.workers: {workers} workers cannot share one disk queue "
                "(forward.queue.storage: disk): run one worker per queue directory"
            )
        return problems

    def _token_problems(self) -> list[str]:
        if self.receivers.auth is not ReceiverAuth.TOKEN:
            return []
        if self.advisories.tokens or self.auth.tokens_file:
            return []
        return ["receivers.auth: token needs tokens: set advisories.tokens or auth.tokens_file"]
