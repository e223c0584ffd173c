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

from processor.classify.events import FailureClass, NeutralReason, Outcome, Verdict
from processor.classify.redact import redact

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
# A typed failure inside a success envelope: {"_tag": "OrchestratorMcpFailure", ...}.
FAILURE_TAG = re.compile(r"(failure|error)$", re.I)


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
    result_body: Any = None  # the result's structured content or parsed text
    result_text: str = ""  # the result's first text, for phrases and excerpts
    silence_means_ok: bool = False  # this side reports failures, so no error means ok
    refused_by_advisory: bool = False  # the harness heeded an advisory and did not call
    hidden_patterns: Sequence[re.Pattern[str]] = field(default_factory=tuple)


def judge(signals: Signals) -> Verdict:
    texts = [signals.status_message, signals.result_text, signals.error_type or ""]
    texts += [f"{kind}: {message}" for kind, message in signals.exceptions]
    text = " | ".join(t for t in texts if t)

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
        return _verdict(Outcome.FAILED, declared or failure, None, text)
    says_ok = explicit is not None or signals.is_error is False or signals.status_ok
    if says_ok or signals.silence_means_ok:
        # The T3 seed: a declared failure inside a success envelope is still a failure.
        if _hidden_failure(signals.result_body, signals.hidden_patterns, signals.result_text):
            return _verdict(Outcome.FAILED, FailureClass.HIDDEN, None, signals.result_text)
        return Verdict(outcome=Outcome.OK)
    return Verdict(outcome=Outcome.UNKNOWN)


def _verdict(
    outcome: Outcome, failure: FailureClass | None, neutral: NeutralReason | None, text: str
) -> Verdict:
    excerpt = redact(text) if outcome is not Outcome.OK else ""
    return Verdict(
        outcome=outcome, failure_class=failure, neutral_reason=neutral, error_excerpt=excerpt
    )


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
        for pattern, reason in NEUTRAL_PHRASES:
            if text and pattern.search(text):
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


def _hidden_failure(body: Any, patterns: Sequence[re.Pattern[str]], text: str) -> bool:
    if isinstance(body, dict):
        tag = body.get("_tag")
        if isinstance(tag, str) and FAILURE_TAG.search(tag):
            return True
        if isinstance(body.get("error"), dict) or body.get("ok") is False:
            return True
    return any(p.search(text) for p in patterns) if text else False


_INTEGER = re.compile(r"-?[0-9]{1,11}")


def as_int(value: str | None) -> int | None:
    """A JSON-RPC code written as text ("-32602"); None for anything else ("--1", "²")."""
    if value is None:
        return None
    text = value.strip()
    return int(text) if _INTEGER.fullmatch(text) else None
