"""Logging for people: one line per event, no span payloads, level from the config.

Messages quote names outsiders chose (tools, servers, turns), so a record is escaped to one
inert line whatever they hold; and a warning or error an outsider can repeat at will is
let through a few times a window, then counted, so it cannot flood the log (the count is
told on the next line of its kind, or at exit, so none goes untold). What an
exception says may quote a sender's bytes (a header with its token, a URL with its
password): it is redacted as a tool's error text is. aiohttp's own errors for a request it
could not parse quote the raw request, so they are logged as one line that names the
error and the peer, never the bytes.
"""

from __future__ import annotations

import atexit
import logging
import re
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from aiohttp.http_exceptions import HttpProcessingError
from mcp_breaker_client.shared.redact import redact

from processor.config import LogLevel
from processor.telemetry.printable import escape_controls

if TYPE_CHECKING:
    from logging import _SysExcInfoType

FORMAT = "%(asctime)s %(levelname)-7s %(name)s: %(message)s"
# The same warning or error more often than this within one window is suppressed until the
# window ends; the next one after it says how many were.
REPEATS_PER_WINDOW = 5
REPEAT_WINDOW_S = 60.0
# Info and debug are what an operator asked for by level; only these are cut, and info
# records that senders' spans drive (a dead call, a circuit's move: logged with
# ``extra=SENDER_DRIVEN``), so that no sender can grow the log without bound.
RATE_LIMITED_FROM = logging.WARNING
SENDER_DRIVEN = {"mcp_breaker_sender_driven": True}
# Windows held at once, oldest dropped first: the rate limit's memory stays bounded even
# when messages are keyed by their text (see _template).
MAX_TRACKED_TEMPLATES = 1_000

_NOTE = "mcp_breaker_suppressed"  # record attribute: RepeatLimit's count, for the formatter
# A %-style conversion specifier, as logging's own formatting reads them.
_PLACEHOLDER = re.compile(r"%(\([^)]*\))?[-#0 +]*(\*|\d+)?(\.(\*|\d+))?[diouxXeEfFgGcrsa%]")


class OneLineFormatter(logging.Formatter):
    """Escapes every control character in the formatted line; a traceback keeps its lines."""

    def format(self, record: logging.LogRecord) -> str:
        record.message = record.getMessage()
        if self.usesTime():
            record.asctime = self.formatTime(record, self.datefmt)
        text = escape_controls(self.formatMessage(record))
        note = getattr(record, _NOTE, "")
        if note:
            text += f" ({note})"
        # Formatted here, not taken from record.exc_text: another handler may have cached
        # an unescaped one there.
        if record.exc_info:
            text += "\n" + self.formatException(record.exc_info)
        elif record.exc_text:
            text += "\n" + escape_controls(record.exc_text, keep_newlines=True)
        if record.stack_info:
            text += "\n" + escape_controls(self.formatStack(record.stack_info), keep_newlines=True)
        return text

    def formatException(self, ei: _SysExcInfoType) -> str:
        text = super().formatException(ei)
        # The traceback is ours, but what an exception says may quote a sender: a newline
        # there would forge a line, so that part is escaped to one, and a secret in it
        # (a token, a password in a URL) is redacted.
        for told in _exception_texts(ei[1]):
            text = text.replace(told, _scrubbed(told))
        return escape_controls(text, keep_newlines=True)


def _scrubbed(told: str) -> str:
    one_line = escape_controls(told)
    # As long as it was: the traceback is for an operator, not cut to a model's line.
    return redact(one_line, max_chars=max(1, len(one_line)))


