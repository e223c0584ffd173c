"""The advisory service: the port harnesses subscribe on, its streams and their bounds."""

from __future__ import annotations

from dataclasses import dataclass, field

from processor.config.checks import endpoint_problem, not_positive
from processor.config.server_tls import ServerTlsConfig

DEFAULT_ADVISORIES_ENDPOINT = "0.0.0.0:4320"
DEFAULT_HEARTBEAT_S = 5.0  # an idle stream hears from us this often
DEFAULT_SUBSCRIBER_QUEUE = 1024  # changes waiting for one subscriber before it is cut off
DEFAULT_MAX_SUBSCRIBERS = 1000
DEFAULT_MAX_SUBSCRIBERS_PER_TENANT = 250
DEFAULT_REPLAY_CHANGES = 10_000  # changes kept so a reconnecting subscriber can resume
DEFAULT_MAX_ADVISORIES = 10_000  # advisories in force at once (turn blocks included)
DEFAULT_HALF_OPEN_TTL_S = 600.0  # a half-open advisory nobody probes is dropped after this
DEFAULT_WRITE_TIMEOUT_S = 10.0  # a subscriber that takes no change for this long is cut off
DEFAULT_MAX_SUBSCRIBERS_PER_CALLER = 100  # streams per token (per peer address without tokens)
DEFAULT_RESERVED_SUBSCRIBERS_PER_TENANT = 16  # kept free for each tenant under the global cap
DEFAULT_MAX_CHECK_ARGUMENT_BYTES = 16 * 1024  # a Check's arguments, as sent


AdvisoryTlsConfig = ServerTlsConfig  # the advisory port's TLS: the same settings


@dataclass(frozen=True, kw_only=True)
class AdvisoriesConfig:
    """The advisory service: harnesses subscribe to the breaker's decisions on its own port."""

    enabled: bool = True
    endpoint: str = DEFAULT_ADVISORIES_ENDPOINT
    tls: ServerTlsConfig = field(default_factory=ServerTlsConfig)
    # Bearer token -> tenant. Empty: no authentication, everyone is the default tenant.
    tokens: dict[str, str] = field(default_factory=dict)
    # Tokens allowed to force circuits open or closed. Empty: admin calls are refused.
    admin_tokens: tuple[str, ...] = ()
    heartbeat_s: float = DEFAULT_HEARTBEAT_S
    subscriber_queue: int = DEFAULT_SUBSCRIBER_QUEUE
    max_subscribers: int = DEFAULT_MAX_SUBSCRIBERS
    # One tenant's harnesses cannot take every stream the service will hold.
    max_subscribers_per_tenant: int = DEFAULT_MAX_SUBSCRIBERS_PER_TENANT
    # One token (one peer address, without tokens) cannot take its tenant's every stream.
    max_subscribers_per_caller: int = DEFAULT_MAX_SUBSCRIBERS_PER_CALLER
    # Under max_subscribers, this many streams stay free for each tenant of the token map
    # until it uses them: tenants at their own cap cannot lock another tenant out.
    reserved_subscribers_per_tenant: int = DEFAULT_RESERVED_SUBSCRIBERS_PER_TENANT
    # A subscriber that does not take a change for this long (a frozen or stalled client)
    # is cut off with RESOURCE_EXHAUSTED, whatever its queue holds.
    write_timeout_s: float = DEFAULT_WRITE_TIMEOUT_S
    max_check_argument_bytes: int = DEFAULT_MAX_CHECK_ARGUMENT_BYTES
    replay_changes: int = DEFAULT_REPLAY_CHANGES
    max_advisories: int = DEFAULT_MAX_ADVISORIES
    half_open_ttl_s: float = DEFAULT_HALF_OPEN_TTL_S

    def validate(self, prefix: str) -> list[str]:
        problems = not_positive(
            prefix,
            self,
            "heartbeat_s",
            "subscriber_queue",
            "max_subscribers",
            "max_subscribers_per_tenant",
            "max_subscribers_per_caller",
            "write_timeout_s",
            "max_check_argument_bytes",
            "replay_changes",
            "max_advisories",
            "half_open_ttl_s",
        )
        if self.reserved_subscribers_per_tenant < 0:
            problems.append(
                f"{prefix}.reserved_subscribers_per_tenant: must be 0 or more, "
                f"got {self.reserved_subscribers_per_tenant}"
            )
        endpoint = endpoint_problem(f"{prefix}.endpoint", self.endpoint)
        if endpoint:
            problems.append(endpoint)
        if any(not token.strip() for token in (*self.tokens, *self.admin_tokens)):
            problems.append(f"{prefix}.tokens: a token must not be empty")
        return problems + self.tls.validate(f"{prefix}.tls")
