"""The telemetry port: Prometheus ``/metrics``, ``/healthz`` (alive), ``/readyz`` (serving)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable

from aiohttp import web
from prometheus_client import CollectorRegistry
from prometheus_client.core import Metric
from prometheus_client.exposition import choose_encoder

Readiness = Callable[[], Awaitable[tuple[bool, str]]]


class _Collected:
    """Families already read: what the encoder iterates over, away from the event loop."""

    def __init__(self, families: list[Metric]) -> None:
        self._families = families

    def collect(self) -> Iterable[Metric]:
        return self._families


def make_app(registry: CollectorRegistry, readiness: Readiness) -> web.Application:
    async def metrics(request: web.Request) -> web.Response:
        # OpenMetrics when the scraper asks for it (Prometheus does), text format otherwise.
        encode, content_type = choose_encoder(request.headers.get("Accept", ""))
        # Reading the state happens on the loop that owns it; formatting a large scrape
        # (tens of thousands of samples) happens in a thread, so intake does not wait.
        families = list(registry.collect())
        body = await asyncio.to_thread(encode, _Collected(families))
        return web.Response(body=body, headers={"Content-Type": content_type})

    async def healthz(request: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    async def readyz(request: web.Request) -> web.Response:
        ready, reason = await readiness()
        return web.Response(text=reason + "\n", status=200 if ready else 503)

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    return app
