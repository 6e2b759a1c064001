"""The engine's PodGroup timestamps reach the cluster, so the protections built on them work live.

A gang of two 1-GPU pods (a PodGroup with minMember 2 and a 2 s staleness grace period)
is bound: the PodGroup gets KAI's `kai.scheduler/last-start-timestamp`. One pod is then
deleted and nothing replaces it, so the gang runs below its minimum: the PodGroup gets
`kai.scheduler/stale-podgroup-timestamp`, and once the grace has passed the remaining
pod is evicted as a stale gang. Both steps depend on the annotations: the engine reads
the stale-since time back from the PodGroup each cycle, so without the write the grace
would start again every cycle and the pod would never be evicted.
"""

from __future__ import annotations

from typing import Any

from kai_operator_support import (
    POD_GROUPS,
    bound_pods,
    create_queue,
    delete_queue,
    events_for,
    gpu_pod,
    list_pod_groups,
    operator_config,
    pods_in,
    running_operator,
    unique,
    wait_for,
)
from kubernetes_asyncio import client

from kai.testing.controlplane import ClusterAccess
from kai.testing.fakes import GpuNode, NodeFactory

LAST_START = "kai.scheduler/last-start-timestamp"
STALE_SINCE = "kai.scheduler/stale-podgroup-timestamp"


async def _annotations(api: client.ApiClient, namespace: str, name: str) -> dict[str, Any]:
    for group in await list_pod_groups(api, namespace):
        if group["metadata"]["name"] == name:
            found: dict[str, Any] = group["metadata"].get("annotations") or {}
            return found
    return {}


async def test_start_and_stale_timestamps_are_written_and_a_stale_gang_is_evicted(
    api: client.ApiClient, namespace: str, gpu_nodes: NodeFactory, control_plane: ClusterAccess
) -> None:
    core = client.CoreV1Api(api)
    queue, gang = unique("team"), unique("gang")
    await create_queue(api, queue, gpu_quota=2)
    await gpu_nodes(GpuNode(name=unique("gpu"), gpus=2, gpu_memory_mib=40960))
    await client.CustomObjectsApi(api).create_namespaced_custom_object(
        *POD_GROUPS[:2],
        namespace,
        POD_GROUPS[2],
        {
            "apiVersion": "scheduling.run.ai/v2alpha2",
            "kind": "PodGroup",
            "metadata": {"name": gang},
            "spec": {"minMember": 2, "queue": queue, "stalenessGracePeriod": "2s"},
        },
    )
    members = {f"{gang}-0", f"{gang}-1"}
    try:
        async with running_operator(operator_config(control_plane.kubeconfig, namespace)):
            for name in sorted(members):
                pod = gpu_pod(name, queue, gpus=1, annotations={"pod-group-name": gang})
                await core.create_namespaced_pod(namespace, pod)

            async def gang_bound() -> bool:
                return set(await bound_pods(api, namespace)) == members

            await wait_for("both pods of the gang bound", gang_bound)

            async def start_written() -> bool:
                return bool((await _annotations(api, namespace, gang)).get(LAST_START))

            await wait_for("the gang's last-start timestamp on its PodGroup", start_written)
            gone, kept = sorted(members)
            await core.delete_namespaced_pod(gone, namespace, grace_period_seconds=0)

            async def stale_written() -> bool:
                return bool((await _annotations(api, namespace, gang)).get(STALE_SINCE))

            await wait_for("the stale-since timestamp on the PodGroup", stale_written)

            async def kept_evicted() -> bool:
                pods = {p.metadata.name: p for p in await pods_in(api, namespace)}
                return kept not in pods or pods[kept].metadata.deletion_timestamp is not None

            await wait_for("the pod left of the stale gang evicted", kept_evicted)

            async def told_why() -> bool:  # events are sent at the end of the cycle
                events = await events_for(api, namespace, kept)
                return any(e.reason == "Evicted" and "stale" in e.message for e in events)

            await wait_for("an Evicted event naming the stale gang", told_why)
    finally:
        await delete_queue(api, queue)
