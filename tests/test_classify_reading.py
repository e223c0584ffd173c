"""reading.span_verdict: what every call span's signals say, with the quiet ones judged
without building their signals, exactly as outcome.judge judges them built."""

from __future__ import annotations

import itertools
import re

from mcp_breaker_client.shared.outcome import OK_VERDICT, build_signals, judge
from mcp_breaker_client.shared.result import ResultReading
from mcp_breaker_client.shared.verdict import UNKNOWN_VERDICT, Outcome, Verdict
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

from processor.classify.reading import span_verdict
from processor.classify.spanview import SpanView, view

HIDDEN = (re.compile(r"quota exceeded", re.I),)


def span_with(status_code: int, message: str, error_type: str | None, exception: bool) -> SpanView:
    span = Span(name="tools/call x", status=Status(code=status_code, message=message))  # type: ignore[arg-type]
    if error_type is not None:
        span.attributes.append(KeyValue(key="error.type", value=AnyValue(string_value=error_type)))
    if exception:
        event = span.events.add(name="exception")
        event.attributes.append(
            KeyValue(key="exception.message", value=AnyValue(string_value="it broke"))
        )
    return view(span, {})


def judged_whole(
    span: SpanView,
    result: ResultReading,
    rpc_code: int | None,
    silence_means_ok: bool,
    answered: bool,
) -> Verdict:
    """What the signals say built in full, as every call span was judged before."""
    return judge(
        build_signals(
            error_type=span.texts.get("error.type"),
            status_error=span.status_code == Status.STATUS_CODE_ERROR,
            status_ok=span.status_code == Status.STATUS_CODE_OK,
            status_message=span.status_message,
            exceptions=span.exceptions,
            rpc_code=rpc_code,
            silence_means_ok=silence_means_ok,
            answered=answered,
            hidden_patterns=HIDDEN,
            is_error=result.is_error,
            typed_failure=result.typed_failure,
            result_text=result.text,
        )
    )


def test_a_span_is_judged_as_its_signals_built_in_full_would_be() -> None:
    """Every combination of a few values of each signal, the quiet value among them (a
    quiet span is one whose every signal has it), so that each signal is met alone."""
    spans = [
        span_with(status, message, error_type, exception)
        for status, message, error_type, exception in itertools.product(
            (0, 1, 2), ("", "user declined", "boom"), (None, "", "TimeoutError"), (False, True)
        )
    ]
    results = [
        ResultReading(is_error, text, typed_failure)
        for is_error, text, typed_failure in itertools.product(
            (None, True, False), ("", "Quota exceeded", "3 rows"), (None, {"error": "quota"})
        )
    ]
    judged = 0
    for span, result, rpc_code, silence_means_ok, answered in itertools.product(
        spans, results, (None, -32601, 0), (False, True), (False, True)
    ):
        expected = judged_whole(span, result, rpc_code, silence_means_ok, answered)
        got = span_verdict(
            span,
            result,
            rpc_code=rpc_code,
            silence_means_ok=silence_means_ok,
            answered=answered,
            hidden_patterns=HIDDEN,
        )
        assert got == expected, (span, result, rpc_code, silence_means_ok, answered)
        judged += 1
    assert judged == len(spans) * len(results) * 12


def test_a_quiet_span_is_ok_only_where_something_says_so() -> None:
    quiet = span_with(0, "", None, False)
    assert span_verdict(quiet, ResultReading()) is UNKNOWN_VERDICT
    assert span_verdict(quiet, ResultReading(), silence_means_ok=True) is OK_VERDICT
    assert span_verdict(quiet, ResultReading(is_error=False)) is OK_VERDICT
    assert span_verdict(span_with(1, "", None, False), ResultReading()) is OK_VERDICT


def test_one_signal_is_enough_to_be_judged_in_full() -> None:
    """An empty error.type still names a failure's type (present, if blank): not quiet."""
    blank_type = span_with(0, "", "", False)
    assert span_verdict(blank_type, ResultReading(), silence_means_ok=True) == judged_whole(
        blank_type, ResultReading(), None, True, False
    )
    failed = span_with(2, "", None, False)
    assert span_verdict(failed, ResultReading()).outcome is Outcome.FAILED
