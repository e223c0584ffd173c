"""The token map: bearer token -> tenant, for the OTLP receivers and the advisory port alike.

Tokens come from ``advisories.tokens`` (inline, from the environment or the file) and from
``auth.tokens_file``, one ``token=tenant`` a line. The file is looked at again at most every
``tokens_reload_s`` when a token is checked, and read again when its size or modification
time changed: a token is added or revoked without a restart. A file that cannot be read or
parsed later keeps the last good map in force (logged, without its contents); at start-up
it is an error.

Lookups compare the offered token with every known one in constant time, so the time an
answer takes says nothing about which tokens exist. No token ever reaches a log line.
"""

from __future__ import annotations

import hmac
import logging
import os
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from processor.errors import StartupError

log = logging.getLogger(__name__)

BEARER = "bearer "


def bearer_token(authorization: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` value, or None."""
    if authorization and authorization[: len(BEARER)].lower() == BEARER:
        return authorization[len(BEARER) :].strip() or None
    return None


def metadata_bearer_token(metadata: Iterable[tuple[str, str | bytes]] | None) -> str | None:
    """The token of the first bearer ``authorization`` entry of gRPC metadata, or None."""
    for key, value in metadata or ():
        if key.lower() == "authorization" and isinstance(value, str):
            token = bearer_token(value)
            if token is not None:
                return token
    return None


class TokenFileError(ValueError):
    """What is wrong with a tokens file; never quotes a token."""


def parse_tokens(text: str, source: str) -> dict[str, str]:
    """``token=tenant`` lines; blank lines and ``#`` comments are skipped."""
    tokens: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        token, sep, tenant = line.partition("=")
        if not sep or not token.strip():
            raise TokenFileError(f"{source} line {number}: expected token=tenant")
        tokens[token.strip()] = tenant.strip()
    return tokens


@dataclass(frozen=True, slots=True)
class _FileStamp:
    size: int
    mtime_ns: int


class TokenMap:
    def __init__(
        self,
        inline: Mapping[str, str],
        tokens_file: str = "",
        reload_s: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._inline = dict(inline)
        self._file = tokens_file
        self._reload_s = reload_s
        self._clock = clock
        self._stamp: _FileStamp | None = None
        self._from_file: dict[str, str] = {}
        self._entries: tuple[tuple[bytes, str], ...] = ()
        self._checked = clock()
        if tokens_file:
            try:
                self._read(self._stat())
            except (OSError, TokenFileError) as error:
                raise StartupError(f"auth.tokens_file: {_reason(error)}") from None
        self._rebuild()

    @property
    def empty(self) -> bool:
        self._maybe_reload()
        return not self._entries

    @property
    def tenants(self) -> frozenset[str]:
        """Every tenant some token maps to."""
        self._maybe_reload()
        return frozenset(tenant for _, tenant in self._entries)

    def tenant(self, token: str | None) -> str | None:
        """The token's tenant, or None when it is missing or unknown."""
        self._maybe_reload()
        if not token:
            return None
        offered = token.encode()
        found = None
        for known, tenant in self._entries:  # every entry, so timing says nothing
            if hmac.compare_digest(known, offered):
                found = tenant
        return found

    def _maybe_reload(self) -> None:
        if not self._file:
            return
        now = self._clock()
        if now - self._checked < self._reload_s:
            return
        self._checked = now
        try:
            stamp = self._stat()
            if stamp != self._stamp:
                self._read(stamp)
                self._rebuild()
                log.info("auth.tokens_file read again: %d tokens", len(self._from_file))
        except (OSError, TokenFileError) as error:
            log.warning(
                "auth.tokens_file: %s; the tokens read before stay in force", _reason(error)
            )

    def _stat(self) -> _FileStamp:
        stat = os.stat(self._file)
        return _FileStamp(stat.st_size, stat.st_mtime_ns)

    def _read(self, stamp: _FileStamp) -> None:
        text = Path(self._file).read_text(encoding="utf-8")
        self._from_file = parse_tokens(text, self._file)
        self._stamp = stamp

    def _rebuild(self) -> None:
        merged = {**self._from_file, **self._inline}
        self._entries = tuple((token.encode(), tenant) for token, tenant in merged.items())


def _reason(error: OSError | TokenFileError) -> str:
    if isinstance(error, OSError):
        return f"cannot read {error.filename}: {error.strerror}"
    return str(error)
