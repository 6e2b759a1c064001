"""The scheduling loop stops when cancelled, and a clean stop lets the last status go out.

On Python 3.11 `asyncio.wait_for` returns normally when its awaitable completes in
the same loop iteration as the cancellation, and the cancellation is lost: the
loop ran on after its operator was stopped (issue 14: a test's operators went on
binding into the next test).

A cycle's status and events are written while the next cycle runs; a stop used to
cancel them, so the cluster did not show the last binds' Queue status until another
leader came. They now get a bounded grace before the Lease is released.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from kubernetes_asyncio.client import ApiClient

from kai.kube.client import Kube
from kai.operator.cache import ClusterCache
from kai.operator.loop import SchedulingLoop


def _loop(cache: ClusterCache, stop_grace_seconds: float = 10.0) -> SchedulingLoop:
    return SchedulingLoop(  # only the cache, the timings and the trailing writes matter here
        cache=cache,
        builder=None,
        grouper=None,
        binder=None,
        sharing=None,
        status=None,
        stamps=None,
        events=None,
        backoff=None,
        metrics=None,
        engine=None,
        executor=None,
        period_seconds=60.0,
        debounce_seconds=0.0,
        is_leader=lambda: True,
        failed_cycles_unhealthy=5,
        stop_grace_seconds=stop_grace_seconds,
    )


async def test_a_cancel_that_arrives_with_a_change_stops_the_wait() -> None:
    async with ApiClient() as client:  # never used to send: the wait only reads the cache's event
        cache = ClusterCache(Kube(client))
        cache.changed.clear()
        loop = _loop(cache)
        waiting = asyncio.create_task(loop._wait(time.monotonic()))
        await asyncio.sleep(0)  # the task now waits for a change
        cache.changed.set()  # the change wakes it ...
        waiting.cancel()  # ... as the operator is stopped
        with pytest.raises(asyncio.CancelledError):
            await waiting


async def test_a_stop_waits_for_the_last_cycles_status() -> None:
    written = asyncio.Event()
    release = asyncio.Event()

    async def last_status() -> None:
        await release.wait()
        written.set()

    async with ApiClient() as client, asyncio.timeout(60):
        loop = _loop(ClusterCache(Kube(client)))  # never synced: run() waits until cancelled
        loop._trailing = asyncio.ensure_future(last_status())
        running = asyncio.create_task(loop.run())
        await asyncio.sleep(0)
        running.cancel()  # the stop comes while the status is still on its way
        await asyncio.sleep(0)
        release.set()
        with pytest.raises(asyncio.CancelledError):
            await running
        assert written.is_set()


async def test_a_stop_does_not_wait_past_its_grace() -> None:
    never = asyncio.Event()
    async with ApiClient() as client, asyncio.timeout(60):
        loop = _loop(ClusterCache(Kube(client)), stop_grace_seconds=0.05)
        trailing = asyncio.ensure_future(never.wait())
        loop._trailing = trailing
        running = asyncio.create_task(loop.run())
        await asyncio.sleep(0)
        running.cancel()
        with pytest.raises(asyncio.CancelledError):
            await running
        await asyncio.sleep(0)
        assert trailing.cancelled()  # dropped: it must not outlive the scheduler
