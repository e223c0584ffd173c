"""Who is asking at the advisory port: bearer tokens to tenants (the shared token map,
``processor/auth/tokens.py``) and admin tokens. Its TLS is ``processor/auth/tls.py``.

Tokens are compared in constant time and never logged; a caller is named in logs by its
tenant and peer address only.
"""

from __future__ import annotations

import hmac

from processor.auth.tokens import TokenMap
from processor.config import AdvisoriesConfig

DEFAULT_TENANT = ""


class Authenticator:
    def __init__(self, config: AdvisoriesConfig, tokens: TokenMap | None = None) -> None:
        """``tokens``: the token map the OTLP receivers share (advisories.tokens and
        auth.tokens_file); by default, advisories.tokens alone."""
        self._tokens = tokens if tokens is not None else TokenMap(config.tokens)
        self._admin = tuple(config.admin_tokens)

    @property
    def open(self) -> bool:
        """No tokens configured: every caller is the default tenant."""
        return self._tokens.empty

    def tenants(self) -> frozenset[str]:
        """The tenants of the token map (none without tokens)."""
        return self._tokens.tenants

    def tenant(self, token: str | None) -> str | None:
        """The caller's tenant, or None when it must be refused."""
        if self.open:
            return DEFAULT_TENANT
        return self._tokens.tenant(token)

    def is_admin(self, token: str | None) -> bool:
        if not token:
            return False
        matched = False
        for known in self._admin:
            matched |= hmac.compare_digest(known.encode(), token.encode())
        return matched
