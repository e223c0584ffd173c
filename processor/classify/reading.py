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
from mcp_breaker_client.shared.outcome import Signals, build_signals
from mcp_breaker_client.shared.result import ResultReading

from processor.classify.events import Dialect, Side
from processor.classify.spanview import (
    STATUS_CODE_ERROR,
    STATUS_CODE_OK,
    AttributeValue,
    SpanView,
)


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
    signals: Signals = field(default_factory=Signals)
    request_id: str | None = None
    session_id: str | None = None
    counts: dict[str, AttributeValue] = field(default_factory=dict)  # listing attributes
    # The span's resource's tenant (classify.tenant_attribute) and service.name, "" when it
    # names none: the classifier sets them, reading them once per resource, not per span.
    # Every key it keeps is kept per tenant.
    tenant: str = ""
    harness: str = ""


build_reading = builder(Reading)  # one per MCP span: Reading(...) costs twice as much


def span_signals(
    span: SpanView,
    result: ResultReading,
    *,
    rpc_code: int | None = None,
    silence_means_ok: bool = False,
    answered: bool = False,
    hidden_patterns: Sequence[re.Pattern[str]] = (),
) -> Signals:
    """The outcome signals every span carries (status, error.type, exception events), what
    its recorded result says, plus what the dialect found in its own attributes."""
    # Spelled out rather than passed on as **kwargs: this runs for every call span.
    status_code = span.status_code
    return build_signals(
        error_type=span.texts.get("error.type"),
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
