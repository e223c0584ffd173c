"""The senders translate every answer of a real next hop into a SendResult."""

from __future__ import annotations

import asyncio
import gzip
from collections.abc import Awaitable, Callable
from typing import Any

import grpc
import pytest
from aiohttp import web
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from processor.config import load_config
from processor.forward.retry import SendOutcome, SendResult
from processor.forward.senders import RECONNECT_BACKOFF_MAX_MS, GrpcSender, HttpSender
from tests.support import CaptureCollector, free_port

Handler = Callable[[web.Request], Awaitable[web.Response]]


async def http_send(handler: Handler, *overrides: str, port: int | None = None) -> SendResult:
    """Serve ``handler`` at /v1/traces on loopback and send one request through HttpSender."""
    app = web.Application()
    app.router.add_post("/v1/traces", handler)
    runner = web.AppRunner(app, auto_decompress=False)  # to see the bytes as sent
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    bound = runner.addresses[0][1]
    config = load_config(
        overrides=[
            "forward.protocol=http",
            f"forward.endpoint=http://127.0.0.1:{port or bound}",
            *overrides,
        ]
    ).forward
    sender = HttpSender(config)
    try:
        return await sender.send(b"\x0a\x00", timeout_s=5)
    finally:
        await sender.close()
        await runner.cleanup()


def run(coroutine: Awaitable[Any]) -> Any:
    return asyncio.run(asyncio.wait_for(coroutine, 30))  # type: ignore[arg-type]


class TestHttpSender:
    def test_success_with_partial_success_reports_the_rejected_spans(self) -> None:
        async def handler(request: web.Request) -> web.Response:
            response = ExportTraceServiceResponse()
            response.partial_success.rejected_spans = 3
            response.partial_success.error_message = "three bad spans"
            return web.Response(
                body=response.SerializeToString(), content_type="application/x-protobuf"
            )

        result = run(http_send(handler))
        assert result == SendResult(
            SendOutcome.DELIVERED, rejected_spans=3, detail="three bad spans"
        )

    @pytest.mark.parametrize(
        ("status", "retry_after", "expected"),
        [
            (503, "7", SendResult(SendOutcome.RETRYABLE, 7.0, detail="HTTP 503")),
            (429, "2", SendResult(SendOutcome.RETRYABLE, 2.0, detail="HTTP 429")),
            (502, None, SendResult(SendOutcome.RETRYABLE, None, detail="HTTP 502")),
            (
                504,
                "Wed, 21 Oct 2015 07:28:00 GMT",
                SendResult(SendOutcome.RETRYABLE, None, detail="HTTP 504"),
            ),
            # Permanent; a 400 or a 413 may be about the data (the export is split), a 401
            # is about us (it is not: every part would be refused alike).
            (
                400,
                None,
                SendResult(SendOutcome.PERMANENT, None, detail="HTTP 400", data_refused=True),
            ),
            (
                413,
                None,
                SendResult(SendOutcome.PERMANENT, None, detail="HTTP 413", data_refused=True),
            ),
            (401, None, SendResult(SendOutcome.PERMANENT, None, detail="HTTP 401")),
        ],
        ids=["503", "429", "502", "504-date", "400", "413", "401"],
    )
    def test_status_codes_follow_otlp(
        self, status: int, retry_after: str | None, expected: SendResult
    ) -> None:
        async def handler(request: web.Request) -> web.Response:
            headers = {"Retry-After": retry_after} if retry_after else {}
            return web.Response(status=status, headers=headers)

        assert run(http_send(handler)) == expected

    def test_the_channel_reconnects_within_seconds_not_grpcs_two_minutes(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        built: list[dict[str, object]] = []
        real = grpc.aio.insecure_channel

        def recording(target: str, options: Any = None, **kwargs: Any) -> Any:
            built.append(dict(options or ()))
            return real(target, options=options, **kwargs)

        monkeypatch.setattr(grpc.aio, "insecure_channel", recording)
        config = load_config(overrides=[f"forward.endpoint=127.0.0.1:{free_port()}"]).forward

        async def scenario() -> None:
            await GrpcSender(config).close()

        run(scenario())
        (options,) = built
        assert options["grpc.max_reconnect_backoff_ms"] == RECONNECT_BACKOFF_MAX_MS <= 5_000

    def test_an_unreachable_next_hop_is_retryable(self) -> None:
        async def handler(request: web.Request) -> web.Response:
            raise AssertionError("not reached")

        result = run(http_send(handler, port=free_port()))
        assert result.outcome is SendOutcome.RETRYABLE

    def test_gzip_and_headers_are_sent(self) -> None:
        seen: dict[str, Any] = {}

        async def handler(request: web.Request) -> web.Response:
            seen["encoding"] = request.headers.get("Content-Encoding")
            seen["type"] = request.headers.get("Content-Type")
            seen["tenant"] = request.headers.get("x-tenant")
            seen["body"] = gzip.decompress(await request.read())
            return web.Response(body=b"", content_type="application/x-protobuf")

        result = run(http_send(handler, "forward.compression=gzip", "forward.headers=x-tenant=a"))
        assert result.outcome is SendOutcome.DELIVERED
        assert seen == {
            "encoding": "gzip",
            "type": "application/x-protobuf",
            "tenant": "a",
            "body": b"\x0a\x00",
        }


class TestGrpcSender:
    def test_headers_travel_as_metadata_and_gzip_is_accepted(
        self, next_hop: CaptureCollector
    ) -> None:
        config = load_config(
            overrides=[
                f"forward.endpoint={next_hop.endpoint}",
                "forward.compression=gzip",
                "forward.headers=Authorization=Bearer t",
            ]
        ).forward

        async def scenario() -> SendResult:
            sender = GrpcSender(config)
            try:
                return await sender.send(b"\x0a\x00", timeout_s=5)
            finally:
                await sender.close()

        assert run(scenario()).outcome is SendOutcome.DELIVERED
        assert len(next_hop.requests) == 1
        assert ("authorization", "Bearer t") in next_hop.metadata[0]

    def test_an_unreachable_next_hop_is_retryable(self) -> None:
        config = load_config(overrides=[f"forward.endpoint=127.0.0.1:{free_port()}"]).forward

        async def scenario() -> tuple[SendResult, bool]:
            sender = GrpcSender(config)
            try:
                return await sender.send(b"", timeout_s=2), await sender.reachable(0.2)
            finally:
                await sender.close()

        result, reachable = run(scenario())
        assert result.outcome is SendOutcome.RETRYABLE
        assert result.detail.startswith("UNAVAILABLE")
        assert reachable is False
