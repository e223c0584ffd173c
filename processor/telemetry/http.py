"""The telemetry port: Prometheus ``/metrics``, ``/healthz`` (alive), ``/readyz`` (serving)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiohttp import web
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder

Readiness = Callable[[], Awaitable[tuple[bool, str]]]


def make_app(registry: CollectorRegistry, readiness: Readiness) -> web.Application:
    async def metrics(request: web.Request) -> web.Response:
        # OpenMetrics when the scraper asks for it (Prometheus does), text format otherwise.
        encode, content_type = choose_encoder(request.headers.get("Accept", ""))
        return web.Response(body=encode(registry), headers={"Content-Type": content_type})

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
