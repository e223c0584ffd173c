"""The retry policy, as data and pure functions (no clock, no sleeping, no I/O).

OTLP says which failures a client may retry; the sender translates each transport's
answer into a SendResult and this module decides what happens next.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

import grpc

from processor.config import RetryConfig

# OTLP: the gRPC codes a client retries. RESOURCE_EXHAUSTED only when RetryInfo came with it.
RETRYABLE_GRPC_CODES = frozenset(
    {
        grpc.StatusCode.CANCELLED,
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.ABORTED,
        grpc.StatusCode.OUT_OF_RANGE,
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.DATA_LOSS,
    }
)
# OTLP/HTTP: the statuses a client retries, honouring Retry-After.
RETRYABLE_HTTP_STATUSES = frozenset({429, 502, 503, 504})
# Permanent failures that say nothing about the data: the next hop would refuse any export
# alike (no such service, no credentials), so sending parts of one apart would only
# multiply the failures. Every other permanent failure may be about something in the data
# (INVALID_ARGUMENT; INTERNAL, which gRPC servers answer when a request does not decode;
# HTTP 400 or 413), and the forwarder splits the export to deliver what the next hop takes.
ENDPOINT_GRPC_CODES = frozenset(
    {
        grpc.StatusCode.UNIMPLEMENTED,
        grpc.StatusCode.UNAUTHENTICATED,
        grpc.StatusCode.PERMISSION_DENIED,
        grpc.StatusCode.NOT_FOUND,
    }
)
ENDPOINT_HTTP_STATUSES = frozenset({401, 403, 404, 405})


class SendOutcome(enum.Enum):
    DELIVERED = "delivered"
    RETRYABLE = "retryable"
    PERMANENT = "permanent"


@dataclass(frozen=True, slots=True)
class SendResult:
    outcome: SendOutcome
    # The next hop's own wish (gRPC RetryInfo, HTTP Retry-After), in seconds.
    retry_after_s: float | None = None
    # Delivered, but the next hop reported partial success.
    rejected_spans: int = 0
    detail: str = ""
    # PERMANENT, and perhaps because of something in the data (not ENDPOINT_*): parts of
    # the export may still be taken.
    data_refused: bool = False
    # RETRYABLE because the attempt's deadline passed: the next hop may have taken it,
    # and may need longer (deadline.py).
    timed_out: bool = False


def grpc_code_is_retryable(code: grpc.StatusCode, has_retry_info: bool) -> bool:
    if code is grpc.StatusCode.RESOURCE_EXHAUSTED:
        return has_retry_info
    return code in RETRYABLE_GRPC_CODES


def backoff_s(config: RetryConfig, attempt: int, jitter: float) -> float:
    """The delay after failed attempt number ``attempt`` (0-based).

    ``jitter`` is a uniform draw from [0, 1); it spreads the delay over
    [d*(1-r), d*(1+r)] so that consumers which failed together do not retry together.
    """
    base = min(config.initial_interval_s * config.multiplier**attempt, config.max_interval_s)
    spread = config.randomization * base
    return base - spread + 2 * spread * jitter


def next_delay_s(
    config: RetryConfig, result: SendResult, attempt: int, elapsed_s: float, jitter: float
) -> float | None:
    """How long to wait before retrying, or None to give up on the batch."""
    if result.outcome is not SendOutcome.RETRYABLE or not config.enabled:
        return None
    delay = (
        result.retry_after_s
        if result.retry_after_s is not None
        else backoff_s(config, attempt, jitter)
    )
    if config.max_elapsed_s and elapsed_s + delay > config.max_elapsed_s:
        return None
    return delay
