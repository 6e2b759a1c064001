"""Status is written against what the scheduler last wrote, not only against its cache.

The watch cache may not show the scheduler's own last write yet (a watch that lags or
was cut and is resuming). A Queue whose GPUs went 8 -> 0 -> 8 within that window
looks, to a writer that compares with the cache alone, as if it still showed 8: the
second change is never written and the Queue reports 0 while 8 GPUs run. The view
given here is that stale cache, held still; the Queue is the real one.
"""

from __future__ import annotations

from datetime import UTC, datetime
from fractions import Fraction
from types import MappingProxyType
from typing import Any

from kai_operator_support import create_queue, delete_queue, get_queue, unique
from kubernetes_asyncio import client

from kai.engine.fairshare import QueueShare
from kai.engine.model import GpuRequest, Placement, Pod, PodGroup, PodPhase, Snapshot
from kai.engine.resources import Resources
from kai.kube.client import Kube, connect
from kai.operator.cache import ClusterView
from kai.operator.events import EventRecorder
from kai.operator.status import StatusWriter, queue_statuses
from kai.operator.status_totals import KeptTotals
from kai.testing.controlplane import ClusterAccess

NOW = datetime(2026, 12, 1, tzinfo=UTC)


def _share(gpus: int) -> QueueShare:
    amount = Resources(gpu=Fraction(gpus))
    return QueueShare(amount, amount, amount, Resources(), amount, Resources(gpu=Fraction(-1)))


def _running(queue: str, gpus: int) -> Snapshot:
    """The queue's one PodGroup, with a bound pod of `gpus` GPUs when there are any."""
    group = PodGroup("ns", "g", queue, 1, 50, True)
    pod = Pod(
        "ns",
        "p",
        "uid-p",
        group.key,
        None,
        PodPhase.BOUND,
        "n",
        Resources.of(gpus),
        GpuRequest(whole=gpus),
        Placement(),
    )
    pods = (pod,) if gpus else ()
    return Snapshot(nodes=(), pods=pods, pod_groups=(group,), queues=(), now=NOW)


def _status(queue: dict[str, Any], gpus: int) -> dict[str, Any]:
    """The status written for `queue` while `gpus` GPUs run in it, as the server keeps it."""
    totals = KeptTotals()
    totals.update(_running(queue["metadata"]["name"], gpus))
    status = queue_statuses([queue], totals.queues(), {queue["metadata"]["name"]: _share(gpus)})
    return {k: v for k, v in status[queue["metadata"]["name"]].items() if v is not None}


def _view(queue: dict[str, Any]) -> ClusterView:
    empty: MappingProxyType[str, Any] = MappingProxyType({})
    queues = MappingProxyType({queue["metadata"]["name"]: queue})
    return ClusterView(empty, empty, queues, empty, empty, empty, 1)


async def test_a_change_back_to_what_a_stale_cache_shows_is_still_written(
    api: client.ApiClient, control_plane: ClusterAccess
) -> None:
    name = unique("stale")
    await create_queue(api, name, gpu_quota=8)
    try:
        async with await connect(control_plane.kubeconfig) as connection:
            kube = Kube(connection)
            writer = StatusWriter(kube, EventRecorder(kube, "test"), concurrency=4)
            queue = await get_queue(api, name)
            stale = {**queue, "status": _status(queue, 8)}
            await writer.publish(_view(stale), _running(name, 8), {name: _share(8)}, {}, NOW)
            await writer.publish(_view(stale), _running(name, 0), {name: _share(0)}, {}, NOW)
            assert (await get_queue(api, name))["status"]["allocated"]["nvidia.com/gpu"] == "0"
            # The cache still shows 8 (it has not seen the write of 0): 8 must go out again.
            await writer.publish(_view(stale), _running(name, 8), {name: _share(8)}, {}, NOW)
            status = (await get_queue(api, name))["status"]
            assert status["allocated"]["nvidia.com/gpu"] == "8"
    finally:
        await delete_queue(api, name)
