"""No reclaim, live, for a pod the next cycle would not place: the room would go to a pod ahead of it.

One 4-GPU node runs `borrowed` (4 GPUs) for queue `lender`, which deserves nothing. Queue
`team` deserves 2 GPUs and waits with `big` (4 GPUs, the higher priority: first in its job
order) and `small` (2 GPUs). `big` would take `team` past its fair share, so it may not
reclaim; `small` may, but the next cycle would offer the freed node to `big` first. As in
KAI, whose virtual allocation must place the preemptor, nothing is evicted, and `small`'s
pod is told why. Both pods are created with the operator stopped, so one cycle sees both.
"""

from __future__ import annotations

import contextlib

from kai_operator_support import (
    bound_pods,
    create_queue,
    delete_queue,
    events_for,
    gpu_pod,
    operator_config,
    pods_in,
    running_operator,
    unique,
    wait_for,
)
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from kai.testing.controlplane import ClusterAccess
from kai.testing.fakes import GpuNode, NodeFactory


async def test_no_pod_is_evicted_for_a_reclaimer_the_next_cycle_would_not_place(
    api: client.ApiClient, namespace: str, gpu_nodes: NodeFactory, control_plane: ClusterAccess
) -> None:
    core = client.CoreV1Api(api)
    scheduling = client.SchedulingV1Api(api)
    lender, team = unique("lender"), unique("team")
    first, second = unique("first"), unique("second")
    for name, value in ((first, 60), (second, 10)):  # both preemptible (below 100)
        await scheduling.create_priority_class(
            client.V1PriorityClass(metadata=client.V1ObjectMeta(name=name), value=value)
        )
    await create_queue(api, lender, gpu_quota=0)
    await create_queue(api, team, gpu_quota=2)
    await gpu_nodes(GpuNode(name=unique("gpu"), gpus=4, gpu_memory_mib=40960))
    config = operator_config(control_plane.kubeconfig, namespace)
    try:
        async with running_operator(config):
            await core.create_namespaced_pod(namespace, gpu_pod("borrowed", lender, gpus=4))

            async def borrowed_running() -> bool:
                return "borrowed" in await bound_pods(api, namespace)

            await wait_for("the lender's pod bound", borrowed_running)
        for name, gpus, priority_class in (("big", 4, first), ("small", 2, second)):
            pod = gpu_pod(name, team, gpus=gpus)
            pod.spec.priority_class_name = priority_class
            await core.create_namespaced_pod(namespace, pod)
        async with running_operator(config):

            async def small_told_why() -> bool:
                events = await events_for(api, namespace, "small")
                return any(
                    "reclaim could free room by evicting 1 pod(s)" in (e.message or "")
                    and "the next cycle would place" in (e.message or "")
                    and "ahead of it in KAI's order" in (e.message or "")
                    for e in events
                )

            await wait_for("small's pod told why nothing is reclaimed for it", small_told_why)
            # The cycle that said so evicted nothing: the lender's pod still runs, untouched.
            pods = {p.metadata.name: p for p in await pods_in(api, namespace)}
            assert pods["borrowed"].metadata.deletion_timestamp is None
            assert not [
                e for e in await events_for(api, namespace, "borrowed") if e.reason == "Evicted"
            ]
            assert set(await bound_pods(api, namespace)) == {"borrowed"}
    finally:
        await delete_queue(api, lender)
        await delete_queue(api, team)
        for name in (first, second):
            with contextlib.suppress(ApiException):
                await scheduling.delete_priority_class(name)
