"""The scheduling loop's wait between cycles; it stops when cancelled, and a clean stop
lets the last status go out.

A change is let settle for the debounce before a cycle starts, but a new pod waiting for
kai starts it at once: one pod beside 8,000 bound spent half its time to bind waiting.

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
from typing import Any

import pytest
from kubernetes_asyncio.client import ApiClient

from kai.kube.client import Kube
from kai.kube.informer import Change
from kai.operator.cache import ClusterCache
from kai.operator.loop import SchedulingLoop
from tests.unit.operator.partial_loop import loop_reaching


def _loop(
    cache: ClusterCache, stop_grace_seconds: float = 10.0, debounce_seconds: float = 0.0
) -> SchedulingLoop:
    return loop_reaching(  # only the cache, the timings and the trailing writes matter here
        cache=cache,
        period_seconds=3600.0,  # the waits here end by a change or a cancel, never the period
        debounce_seconds=debounce_seconds,
        is_leader=lambda: True,
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


def _pod(**spec: str) -> dict[str, Any]:
    return {
        "metadata": {"name": "p", "namespace": "ns"},
        "spec": {"schedulerName": "kai-scheduler", **spec},
    }


async def test_a_new_pod_waiting_for_kai_ends_the_debounce_other_changes_do_not() -> None:
    async with ApiClient() as client, asyncio.timeout(60):
        cache = ClusterCache(Kube(client))  # fed as its informers feed it
        cache.changed.clear()
        loop = _loop(cache, debounce_seconds=3600.0)
        waiting = asyncio.create_task(loop._wait(time.monotonic()))
        cache._note_change(Change("Node", "node-1"))  # a change: the debounce begins
        cache._note_change(Change("Pod", "ns/p"))  # a pod changed
        cache._note_change(Change("Pod", None))  # a relist
        cache._note_change(Change("Pod", "ns/p", _pod(nodeName="node-1")))  # not waiting for kai
        cache._note_change(Change("Pod", "ns/p", _pod(schedulerName="default-scheduler")))
        for _ in range(20):
            await asyncio.sleep(0)
        assert not waiting.done()
        cache._note_change(Change("Pod", "ns/p", _pod()))
        await waiting
        assert not cache.changed.is_set()
        assert not cache.pod_arrived.is_set()


async def test_a_pod_that_came_during_a_cycle_starts_the_next_at_once() -> None:
    async with ApiClient() as client, asyncio.timeout(60):
        cache = ClusterCache(Kube(client))
        cache._note_change(Change("Pod", "ns/p", _pod()))
        await _loop(cache, debounce_seconds=3600.0)._wait(time.monotonic())


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

        async def last_cycles_writes() -> None:
            await never.wait()

        trailing = asyncio.ensure_future(last_cycles_writes())
        loop._trailing = trailing
        running = asyncio.create_task(loop.run())
        await asyncio.sleep(0)
        running.cancel()
        with pytest.raises(asyncio.CancelledError):
            await running
        await asyncio.sleep(0)
        assert trailing.cancelled()  # dropped: it must not outlive the scheduler
