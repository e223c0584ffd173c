"""Every exception the service raises on purpose lives here.

Expected outcomes (a full queue, a retryable send, a rejected span) are enums and
return values, not exceptions. What is left is misuse and bad input::

    BreakerError
     ├── ConfigError          start-up configuration is invalid (lists every problem)
     ├── StartupError         a listener cannot bind, a file cannot be read
     ├── IllegalTransition    a state machine asked for a move its table forbids (a bug)
     ├── BadEvent             an event in the shared stream cannot be read (skipped, counted)
     ├── QueueStorageError    the disk queue cannot write or read (a full or failing disk)
     ├── InvalidRequest       an OTLP request cannot be decoded (client's fault)
     │    └── RequestTooLarge over a size limit, before or after decompression
     └── UnreadableSpan       a span that may be an MCP span does not decode, though the
                              request's framing is sound (forwarded unread, not refused)
"""

from __future__ import annotations


class BreakerError(Exception):
    """Base of the exceptions raised by mcp-breaker."""


class ConfigError(BreakerError):
    """The configuration is invalid; ``problems`` holds one line per bad key."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = list(problems)
        super().__init__("invalid configuration:\n" + "\n".join(f"  - {p}" for p in problems))


class InvalidRequest(BreakerError):
    """An export request that cannot be decoded; the message is safe to return to the sender."""


class RequestTooLarge(InvalidRequest):
    """An export request over the configured size limit."""

    def __init__(self, limit_bytes: int) -> None:
        self.limit_bytes = limit_bytes
        super().__init__(f"request exceeds the {limit_bytes}-byte limit")


class UnreadableSpan(BreakerError):
    """A span, resource or scope that holds an MCP marker does not decode (invalid UTF-8 in
    a string, nesting past the decoder's limit): its request is forwarded as received."""


class StartupError(BreakerError):
    """The service could not start (a port in use, a bad certificate file)."""


class IllegalTransition(BreakerError):
    """A state machine was asked for a transition its table does not allow (a bug)."""

    def __init__(self, machine: str, source: object, target: object) -> None:
        self.source = source
        self.target = target
        super().__init__(f"{machine}: illegal transition from {source} to {target}")


class BadEvent(BreakerError):
    """An event read from the shared state's stream cannot be decoded (another version,
    or not ours): it is skipped and counted, never applied half-read."""


class QueueStorageError(BreakerError):
    """The disk queue could not write or read a request (a full or failing disk).

    Never a loss by itself: a request that cannot be written is refused (its sender
    retries), one that cannot be deleted is sent again at the next start."""
