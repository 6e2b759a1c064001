"""A tiny in-process HTTP server standing in for kube-apiserver where the real one cannot fail.

The real API server cannot be made to answer 429 or 503, to stall, or to send a
malformed watch line on demand; these tests give the client exactly that, over a
real socket, and record what the client asked for.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable

from aiohttp import web
from kubernetes_asyncio.client import ApiClient, Configuration

from kai.kube.client import Kube
from kai.kube.retry import RetryPolicy

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


async def never() -> None:
    """Stall a handler: no answer until the client gives up (then it is cancelled)."""
    await asyncio.get_running_loop().create_future()


QUICK = RetryPolicy(deadline_seconds=10.0, first_backoff_seconds=0.01, max_backoff_seconds=0.05)
"""Retries that finish fast; the deadline is long enough not to cut them short on a loaded machine."""


@contextlib.asynccontextmanager
async def serving(handler: Handler) -> AsyncIterator[str]:
    """The server's base URL while `handler` answers every request."""

    async def route(request: web.Request) -> web.StreamResponse:
        return await handler(request)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", route)
    # A handler left waiting is cancelled when the client goes, so nothing outlives the test.
    runner = web.AppRunner(app, handler_cancellation=True, shutdown_timeout=1.0)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        host, port = runner.addresses[0][:2]
        yield f"http://{host}:{port}"
    finally:
        await runner.cleanup()


@contextlib.asynccontextmanager
async def kube_at(url: str, retry: RetryPolicy = QUICK) -> AsyncIterator[Kube]:
    """A client for the server at `url`, closed on exit."""
    async with ApiClient(Configuration(host=url)) as api:
        yield Kube(api, retry)


def status(code: int, reason: str, headers: dict[str, str] | None = None) -> web.Response:
    """An answer shaped like the API server's Status errors."""
    body = {"kind": "Status", "status": "Failure", "reason": reason, "code": code}
    return web.json_response(body, status=code, headers=headers)
