"""The retry policy: which failures are retried, and after how long."""

from __future__ import annotations

import grpc
import pytest
from hypothesis import given
from hypothesis import strategies as st

from processor.config import RetryConfig
from processor.forward.retry import (
    SendOutcome,
    SendResult,
    backoff_s,
    grpc_code_is_retryable,
    next_delay_s,
)

POLICY = RetryConfig(
    initial_interval_s=1.0, max_interval_s=8.0, multiplier=2.0, randomization=0.5, max_elapsed_s=60
)
RETRYABLE = SendResult(SendOutcome.RETRYABLE)


@pytest.mark.parametrize(
    ("code", "with_retry_info", "retryable"),
    [
        (grpc.StatusCode.UNAVAILABLE, False, True),
        (grpc.StatusCode.CANCELLED, False, True),
        (grpc.StatusCode.DEADLINE_EXCEEDED, False, True),
        (grpc.StatusCode.ABORTED, False, True),
        (grpc.StatusCode.OUT_OF_RANGE, False, True),
        (grpc.StatusCode.DATA_LOSS, False, True),
        (grpc.StatusCode.RESOURCE_EXHAUSTED, False, False),
        (grpc.StatusCode.RESOURCE_EXHAUSTED, True, True),
        (grpc.StatusCode.INVALID_ARGUMENT, False, False),
        (grpc.StatusCode.UNKNOWN, False, False),
        (grpc.StatusCode.INTERNAL, False, False),
        (grpc.StatusCode.UNAUTHENTICATED, False, False),
        (grpc.StatusCode.PERMISSION_DENIED, False, False),
        (grpc.StatusCode.UNIMPLEMENTED, False, False),
    ],
    ids=lambda v: v.name if isinstance(v, grpc.StatusCode) else str(v),
)
def test_otlp_retryable_codes(
    code: grpc.StatusCode, with_retry_info: bool, retryable: bool
) -> None:
    assert grpc_code_is_retryable(code, with_retry_info) is retryable


def test_backoff_grows_by_the_multiplier_up_to_the_cap() -> None:
    middle = 0.5  # a jitter draw of 0.5 gives the un-jittered delay
    assert [backoff_s(POLICY, n, middle) for n in range(6)] == [1, 2, 4, 8, 8, 8]


@given(attempt=st.integers(0, 50), jitter=st.floats(0, 1, exclude_max=True))
def test_jitter_stays_within_the_randomization_band(attempt: int, jitter: float) -> None:
    base = min(1.0 * 2.0**attempt, 8.0)
    assert base * 0.5 <= backoff_s(POLICY, attempt, jitter) <= base * 1.5


def test_the_next_hops_retry_info_replaces_the_backoff() -> None:
    asked = SendResult(SendOutcome.RETRYABLE, retry_after_s=7.25)
    assert next_delay_s(POLICY, asked, attempt=4, elapsed_s=0, jitter=0.9) == 7.25


def test_permanent_failures_are_not_retried() -> None:
    assert next_delay_s(POLICY, SendResult(SendOutcome.PERMANENT), 0, 0, 0.5) is None


def test_gives_up_when_the_next_wait_would_pass_max_elapsed() -> None:
    assert next_delay_s(POLICY, RETRYABLE, attempt=0, elapsed_s=58.0, jitter=0.5) == 1.0
    assert next_delay_s(POLICY, RETRYABLE, attempt=0, elapsed_s=59.5, jitter=0.5) is None


def test_zero_max_elapsed_retries_for_ever() -> None:
    forever = RetryConfig(max_elapsed_s=0)
    assert next_delay_s(forever, RETRYABLE, attempt=1000, elapsed_s=1e9, jitter=0.5) is not None


def test_disabled_retry_gives_up_at_once() -> None:
    assert next_delay_s(RetryConfig(enabled=False), RETRYABLE, 0, 0, 0.5) is None
