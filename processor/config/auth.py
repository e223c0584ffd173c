"""The token map the OTLP receivers and the advisory port share, and how it is reloaded."""

from __future__ import annotations

from dataclasses import dataclass

from processor.config.checks import not_positive

DEFAULT_TOKENS_RELOAD_S = 5.0  # the tokens file is looked at for changes this often


@dataclass(frozen=True, kw_only=True)
class AuthConfig:
    """The token map, shared by the OTLP receivers and the advisory port: bearer token ->
    tenant. ``advisories.tokens`` holds tokens inline; ``tokens_file`` holds more, one
    ``token=tenant`` a line (``#`` comments), and is read again when it changes, so a token
    is added or revoked without a restart."""

    tokens_file: str = ""
    tokens_reload_s: float = DEFAULT_TOKENS_RELOAD_S

    def validate(self, prefix: str) -> list[str]:
        return not_positive(prefix, self, "tokens_reload_s")
