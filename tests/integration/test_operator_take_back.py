"""Preempt takes back, live, what the allocation placed in the same cycle: that pod is never bound.

One 4-GPU node in queue `q`. Two low-priority 1-GPU pods run on it. With the operator
stopped, a low-priority 2-GPU pod `late` and a high-priority 4-GPU pod `urgent` are
created, so the next cycle sees both. The allocation tries `urgent` first and finds 2
GPUs; it places `late` on them. Preempt then takes the two running pods and `late`'s
placement for `urgent`. The cluster must show it: `late` is never bound, its pod gets
an Unschedulable event naming the take-back, the running pods are evicted, and
`urgent` is bound on the node once they are gone.
"""

from __future__ import annotations

import contextlib

from kai_operator_support import (
    bound_pods,
    create_queue,
    delete_queue,
    gpu_pod,
    operator_config,
    pods_in,
    running_operator,
    told_unschedulable,
    unique,
    wait_for,
)
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from kai.testing.controlplane import ClusterAccess
from kai.testing.fakes import GpuNode, NodeFactory


def _pod(name: str, queue: str, gpus: int, priority_class: str) -> client.V1Pod:
    pod = gpu_pod(name, queue, gpus=gpus)
    pod.spec.priority_class_name = priority_class
    return pod


async def test_preempt_takes_back_a_placement_of_its_cycle_which_is_never_bound(
    api: client.ApiClient, namespace: str, gpu_nodes: NodeFactory, control_plane: ClusterAccess
) -> None:
    core = client.CoreV1Api(api)
    scheduling = client.SchedulingV1Api(api)
    queue, high, low = unique("q"), unique("high"), unique("low")
    for name, value in ((high, 60), (low, 10)):  # both preemptible (below 100), high > low
        await scheduling.create_priority_class(
            client.V1PriorityClass(metadata=client.V1ObjectMeta(name=name), value=value)
        )
    await create_queue(api, queue, gpu_quota=4)
    node = unique("gpu")
    await gpu_nodes(GpuNode(name=node, gpus=4, gpu_memory_mib=40960))
    running = {"low-0", "low-1"}
    config = operator_config(control_plane.kubeconfig, namespace)
    try:
        async with running_operator(config):
            for name in sorted(running):
                await core.create_namespaced_pod(namespace, _pod(name, queue, 1, low))

            async def low_running() -> bool:
                return set(await bound_pods(api, namespace)) == running

            await wait_for("the two low-priority pods bound", low_running)
        await core.create_namespaced_pod(namespace, _pod("late", queue, 2, low))
        await core.create_namespaced_pod(namespace, _pod("urgent", queue, 4, high))
        async with running_operator(config):

            async def victims_evicted() -> bool:
                assert "late" not in await bound_pods(api, namespace)
                pods = {p.metadata.name: p for p in await pods_in(api, namespace)}
                return all(
                    name not in pods or pods[name].metadata.deletion_timestamp is not None
                    for name in running
                )

            await wait_for("the two running pods evicted", victims_evicted)

            async def late_told() -> bool:
                taken = "taken back before binding by preempt for"
                return await told_unschedulable(api, namespace, "late", taken)

            await wait_for("an Unschedulable event naming the take-back on late", late_told)

            async def urgent_bound() -> bool:
                bound = await bound_pods(api, namespace)
                assert "late" not in bound
                return bound.get("urgent") == node

            await wait_for("urgent bound on the node", urgent_bound)
    finally:
        await delete_queue(api, queue)
        for name in (high, low):
            with contextlib.suppress(ApiException):
                await scheduling.delete_priority_class(name)
