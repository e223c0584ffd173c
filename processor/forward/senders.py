"""Senders: one export attempt to the next hop, translated into a SendResult.

They never raise for a failed attempt: every answer of the next hop, and every way of
not getting one, maps to DELIVERED, RETRYABLE or PERMANENT.
"""

from __future__ import annotations

import asyncio
import gzip
import ssl
from collections.abc import Mapping
from pathlib import Path
from typing import Protocol
from urllib.parse import urlsplit

import aiohttp
import grpc
from google.rpc import error_details_pb2, status_pb2
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from processor.config import Compression, ForwardConfig, ForwardProtocol, grpc_target
from processor.errors import StartupError
from processor.forward.retry import (
    ENDPOINT_GRPC_CODES,
    ENDPOINT_HTTP_STATUSES,
    RETRYABLE_HTTP_STATUSES,
    SendOutcome,
    SendResult,
    grpc_code_is_retryable,
)
from processor.request.otlp import EXPORT_METHOD, PROTOBUF, STATUS_DETAILS_KEY, TRACES_PATH

_DETAIL_CHARS = 200  # next-hop error texts end up in our logs: keep them short
# gRPC waits between reconnects up to 120 s by default, and while it waits every export
# fails at once: a next hop back after a long outage would go unused for up to two
# minutes, the queue filling and senders refused meanwhile. A few seconds at most.
RECONNECT_BACKOFF_INITIAL_MS = 1_000
RECONNECT_BACKOFF_MAX_MS = 5_000
CHANNEL_OPTIONS = (
    ("grpc.initial_reconnect_backoff_ms", RECONNECT_BACKOFF_INITIAL_MS),
    ("grpc.min_reconnect_backoff_ms", RECONNECT_BACKOFF_INITIAL_MS),
    ("grpc.max_reconnect_backoff_ms", RECONNECT_BACKOFF_MAX_MS),
)


class Sender(Protocol):
    target: str

    async def send(self, payload: bytes, timeout_s: float) -> SendResult: ...

    async def reachable(self, timeout_s: float) -> bool: ...

    async def close(self) -> None: ...


def delivered(response_bytes: bytes) -> SendResult:
    try:
        response = ExportTraceServiceResponse.FromString(response_bytes)
    except Exception:  # a next hop that answers success with junk still took the spans
        return SendResult(SendOutcome.DELIVERED)
    partial = response.partial_success
    return SendResult(
        SendOutcome.DELIVERED,
        rejected_spans=partial.rejected_spans,
        detail=partial.error_message[:_DETAIL_CHARS],
    )


def retry_info_s(trailing_metadata: object) -> float | None:
    """The RetryInfo delay carried in a gRPC error's status details, if any."""
    for key, value in trailing_metadata or ():  # type: ignore[attr-defined]
        if key != STATUS_DETAILS_KEY:
            continue
        status = status_pb2.Status.FromString(value)
        for detail in status.details:
            info = error_details_pb2.RetryInfo()
            if detail.Unpack(info):
                return float(info.retry_delay.ToNanoseconds()) / 1e9
    return None


class GrpcSender:
    def __init__(self, config: ForwardConfig) -> None:
        # http://host:port and https://host:port as the OpenTelemetry SDK reads them: gRPC
        # itself would take the scheme for a name resolver and fail every export.
        address, tls = grpc_target(config.endpoint, config.insecure)
        self.target = config.endpoint
        if not tls:
            self._channel = grpc.aio.insecure_channel(address, options=CHANNEL_OPTIONS)
        else:
            credentials = grpc.ssl_channel_credentials(
                root_certificates=_read(config.ca_file, "forward.ca_file"),
                private_key=_read(config.key_file, "forward.key_file"),
                certificate_chain=_read(config.cert_file, "forward.cert_file"),
            )
            self._channel = grpc.aio.secure_channel(address, credentials, options=CHANNEL_OPTIONS)
        self._export = self._channel.unary_unary(EXPORT_METHOD)  # raw bytes both ways
        self._metadata = tuple((k.lower(), v) for k, v in config.headers.items())
        self._compression = (
            grpc.Compression.Gzip if config.compression is Compression.GZIP else None
        )

    async def send(self, payload: bytes, timeout_s: float) -> SendResult:
        try:
            response = await self._export(
                payload,
                timeout=timeout_s,
                metadata=self._metadata,
                compression=self._compression,
            )
        except grpc.aio.AioRpcError as error:
            retry_after = retry_info_s(error.trailing_metadata())
            retryable = grpc_code_is_retryable(error.code(), retry_after is not None)
            return SendResult(
                SendOutcome.RETRYABLE if retryable else SendOutcome.PERMANENT,
                retry_after_s=retry_after,
                detail=f"{error.code().name}: {(error.details() or '')[:_DETAIL_CHARS]}",
                data_refused=not retryable and error.code() not in ENDPOINT_GRPC_CODES,
                timed_out=error.code() is grpc.StatusCode.DEADLINE_EXCEEDED,
            )
        return delivered(response)

    async def reachable(self, timeout_s: float) -> bool:
        try:
            await asyncio.wait_for(self._channel.channel_ready(), timeout_s)
        except TimeoutError:
            return False
        return True

    async def close(self) -> None:
        await self._channel.close()