def _exception_texts(exc: BaseException | None) -> Iterator[str]:
    """The "Type: message" block of each exception in the chain, as the traceback has it."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield "".join(traceback.format_exception_only(exc)).rstrip("\n")
        exc = exc.__cause__ or (None if exc.__suppress_context__ else exc.__context__)


@dataclass
class _Window:
    start: float
    seen: int = 1
    suppressed: int = 0


class RepeatLimit(logging.Filter):
    """Lets one kind of warning or error through ``limit`` times a window, and counts the rest.

    A kind is (logger, level, message template), so one event with ever-changing names is
    still one kind. The count is told on the first record of that kind after the window.
    """

    def __init__(
        self,
        *,
        limit: int = REPEATS_PER_WINDOW,
        window_s: float = REPEAT_WINDOW_S,
        clock: Callable[[], float] = time.monotonic,
        max_templates: int = MAX_TRACKED_TEMPLATES,
    ) -> None:
        super().__init__()
        self._limit = limit
        self._window_s = window_s
        self._clock = clock
        self._max_templates = max_templates
        self._windows: dict[tuple[str, int, str], _Window] = {}
        # Handler.handle() runs its filters before it takes its own lock.
        self._lock = threading.Lock()

    def untold(self) -> list[logging.LogRecord]:
        """One record per kind whose suppressed count no later record has told yet (the
        window is forgotten): at exit, when no record of that kind may come again."""
        now = self._clock()
        with self._lock:
            cut = [(key, w) for key, w in self._windows.items() if w.suppressed]
            for key, _ in cut:
                del self._windows[key]
        records = []
        for (name, level, template), window in cut:
            record = logging.LogRecord(
                name,
                level,
                __file__,
                0,
                "suppressed %d similar messages in the last %.0f s: %s",
                (window.suppressed, now - window.start, template),
                None,
            )
            records.append(record)
        return records

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < RATE_LIMITED_FROM and not getattr(
            record, "mcp_breaker_sender_driven", False
        ):
            return True
        key = (record.name, record.levelno, _template(record))
        now = self._clock()
        with self._lock:
            window = self._windows.get(key)
            if window is not None and now - window.start < self._window_s:
                window.seen += 1
                if window.seen <= self._limit:
                    return True
                window.suppressed += 1
                return False
            if window is not None:
                del self._windows[key]  # re-added below, so the dict stays oldest first
                if window.suppressed:
                    setattr(
                        record,
                        _NOTE,
                        f"suppressed {window.suppressed} similar messages in the last "
                        f"{now - window.start:.0f} s",
                    )
            if len(self._windows) >= self._max_templates:
                del self._windows[next(iter(self._windows))]
            self._windows[key] = _Window(now)
            return True


def _template(record: logging.LogRecord) -> str:
    template = record.msg if isinstance(record.msg, str) else None
    if template is not None and _PLACEHOLDER.sub("", template).strip():
        return template
    # No template, or one that is nothing but placeholders ("%s"): it names no event, so
    # the message does, lest distinct warnings be cut as one.
    try:
        return record.getMessage()
    except Exception:  # a bad call is for the formatter to report, not the filter
        return str(record.msg)


class UnparsableRequest(logging.Filter):
    """aiohttp's record of a request it could not parse, made one line without its bytes.

    aiohttp logs it at ERROR with a traceback whose message quotes the raw request (an
    ``Authorization`` header included): that is a sender's mistake, worth a warning that
    names it, never worth the bytes."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if isinstance(error, HttpProcessingError):
            peer = record.args[0] if isinstance(record.args, tuple) and record.args else "?"
            record.msg = "unparsable HTTP request from %s: %s (answered %d)"
            record.args = (peer, type(error).__name__, error.code)
            record.levelno, record.levelname = logging.WARNING, "WARNING"
            record.exc_info = record.exc_text = None
        return True


# The handler configure() installed, and its rate limit: what is told at exit.
_installed: list[tuple[logging.Handler, RepeatLimit]] = []


def tell_untold() -> None:
    """Write what the rate limit suppressed and has not told yet, one line per kind.

    Run at exit (registered by ``configure``): a flood that stopped before its window
    ended would otherwise leave no trace of its size. The lines go to the handler itself,
    past its filter: they are the filter's own report."""
    for handler, limit in _installed:
        for record in limit.untold():
            handler.acquire()
            try:
                handler.emit(record)
            finally:
                handler.release()


def configure(
    level: LogLevel, *, clock: Callable[[], float] = time.monotonic, process: str = ""
) -> None:
    """``process``: named in every line, for one of several workers (``worker 2``)."""
    handler = logging.StreamHandler(sys.stderr)
    form = FORMAT.replace("%(name)s", f"[{process}] %(name)s") if process else FORMAT
    handler.setFormatter(OneLineFormatter(form))
    limit = RepeatLimit(clock=clock)
    handler.addFilter(limit)
    if not _installed:  # registered after logging's own: runs before it closes the handlers
        atexit.register(tell_untold)
    _installed[:] = [(handler, limit)]
    root = logging.getLogger()
    root.handlers[:] = [handler]  # on the root handler: every logger's records pass here
    root.setLevel(level.value.upper())
    # aiohttp and grpc are chatty at INFO about things an operator did not ask about.
    for noisy in ("aiohttp.access", "grpc._cython"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    server = logging.getLogger("aiohttp.server")
    if not any(isinstance(f, UnparsableRequest) for f in server.filters):
        server.addFilter(UnparsableRequest())
