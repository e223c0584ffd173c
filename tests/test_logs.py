"""The service's log: one line per record whatever a sender named things, and no flood.

``configure`` installs the root handler these tests write through, on a fake clock, so the
rate limit's window passes without sleeping.
"""

from __future__ import annotations

import io
import logging
import sys
from collections.abc import Iterator

import pytest
from aiohttp.http_exceptions import BadHttpMessage

from processor.config import LogLevel
from processor.telemetry import logs

FORGED = "\nFAKE 2026-01-01 ERROR forged"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Log:
    """What ``logs.configure`` writes to stderr, on a fake clock."""

    def __init__(self) -> None:
        self.clock = Clock()
        self.stderr = io.StringIO()

    def lines(self) -> list[str]:
        return self.stderr.getvalue().splitlines()


@pytest.fixture
def log(monkeypatch: pytest.MonkeyPatch) -> Iterator[Log]:
    """The service's logging, configured; the root logger as it was, afterwards."""
    captured = Log()
    monkeypatch.setattr(sys, "stderr", captured.stderr)
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    logs.configure(LogLevel.INFO, clock=captured.clock)
    yield captured
    root.handlers[:] = handlers
    root.setLevel(level)


def test_a_newline_in_a_name_cannot_forge_a_line(log: Log) -> None:
    logging.getLogger("processor.inflight.stage").warning("tool %s failed", "fetch" + FORGED)
    logging.getLogger("anything.else").info("server %r", "web" + FORGED)
    lines = log.lines()
    assert len(lines) == 2  # every logger writes through the root handler
    assert lines[0].endswith(
        "WARNING processor.inflight.stage: tool fetch\\nFAKE 2026-01-01 ERROR forged failed"
    )
    assert lines[1].endswith("anything.else: server 'web\\nFAKE 2026-01-01 ERROR forged'")


def test_every_control_character_is_shown_escaped(log: Log) -> None:
    sent = "a\x1b[2J\r\x00\x7f\x85\x9b\t\u202e\u2066\u2028b"
    logging.getLogger("processor").warning("turn %s", sent)
    (line,) = log.lines()
    assert line.endswith("turn a\\x1b[2J\\r\\x00\\x7f\\x85\\x9b\\t\\u202e\\u2066\\u2028b")
    assert line.isprintable()


def test_our_traceback_keeps_its_lines_and_escapes_what_it_quotes(log: Log) -> None:
    try:
        try:
            raise KeyError("k")
        except KeyError as error:
            raise ValueError("bad tool x" + FORGED) from error
    except ValueError:
        logging.getLogger("processor.inflight.stage").exception(
            "analysis failed for %s", "t" + FORGED
        )
    lines = log.lines()
    assert lines[0].endswith("analysis failed for t\\nFAKE 2026-01-01 ERROR forged")
    assert lines[1] == "Traceback (most recent call last):"
    assert any(line.startswith('  File "') and "test_logs.py" in line for line in lines)
    assert "KeyError: 'k'" in lines
    assert lines[-1] == "ValueError: bad tool x\\nFAKE 2026-01-01 ERROR forged"
    assert not any(line.startswith("FAKE") for line in lines)


def test_a_secret_an_exception_quotes_is_redacted(log: Log) -> None:
    password, token = "hunter" + "2pw", "tok-" + "9f8e7d6c5b"  # not in the traceback's source
    try:
        raise ConnectionError(f"refused: https://bob:{password}@db.internal/x Bearer {token}")
    except ConnectionError:
        logging.getLogger("processor.forward").exception("next hop failed")
    text = log.stderr.getvalue()
    assert password not in text and token not in text
    assert "ConnectionError: refused: https://" in text  # what failed, still said


def test_a_request_aiohttp_cannot_parse_is_one_warning_without_its_bytes(log: Log) -> None:
    error = BadHttpMessage("Invalid header value char", headers=None)
    error.message = "Invalid header value char: b'Authorization: Bearer tokA-aaaaaaaa\\x01'"
    try:
        raise error
    except BadHttpMessage as raised:
        logging.getLogger("aiohttp.server").exception(
            "Error handling request from %s", "10.0.0.7", exc_info=raised
        )
    (line,) = log.lines()
    assert line.endswith(
        "WARNING aiohttp.server: unparsable HTTP request from 10.0.0.7: BadHttpMessage "
        "(answered 400)"
    )


