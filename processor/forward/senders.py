"""Senders: one export attempt to the next hop, translated into a SendResult.

They never raise for a failed attempt: every answer of the next hop, and every way of
not getting one, maps to DELIVERED, RETRYABLE or PERMANENT.
"""

from __future__ import annotations

import asyncio
import gzip
from collections.abc import Mapping
from pathlib import Path
from typing import Protocol
from urllib.parse import urlsplit

import aiohttp
import grpc
from google.rpc import error_details_pb2, status_pb2
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from processor.config import Compression, ForwardConfig, ForwardProtocol
from processor.errors import StartupError
from processor.forward.retry import (
    RETRYABLE_HTTP_STATUSES,
    SendOutcome,
    SendResult,
    grpc_code_is_retryable,
)
from processor.otlp import EXPORT_METHOD, PROTOBUF, STATUS_DETAILS_KEY, TRACES_PATH

_DETAIL_CHARS = 200  # next-hop error texts end up in our logs: keep them short


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
        self.target = config.endpoint
        if config.insecure:
            self._channel = grpc.aio.insecure_channel(config.endpoint)
        else:
            root = _read_ca(config.ca_file) if config.ca_file else None
            credentials = grpc.ssl_channel_credentials(root_certificates=root)
            self._channel = grpc.aio.secure_channel(config.endpoint, credentials)
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
        self._session: aiohttp.ClientSession | None = None

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None:  # created lazily: it must belong to the running loop
            self._session = aiohttp.ClientSession()
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
                    detail=f"HTTP {response.status}",
                )
        except (aiohttp.ClientError, TimeoutError) as error:
            return SendResult(
                SendOutcome.RETRYABLE, detail=f"{type(error).__name__}: {error}"[:_DETAIL_CHARS]
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


def _retry_after_s(headers: Mapping[str, str]) -> float | None:
    value = headers.get("Retry-After", "")
    # Only the delay-seconds form; an HTTP-date falls back to our own backoff.
    return float(value) if value.strip().isdigit() else None


def _read_ca(path: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as error:
        raise StartupError(f"forward.ca_file: cannot read {path!r}: {error.strerror}") from None


def make_sender(config: ForwardConfig) -> Sender:
    if config.protocol is ForwardProtocol.HTTP:
        return HttpSender(config)
    return GrpcSender(config)
