"""Self-telemetry (metrics and health on one port) and the service's own logs."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from processor.config.checks import endpoint_problem, not_positive

DEFAULT_METRICS_ENDPOINT = "0.0.0.0:9464"
DEFAULT_READY_PROBE_TIMEOUT_S = 1.0
DEFAULT_MAX_SERIES_PER_METRIC = 2000  # label sets per metric before the overflow series
DEFAULT_SERIES_IDLE_S = 3600.0  # a series not updated for an hour is dropped
DEFAULT_LOG_LEVEL = "info"


class LogLevel(enum.StrEnum):
    DEBUG = "debug"
    INFO = "info"
    WARNING = "warning"
    ERROR = "error"


@dataclass(frozen=True, kw_only=True)
class TelemetryConfig:
    """Self-telemetry: Prometheus /metrics, /healthz and /readyz on one port."""

    enabled: bool = True
    metrics_endpoint: str = DEFAULT_METRICS_ENDPOINT
    ready_probe_timeout_s: float = DEFAULT_READY_PROBE_TIMEOUT_S
    # Tool, server and harness names come from senders: each metric keyed by them holds
    # at most this many series, then folds new ones into an overflow series.
    max_series_per_metric: int = DEFAULT_MAX_SERIES_PER_METRIC
    series_idle_s: float = DEFAULT_SERIES_IDLE_S
    exemplars: bool = True  # trace ids on the dead-call counter and the duration histogram

    def validate(self, prefix: str) -> list[str]:
        problems = not_positive(
            prefix, self, "ready_probe_timeout_s", "max_series_per_metric", "series_idle_s"
        )
        endpoint = endpoint_problem(f"{prefix}.metrics_endpoint", self.metrics_endpoint)
        return [endpoint, *problems] if endpoint else problems


@dataclass(frozen=True, kw_only=True)
class LogConfig:
    level: LogLevel = LogLevel.INFO

    def validate(self, prefix: str) -> list[str]:
        return []
