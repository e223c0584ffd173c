"""Who may send spans: the OTLP receivers' authentication, the same for gRPC and HTTP.

The transports hand over what they know of the caller (the bearer token, the common name
of a verified client certificate); the gate says who it is, or that it is refused. A
refused request is answered UNAUTHENTICATED (gRPC) or 401 (HTTP) before anything is
decoded: nothing of it is analysed or forwarded.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from processor.auth.tokens import TokenMap
from processor.config import ReceiverAuth
from processor.request.sender import Sender

UNAUTHENTICATED_MESSAGE = "missing or unknown bearer token"
NO_CERTIFICATE_MESSAGE = "no verified client certificate"


class Gate:
    def __init__(self, auth: ReceiverAuth, tokens: TokenMap | None = None) -> None:
        if auth is ReceiverAuth.TOKEN and tokens is None:
            raise ValueError("token authentication needs a token map")
        self.auth = auth
        self._tokens = tokens

    @property
    def open(self) -> bool:
        """Anyone who reaches the port is let in, and names its own tenant."""
        return self.auth is ReceiverAuth.NONE

    def admit(self, peer: str, token: str | None, common_name: str | None) -> Sender | str:
        """The sender, its tenant from its identity; or why it is refused."""
        if self.auth is ReceiverAuth.NONE:
            return Sender(peer=peer)
        if self.auth is ReceiverAuth.TOKEN:
            assert self._tokens is not None
            tenant = self._tokens.tenant(token)
            return UNAUTHENTICATED_MESSAGE if tenant is None else Sender(peer, tenant)
        return NO_CERTIFICATE_MESSAGE if not common_name else Sender(peer, common_name)


def grpc_common_name(auth_context: Mapping[str, Sequence[bytes]]) -> str | None:
    """The verified client certificate's common name, from gRPC's auth context."""
    names = auth_context.get("x509_common_name") or ()
    return names[0].decode("utf-8", "replace") if names else None


def ssl_common_name(peercert: Any) -> str | None:
    """The common name of a verified peer certificate, as ``ssl.getpeercert()`` gives it."""
    if not isinstance(peercert, dict):
        return None
    for rdn in peercert.get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                return str(value)
    return None
