"""A Reading: what one span says about one call or one listing, before pairing and
identity resolution, and the outcome signals every span carries. The dialect readers
(``dialects.py``) and the agent frameworks' readers (``frameworks.py``) both make them."""

from __future__ import annotations

import enum
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from mcp_breaker_client.shared.cheap_dataclasses import builder
from mcp_breaker_client.shared.outcome import build_signals, judge, quiet_verdict
from mcp_breaker_client.shared.result import ResultReading
from mcp_breaker_client.shared.verdict import UNKNOWN_VERDICT, Verdict

from processor.classify.events import Dialect, Side
from processor.classify.spanview import (
    STATUS_CODE_ERROR,
    STATUS_CODE_OK,
    AttributeValue,
    SpanView,
)

SpanKey = tuple[str, bytes, bytes]
"""A span as the classifier's memories keep it: its tenant, trace id and span id."""
NO_KEY: SpanKey = ("", b"", b"")


class Kind(enum.Enum):
    CALL = "call"
    LISTING = "listing"


@dataclass(slots=True, kw_only=True)  # not frozen, as SpanView: built per MCP span
class Reading:
    kind: Kind
    dialect: Dialect
    side: Side
    span: SpanView
    tool: str = ""
    server: str | None = None
    arguments: Any = None
    has_arguments: bool = False
    arguments_digest: str | None = None  # a harness's own hash of the arguments
    verdict: Verdict = UNKNOWN_VERDICT  # what the span says of how the call ended (judge)
    request_id: str | None = None
    session_id: str | None = None
    counts: dict[str, AttributeValue] = field(default_factory=dict)  # listing attributes
    # The span's resource's tenant (classify.tenant_attribute) and service.name, "" when it
    # names none: the classifier sets them, reading them once per resource, not per span.
    # Every key it keeps is kept per tenant.
    tenant: str = ""
    harness: str = ""
    # The span's key and its parent's (the same tenant and trace, the parent's span id), set
    # with the tenant: made once per span, and the one tuple every memory that keeps the
    # span holds (the spans seen, the calls told, the halves held).
    key: SpanKey = NO_KEY
    parent_key: SpanKey = NO_KEY


build_reading = builder(Reading)  # one per MCP span: Reading(...) costs twice as much


def span_verdict(
    span: SpanView,
    result: ResultReading,
    *,
    rpc_code: int | None = None,
    silence_means_ok: bool = False,
    answered: bool = False,
    hidden_patterns: Sequence[re.Pattern[str]] = (),
) -> Verdict:
    """How the span says its call ended (outcome.judge), from the outcome signals every
    span carries (status, error.type, exception events), what its recorded result says, and
    what the dialect found in its own attributes."""
    status_code = span.status_code
    error_type = span.texts.get("error.type")
    if (
        error_type is None
        and rpc_code is None
        and status_code != STATUS_CODE_ERROR
        and not span.status_message
        and not span.exceptions
        and result.is_error is not True
        and result.typed_failure is None
        and not result.text
    ):
        # Nothing to read a failure or a reason from, as most spans: judge's answer for
        # such signals (outcome._quiet), without building them.
        return quiet_verdict(
            says_ok=result.is_error is False or status_code == STATUS_CODE_OK or silence_means_ok
        )
    # Spelled out rather than passed on as **kwargs: this runs for every call span.
    return judge(
        build_signals(
            error_type=error_type,
            status_error=status_code == STATUS_CODE_ERROR,
            status_ok=status_code == STATUS_CODE_OK,
            status_message=span.status_message,
            exceptions=span.exceptions,
            rpc_code=rpc_code,
            silence_means_ok=silence_means_ok,
            answered=answered,
            hidden_patterns=hidden_patterns,
            is_error=result.is_error,
            typed_failure=result.typed_failure,
            result_text=result.text,
        )
    )