class HttpSender:
    def __init__(self, config: ForwardConfig) -> None:
        base = config.endpoint.rstrip("/")
        self.target = base if base.endswith(TRACES_PATH) else base + TRACES_PATH
        self._headers: dict[str, str] = {**config.headers, "Content-Type": PROTOBUF}
        self._gzip = config.compression is Compression.GZIP
        if self._gzip:
            self._headers["Content-Encoding"] = "gzip"
        self._ssl = _client_ssl_context(config) if config.tls else None
        self._session: aiohttp.ClientSession | None = None

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None:  # created lazily: it must belong to the running loop
            connector = aiohttp.TCPConnector(ssl=self._ssl) if self._ssl is not None else None
            self._session = aiohttp.ClientSession(connector=connector)
        return self._session

    async def send(self, payload: bytes, timeout_s: float) -> SendResult:
        body = gzip.compress(payload, compresslevel=1) if self._gzip else payload
        try:
            async with self._client().post(
                self.target,
                data=body,
                headers=self._headers,
                timeout=aiohttp.ClientTimeout(total=timeout_s),
            ) as response:
                content = await response.read()
                if response.status == 200:
                    return delivered(content)
                retryable = response.status in RETRYABLE_HTTP_STATUSES
                return SendResult(
                    SendOutcome.RETRYABLE if retryable else SendOutcome.PERMANENT,
                    retry_after_s=_retry_after_s(response.headers),
                    detail=_http_detail(response.status, response.content_type, content),
                    data_refused=not retryable and response.status not in ENDPOINT_HTTP_STATUSES,
                )
        except (aiohttp.ClientError, TimeoutError) as error:
            return SendResult(
                SendOutcome.RETRYABLE,
                detail=f"{type(error).__name__}: {error}"[:_DETAIL_CHARS],
                # Waited in vain for the answer, not for a connection (which never took it).
                timed_out=isinstance(error, TimeoutError)
                and not isinstance(error, aiohttp.ConnectionTimeoutError),
            )

    async def reachable(self, timeout_s: float) -> bool:
        parts = urlsplit(self.target)
        port = parts.port or (443 if parts.scheme == "https" else 80)
        try:
            _, writer = await asyncio.wait_for(
                asyncio.open_connection(parts.hostname, port), timeout_s
            )
        except (OSError, TimeoutError):
            return False
        writer.close()
        return True

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()


def _http_detail(status: int, content_type: str, content: bytes) -> str:
    """``HTTP 400``, and the message of the ``google.rpc.Status`` body OTLP/HTTP sends."""
    message = ""
    if content and content_type == PROTOBUF:
        try:
            message = status_pb2.Status.FromString(content).message
        except Exception:  # a body that is not a Status says nothing we can use
            message = ""
    text = f"HTTP {status}: {message}" if message else f"HTTP {status}"
    return text[:_DETAIL_CHARS]


def _retry_after_s(headers: Mapping[str, str]) -> float | None:
    value = headers.get("Retry-After", "")
    # Only the delay-seconds form; an HTTP-date falls back to our own backoff.
    return float(value) if value.strip().isdigit() else None


def _read(path: str, key: str) -> bytes | None:
    """A PEM file named by ``key``, or None when it is not set."""
    if not path:
        return None
    try:
        return Path(path).read_bytes()
    except OSError as error:
        raise StartupError(f"{key}: cannot read {path!r}: {error.strerror}") from None


def _client_ssl_context(config: ForwardConfig) -> ssl.SSLContext:
    """OTLP/HTTP over TLS: the CA to trust (or the system's), and a client certificate."""
    for path, key in ((config.ca_file, "forward.ca_file"), (config.cert_file, "forward.cert_file")):
        _read(path, key)  # a missing file is a StartupError that names its key
    context = ssl.create_default_context(cafile=config.ca_file or None)
    if config.cert_file:
        try:
            context.load_cert_chain(config.cert_file, config.key_file)
        except (OSError, ssl.SSLError) as error:
            raise StartupError(
                f"forward.cert_file, forward.key_file: cannot load the client certificate "
                f"{config.cert_file!r}: {error}"
            ) from None
    return context


def make_sender(config: ForwardConfig) -> Sender:
    if config.protocol is ForwardProtocol.HTTP:
        return HttpSender(config)
    return GrpcSender(config)
