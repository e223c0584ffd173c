"""The telemetry port: Prometheus ``/metrics``, ``/healthz`` (alive), ``/readyz`` (serving)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence

from aiohttp import web
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder

Readiness = Callable[[], Awaitable[tuple[bool, str]]]


def make_app(
    registry: CollectorRegistry,
    readiness: Readiness,
    prepare: Sequence[Callable[[], None]] = (),
) -> web.Application:
    """``prepare``: steps that copy live state on the event loop before a scrape, so the
    collectors can then build and format tens of thousands of samples in a thread. The
    other collectors read only counters (with their own locks) and plain numbers there."""
    one_at_a_time = asyncio.Lock()  # each prepared copy is read by the scrape that made it

    async def metrics(request: web.Request) -> web.Response:
        # OpenMetrics when the scraper asks for it (Prometheus does), text format otherwise.
        encode, content_type = choose_encoder(request.headers.get("Accept", ""))
        async with one_at_a_time:
            for step in prepare:
                step()
            body = await asyncio.to_thread(encode, registry)
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
