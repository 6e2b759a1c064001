"""The operator's HTTP endpoints: /metrics for Prometheus, /readyz (and /healthz) for the kubelet.

Liveness fails when cycles have stopped (the loop is stuck); readiness waits for
the watch cache's first full listing. A standby replica is live and ready: it
keeps its cache warm to take over at once. Under `kai run` kopf serves liveness
(`kai.operator.hosting`), so /healthz is served here only when the operator runs
embedded without kopf (`live` given), as in the integration tests.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from kai.operator.metrics import Metrics


class HealthServer:
    def __init__(
        self,
        metrics: Metrics,
        live: Callable[[], bool] | None,
        ready: Callable[[], bool],
        host: str,
        port: int,
    ) -> None:
        self._metrics = metrics
        self._live = live
        self._ready = ready
        self._host = host
        self._port = port
        self._runner: web.AppRunner | None = None
        self.port = port

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/metrics", self._serve_metrics)
        if self._live is not None:
            app.router.add_get("/healthz", self._probe(self._live))
        app.router.add_get("/readyz", self._probe(self._ready))
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self._host, self._port)
        await site.start()
        sockets = getattr(site._server, "sockets", None) or []  # the chosen port when 0 was asked
        if sockets:
            self.port = int(sockets[0].getsockname()[1])

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _serve_metrics(self, _request: web.Request) -> web.Response:
        body = generate_latest(self._metrics.registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    @staticmethod
    def _probe(check: Callable[[], bool]) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
        async def handler(_request: web.Request) -> web.StreamResponse:
            return (
                web.Response(text="ok\n") if check() else web.Response(status=503, text="not ok\n")
            )

        return handler
