"""From the outcome signals a span carries to a Verdict: ok, failed (with a class), neutral.

Signals are read in order: an explicit neutral outcome, a user's "no" recorded as a
reason, then any declared failure (JSON-RPC codes, error.type, status, exception events,
isError, an explicit "failed"), then a success and the result body behind it. A span
that carries no signal at all is ``unknown``: it is never guessed to be ok. Only a side
known to report its failures (``silence_means_ok``) turns the absence of an error into
``ok``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mcp_breaker_client.shared.cheap_dataclasses import builder
from mcp_breaker_client.shared.redact import redact
from mcp_breaker_client.shared.verdict import (
    UNKNOWN_VERDICT,
    FailureClass,
    FailureOrigin,
    NeutralReason,
    Outcome,
    Verdict,
)

# JSON-RPC error codes (the MCP SDKs use -32001 for a request timeout).
JSONRPC_CLASSES: Mapping[int, FailureClass] = {
    -32601: FailureClass.UNKNOWN_TOOL,  # method not found
    -32602: FailureClass.PROTOCOL,  # invalid params, schema mismatch
    -32600: FailureClass.PROTOCOL,  # invalid request
    -32700: FailureClass.PROTOCOL,  # parse error
    -32001: FailureClass.TIMEOUT,
}

# What harnesses write when the user says no, or the harness stops a call (opencode seed).
NEUTRAL_PHRASES: tuple[tuple[re.Pattern[str], NeutralReason], ...] = (
    (re.compile(r"user (declined|denied|rejected)", re.I), NeutralReason.DECLINED),
    (re.compile(r"permission (was )?(declined|denied)", re.I), NeutralReason.DECLINED),
    (re.compile(r"user dismissed", re.I), NeutralReason.DISMISSED),
    (
        re.compile(r"\b(interrupted|cancell?ed|aborted by the user)\b", re.I),
        NeutralReason.CANCELLED,
    ),
)

# Outcome attribute values (our convention and the harnesses in the seeds).
OUTCOME_VALUES: Mapping[str, tuple[Outcome, FailureClass | None, NeutralReason | None]] = {
    "ok": (Outcome.OK, None, None),
    "success": (Outcome.OK, None, None),
    "failed": (Outcome.FAILED, None, None),
    "failure": (Outcome.FAILED, None, None),
    "error": (Outcome.FAILED, None, None),
    "declined": (Outcome.NEUTRAL, None, NeutralReason.DECLINED),
    "dismissed": (Outcome.NEUTRAL, None, NeutralReason.DISMISSED),
    "cancelled": (Outcome.NEUTRAL, None, NeutralReason.CANCELLED),
    "canceled": (Outcome.NEUTRAL, None, NeutralReason.CANCELLED),
    "interrupted": (Outcome.NEUTRAL, None, NeutralReason.CANCELLED),
}

# Words in error types and messages that say the tool never ran: the session or the
# connection to its server is gone. Arguments cannot fix these.
TRANSPORT_WORDS = re.compile(
    r"session (is )?closed|closed ?resource|broken ?(pipe|resource)|connection ?(refused|reset|"
    r"error|closed|aborted|lost)|econn(refused|reset)|not connected|upstream (is )?unavailable|"
    r"upstream .*closed|service unavailable|\b503\b|\b502\b|bad gateway|end ?of ?stream|eof\b|"
    r"disconnected|unreachable|transport",
    re.I,
)
TIMEOUT_WORDS = re.compile(r"time[sd]? ?out|deadline (exceeded|expired)|\b504\b", re.I)
UNKNOWN_TOOL_WORDS = re.compile(
    r"unknown tool|tool .{0,80}not found|no such tool|notfounderror", re.I
)
# Words that name the MCP session itself as gone, whoever says so: a proxy in front of the
# server answering that its upstream MCP session closed (the sirens-echo seed).
MCP_SESSION_WORDS = re.compile(r"\bmcp session|\bupstream (mcp )?session", re.I)
# Words that say a session or its stream is gone: the MCP SDKs' own errors when the
# session closes under a call ("Connection closed", "Session terminated", a closed
# resource). Only read when no result came back: in a tool's result they are its
# backend's ("login session expired", "database connection closed"), not the session's.
SESSION_WORDS = re.compile(
    r"\bsession (is |was |has been )?(closed|gone|terminated|expired)|"
    r"closed ?resource|broken ?(pipe|resource)|not connected|connection closed|end ?of ?stream",
    re.I,
)
TIMEOUT_CODE = -32001  # the MCP SDKs' own "request timed out": no answer from the server
# Verdicts are frozen: the common ones are shared rather than built for every span.
OK_VERDICT = Verdict(outcome=Outcome.OK)


@dataclass(slots=True, kw_only=True)  # not frozen, as SpanView: built per MCP span
class Signals:
    """Everything a dialect reader found that bears on the outcome; None means absent."""

    outcome_attribute: str | None = None
    failure_class_attribute: str | None = None  # a harness may name the class itself
    error_type: str | None = None
    rpc_code: int | None = None
    status_error: bool = False
    status_ok: bool = False
    status_message: str = ""
    exceptions: Sequence[tuple[str, str]] = ()  # (exception.type, exception.message)
    is_error: bool | None = None  # the result's isError
    typed_failure: Mapping[str, Any] | None = None  # a typed failure body in the result
    result_text: str = ""  # the result's first text, for phrases and excerpts
    silence_means_ok: bool = False  # this side reports failures, so no error means ok
    # The MCP server answered this call (the span is the server's own, or it records a
    # result or a JSON-RPC error response): its failure is the tool's, not the session's.
    answered: bool = False
    refused_by_advisory: bool = False  # the harness heeded an advisory and did not call
    hidden_patterns: Sequence[re.Pattern[str]] = field(default_factory=tuple)


build_signals = builder(Signals)  # one per call span: Signals(...) costs twice as much


def judge(signals: Signals) -> Verdict:
    if _quiet(signals):
        return quiet_verdict(
            says_ok=signals.is_error is False or signals.status_ok or signals.silence_means_ok
        )
    texts = [signals.status_message, signals.result_text, signals.error_type or ""]
    if signals.exceptions:
        texts += [
            message if message.startswith(kind) else f"{kind}: {message}"
            for kind, message in signals.exceptions
        ]
    text = _joined(texts)

    explicit = _explicit(signals.outcome_attribute)
    # Refused calls were never made: only a declared failure outranks the flag.
    if signals.refused_by_advisory and (explicit is None or explicit[0] is not Outcome.FAILED):
        return _verdict(Outcome.NEUTRAL, None, NeutralReason.REFUSED_BY_ADVISORY, text)
    if explicit is not None and explicit[0] is Outcome.NEUTRAL:
        return _verdict(Outcome.NEUTRAL, None, explicit[2], text)
    # A reason is read where failures are recorded: the status, exceptions, and a result
    # that is itself an error. A successful result that merely mentions "cancelled" is ok.
    result_is_error = signals.is_error is True or (
        explicit is not None and explicit[0] is Outcome.FAILED
    )
    neutral = _neutral_reason(
        signals.status_message,
        signals.result_text if result_is_error else "",
        *(m for _, m in signals.exceptions),
    )
    if neutral is not None and (explicit is None or explicit[0] is not Outcome.OK):
        return _verdict(Outcome.NEUTRAL, None, neutral, text)
    # A declared failure beats an explicit "ok": a failure signal is never read as a success.
    failure = _failure_class(signals, text)
    if failure is None and explicit is not None and explicit[0] is Outcome.FAILED:
        failure = _class_from_words(text)  # "failed", with nothing else to say why
    if failure is not None:
        declared = _declared_class(signals.failure_class_attribute)
        failure = declared or failure
        return _verdict(Outcome.FAILED, failure, None, text, _origin(signals, failure, text))
    says_ok = explicit is not None or signals.is_error is False or signals.status_ok
    if says_ok or signals.silence_means_ok:
        # The T3 seed: a declared failure inside a success envelope is still a failure.
        hidden = _hidden_failure(signals)
        if hidden is not None:
            return _verdict(Outcome.FAILED, FailureClass.HIDDEN, None, hidden, FailureOrigin.TOOL)
        return OK_VERDICT
    return UNKNOWN_VERDICT


def quiet_verdict(*, says_ok: bool) -> Verdict:
    """The verdict of signals with nothing to read a failure or a reason from (``_quiet``):
    what the rest of ``judge`` would come to, without the phrase and word searches.
    ``says_ok``: the result's isError is false, the status OK, or the side's silence
    means ok."""
    return OK_VERDICT if says_ok else UNKNOWN_VERDICT


def _quiet(signals: Signals) -> bool:
    """No text, no declared outcome, no failure signal: most spans, judged without the
    phrase and word searches (there is no text to search) or a verdict built anew."""
    return (
        not signals.status_message
        and not signals.result_text
        and signals.error_type is None
        and not signals.exceptions
        and signals.outcome_attribute is None
        and signals.rpc_code is None
        and not signals.status_error
        and signals.is_error is not True
        and signals.typed_failure is None
        and not signals.refused_by_advisory
    )


def _verdict(
    outcome: Outcome,
    failure: FailureClass | None,
    neutral: NeutralReason | None,
    text: str,
    origin: FailureOrigin | None = None,
) -> Verdict:
    excerpt = redact(text) if outcome is not Outcome.OK else ""
    return Verdict(
        outcome=outcome,
        failure_class=failure,
        neutral_reason=neutral,
        origin=origin,
        error_excerpt=excerpt,
    )


def _joined(texts: list[str]) -> str:
    """What the span says of its failure, each thing once: an SDK often writes the same
    error as the status, the error type and the exception event, and the excerpt a model
    reads should say it once."""
    kept: list[str] = []
    for text in texts:
        text = text.strip()
        if not text or any(text in told for told in kept):
            continue
        kept = [told for told in kept if told not in text]  # said again, more fully
        kept.append(text)
    return " | ".join(kept)


def _origin(signals: Signals, failure: FailureClass, text: str) -> FailureOrigin:
    """What a failure is evidence about (``docs/breaker.md``, "Who is blamed")."""
    if MCP_SESSION_WORDS.search(text):
        return FailureOrigin.SESSION  # even if a proxy answered on the dead session's behalf
    a_result = signals.answered or signals.is_error is True
    if not a_result and SESSION_WORDS.search(text):
        return FailureOrigin.SESSION  # the SDK's own error, whatever JSON-RPC code it made up
    answered = (
        a_result
        or (signals.rpc_code is not None and signals.rpc_code != TIMEOUT_CODE)
        or (signals.error_type or "").strip().lower() == FailureClass.TOOL_ERROR.value
    )
    if answered:
        return FailureOrigin.TOOL
    if failure is FailureClass.TRANSPORT:
        return FailureOrigin.SESSION
    if failure is FailureClass.TIMEOUT:
        return FailureOrigin.NO_ANSWER
    return FailureOrigin.TOOL


def _explicit(
    value: str | None,
) -> tuple[Outcome, FailureClass | None, NeutralReason | None] | None:
    if value is None:
        return None
    return OUTCOME_VALUES.get(value.strip().lower())


def _declared_class(value: str | None) -> FailureClass | None:
    try:
        return FailureClass(value.strip().lower()) if value else None
    except ValueError:
        return None


def _neutral_reason(*texts: str) -> NeutralReason | None:
    for text in texts:
        if text:
            for pattern, reason in NEUTRAL_PHRASES:
                if pattern.search(text):
                    return reason
    return None


def _failure_class(signals: Signals, text: str) -> FailureClass | None:
    """The class of a failure the span declares, or None when it declares none."""
    code = signals.rpc_code if signals.rpc_code is not None else as_int(signals.error_type)
    if code is not None:
        named = JSONRPC_CLASSES.get(code)
        if named is not None:
            return named
        return _class_from_words(text, default=FailureClass.PROTOCOL)
    declared = (
        signals.error_type is not None
        or signals.status_error
        or signals.is_error is True
        or bool(signals.exceptions)
    )
    if not declared:
        return None
    return _class_from_words(text, default=FailureClass.TOOL_ERROR)


def _class_from_words(text: str, default: FailureClass = FailureClass.TOOL_ERROR) -> FailureClass:
    if UNKNOWN_TOOL_WORDS.search(text):
        return FailureClass.UNKNOWN_TOOL
    if TIMEOUT_WORDS.search(text):
        return FailureClass.TIMEOUT
    if TRANSPORT_WORDS.search(text):
        return FailureClass.TRANSPORT
    return default


def _hidden_failure(signals: Signals) -> str | None:
    """The excerpt of a failure returned as a success, or None when the result is one."""
    body = signals.typed_failure
    if body is not None:
        return _describe(body) or signals.result_text
    text = signals.result_text
    if text and any(p.search(text) for p in signals.hidden_patterns):
        return text
    return None


def _describe(body: Mapping[str, Any]) -> str:
    """``OrchestratorMcpFailure (orchestration_error): The operation could not be
    completed.``: the typed failure in the words the model and the operator read."""
    error = body.get("error")
    fields = error if isinstance(error, dict) else body
    tag = body.get("_tag") or fields.get("type") or fields.get("name")
    code = fields.get("code")
    message = fields.get("message")
    head = " ".join(str(v) for v in (tag, f"({code})" if code is not None else None) if v)
    if isinstance(message, str) and message:
        return f"{head}: {message}" if head else message
    return head


_INTEGER = re.compile(r"-?[0-9]{1,11}")


def as_int(value: str | None) -> int | None:
    """A JSON-RPC code written as text ("-32602"); None for anything else ("--1", "²")."""
    if value is None:
        return None
    text = value.strip()
    return int(text) if _INTEGER.fullmatch(text) else None
