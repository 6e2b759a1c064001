"""The scheduling loop stops when cancelled, even as a cluster change wakes it at that moment.

On Python 3.11 `asyncio.wait_for` returns normally when its awaitable completes in
the same loop iteration as the cancellation, and the cancellation is lost: the
loop ran on after its operator was stopped (issue 14: a test's operators went on
binding into the next test).
"""

from __future__ import annotations

import asyncio
import time

import pytest
from kubernetes_asyncio.client import ApiClient

from kai.kube.client import Kube
from kai.operator.cache import ClusterCache
from kai.operator.loop import SchedulingLoop


async def test_a_cancel_that_arrives_with_a_change_stops_the_wait() -> None:
    async with ApiClient() as client:  # never used to send: the wait only reads the cache's event
        cache = ClusterCache(Kube(client))
        cache.changed.clear()
        loop = SchedulingLoop(  # only the cache and the timings matter to the wait
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
        )
        waiting = asyncio.create_task(loop._wait(time.monotonic()))
        await asyncio.sleep(0)  # the task now waits for a change
        cache.changed.set()  # the change wakes it ...
        waiting.cancel()  # ... as the operator is stopped
        with pytest.raises(asyncio.CancelledError):
            await waiting