def test_a_flood_of_warnings_is_cut_and_counted(log: Log) -> None:
    logger = logging.getLogger("processor.receive")
    start = log.clock.now
    for n in range(999):  # one kind, whatever the names: the template is what repeats
        logger.warning("refused a span from %s", f"sender-{n}")
        log.clock.now += 0.05
    log.clock.now = start + logs.REPEAT_WINDOW_S
    logger.warning("refused a span from %s", "sender-999")
    lines = log.lines()
    assert len(lines) == logs.REPEATS_PER_WINDOW + 1
    assert lines[-1].endswith(
        "refused a span from sender-999 (suppressed 994 similar messages in the last 60 s)"
    )
    assert sum("suppressed" in line for line in lines) == 1


def test_the_limit_counts_again_in_each_window(log: Log) -> None:
    logger = logging.getLogger("processor.forward")
    for _ in range(3):
        for _ in range(logs.REPEATS_PER_WINDOW + 2):
            logger.error("next hop refused")
        log.clock.now += logs.REPEAT_WINDOW_S
    lines = log.lines()
    assert len(lines) == 3 * logs.REPEATS_PER_WINDOW
    assert [line.endswith("(suppressed 2 similar messages in the last 60 s)") for line in lines][
        :: logs.REPEATS_PER_WINDOW
    ] == [False, True, True]


def test_info_and_distinct_kinds_are_not_cut(log: Log) -> None:
    logger = logging.getLogger("processor")
    for _ in range(1000):
        logger.info("delivered a batch")
    for n in range(logs.REPEATS_PER_WINDOW + 1):
        logger.warning("one kind %d", n)
        logger.error("one kind %d", n)  # another level: another kind
        logging.getLogger("processor.other").warning("one kind %d", n)  # another logger
        logger.warning("%s", f"config warning {n}")  # a bare "%s" is keyed by its message
    lines = log.lines()
    assert len(lines) == 1000 + 3 * logs.REPEATS_PER_WINDOW + logs.REPEATS_PER_WINDOW + 1


def test_info_that_senders_spans_drive_is_cut_too(log: Log) -> None:
    """A dead call is an info line, and a sender can make thousands: at most a few a
    window, then counted (the metrics count every one)."""
    logger = logging.getLogger("processor.inflight.pipeline")
    for n in range(1000):
        logger.info("dead call to %s in turn %s", "pw/nav", f"t{n}", extra=logs.SENDER_DRIVEN)
    log.clock.now += logs.REPEAT_WINDOW_S
    logger.info("dead call to %s in turn %s", "pw/nav", "t-last", extra=logs.SENDER_DRIVEN)
    lines = log.lines()
    assert len(lines) == logs.REPEATS_PER_WINDOW + 1
    assert lines[-1].endswith("(suppressed 995 similar messages in the last 60 s)")


def test_the_limit_holds_a_bounded_number_of_kinds() -> None:
    clock = Clock()
    limit = logs.RepeatLimit(limit=1, clock=clock, max_templates=2)

    def passes(msg: str) -> bool:
        return limit.filter(logging.makeLogRecord({"msg": msg, "levelno": logging.WARNING}))

    assert [passes("a"), passes("a"), passes("b"), passes("c")] == [True, False, True, True]
    assert passes("a")  # its window was dropped, the oldest, to make room for "c"


def test_what_is_suppressed_and_untold_is_told_at_exit(log: Log) -> None:
    """A flood that stops inside its window has no later line to carry its count: the
    exit hook writes it, one line per kind, and only once."""
    logger = logging.getLogger("processor.advisories.service")
    for n in range(300):
        logger.info("advisories: %s subscribed", f"harness-{n}", extra=logs.SENDER_DRIVEN)
        log.clock.now += 0.01
    logger.warning("next hop refused")  # told, nothing suppressed: no line for it at exit
    logs.tell_untold()
    logs.tell_untold()
    lines = log.lines()
    assert len(lines) == logs.REPEATS_PER_WINDOW + 2
    assert lines[-1].endswith(
        "INFO    processor.advisories.service: suppressed 295 similar messages in the last "
        "3 s: advisories: %s subscribed"
    )


def test_a_count_told_at_exit_is_not_told_again() -> None:
    clock = Clock()
    limit = logs.RepeatLimit(limit=1, clock=clock)
    record = {"msg": "refused %s", "args": ("x",), "levelno": logging.WARNING}
    assert [limit.filter(logging.makeLogRecord(record)) for _ in range(3)] == [True, False, False]
    (untold,) = limit.untold()
    assert untold.getMessage().startswith("suppressed 2 similar messages")
    assert limit.untold() == []
    clock.now += 1
    later = logging.makeLogRecord(record)
    assert limit.filter(later)  # a new window, with nothing to tell
    assert not getattr(later, "mcp_breaker_suppressed", "")
