"""A watch stream that sends a line that is no event, or an event the informer cannot apply,
costs a relist, never the process: the informer logs it, relists, and the others go on."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web
from structlog.testing import capture_logs

from kai.kube.cache import WatchCache
from kai.kube.client import _READ_BUFFER
from kai.kube.informer import Informer, Resource
from tests.unit.kube.fake_api import kube_at, never, serving

PODS = Resource("Pod", "/api/v1/pods", namespaced=True)
NODES = Resource("Node", "/api/v1/nodes", namespaced=False)


def _pod(name: str, version: int, **extra: Any) -> dict[str, Any]:
    metadata = {"name": name, "namespace": "ns", "resourceVersion": str(version)}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, **extra}


def _node(name: str, version: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "resourceVersion": str(version)},
    }


def _line(kind: str, obj: object) -> bytes:
    return json.dumps({"type": kind, "object": obj}).encode() + b"\n"


class Collection:
    """One resource as the API server serves it: a listing of `items`, and scripted watches.

    The n-th watch sends `watches[n]` (the last script for any later watch), then
    stays open without events until the test ends.
    """

    def __init__(self, kind: str, items: list[dict[str, Any]], watches: list[list[bytes]]) -> None:
        self.kind = kind
        self.items = items
        self.watches = watches
        self.lists = 0
        self.relisted = asyncio.Event()
        self.before_watch: Callable[[int], Awaitable[None]] | None = None
        self._watched = 0

    async def answer(self, request: web.Request) -> web.StreamResponse:
        if request.query.get("watch") != "true":
            self.lists += 1
            if self.lists > 1:
                self.relisted.set()
            version = max(int(item["metadata"]["resourceVersion"]) for item in self.items)
            return web.json_response(
                {
                    "apiVersion": "v1",
                    "kind": f"{self.kind}List",
                    "metadata": {"resourceVersion": str(version)},
                    "items": self.items,
                }
            )
        number, self._watched = self._watched, self._watched + 1
        if self.before_watch is not None:
            await self.before_watch(number)
        response = web.StreamResponse()
        await response.prepare(request)
        for line in self.watches[min(number, len(self.watches) - 1)]:
            await response.write(line)
        await never()
        return response


async def _until(condition: Callable[[], bool], *watched: asyncio.Task[None]) -> None:
    """Wait for `condition`; a watched task that ends first fails the test with its error."""
    async with asyncio.timeout(60):
        while not condition():
            for task in watched:
                if task.done():
                    raise AssertionError(f"{task.get_name()} ended") from task.exception()
            await asyncio.sleep(0.02)


async def _recovers_from(bad_line: bytes, missed: dict[str, Any]) -> None:
    """An informer whose first watch delivers one event, then `bad_line` in place of `missed`'s."""
    pods = Collection(
        "Pod",
        [_pod("a", 1)],
        [[_line("ADDED", _pod("b", 2)), bad_line], []],
    )
    with capture_logs() as logs:
        await _follow(pods, missed)
    warnings = [(entry["event"], entry.get("resource")) for entry in logs]
    assert ("unreadable watch event; relisting", "Pod") in warnings


async def _follow(pods: Collection, missed: dict[str, Any]) -> None:
    async with serving(pods.answer) as url, kube_at(url) as kube:
        informer = Informer(kube, PODS, lambda _change: None)
        task = asyncio.create_task(informer.run(), name="pod informer")
        try:
            await _until(lambda: "ns/b" in informer.store.objects, task)
            pods.items = [_pod("a", 1), _pod("b", 2), missed]  # what a relist finds
            await _until(lambda: "ns/c" in informer.store.objects, task)
        finally:
            task.cancel()
    assert set(informer.store.objects) == {"ns/a", "ns/b", "ns/c"}
    assert pods.lists == 2


async def test_an_undecodable_watch_line_costs_a_relist_not_the_informer() -> None:
    await _recovers_from(b'{"type": "ADDED", "object": {"metad\n', _pod("c", 3))


async def test_a_watch_line_over_the_line_limit_costs_a_relist_not_the_informer() -> None:
    big = _pod("c", 3, data={"blob": "x" * (2 * _READ_BUFFER + 1)})
    await _recovers_from(_line("ADDED", big), big)


async def test_an_event_the_store_cannot_apply_ends_neither_the_cache_nor_other_informers() -> None:
    pods = Collection("Pod", [_pod("a", 1)], [[_line("ADDED", ["not", "an", "object"])], []])
    nodes = Collection("Node", [_node("m", 4)], [[_line("ADDED", _node("n", 5))]])

    async def after_the_pod_relist(_number: int) -> None:
        await pods.relisted.wait()  # the node shows only if its informer outlived the pods' error

    nodes.before_watch = after_the_pod_relist

    async def answer(request: web.Request) -> web.StreamResponse:
        collection = pods if request.path == PODS.path else nodes
        return await collection.answer(request)

    async with serving(answer) as url, kube_at(url) as kube:
        cache = WatchCache(kube, [PODS, NODES])
        task = asyncio.create_task(cache.run(), name="watch cache")
        try:
            await _until(lambda: "n" in cache.current(NODES), task)
            assert not task.done()
        finally:
            task.cancel()
    assert pods.lists >= 2 and set(cache.current(PODS)) == {"ns/a"}
