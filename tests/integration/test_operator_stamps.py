"""The engine's PodGroup timestamps reach the cluster, so the protections built on them work live.

A gang of two 1-GPU pods (a PodGroup with minMember 2 and a 2 s staleness grace period)
is bound: the PodGroup gets KAI's `kai.scheduler/last-start-timestamp`. One pod is then
deleted and nothing replaces it, so the gang runs below its minimum: the PodGroup gets
`kai.scheduler/stale-podgroup-timestamp`, and once the grace has passed the remaining
pod is evicted as a stale gang. Both steps depend on the annotations: the engine reads
the stale-since time back from the PodGroup each cycle, so without the write the grace
would start again every cycle and the pod would never be evicted.

A plain pod's PodGroup, made by the scheduler's pod grouper in the cycle that binds
the pod, gets its start timestamp in its create: one write, not a create and then an
annotation patch (the API server's managedFields show every write that set a field).
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
from kai.testing.faultproxy import Fail, FaultProxy, Observe, Rule

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


async def test_a_group_made_and_bound_in_one_cycle_gets_its_start_in_its_create(
    api: client.ApiClient,
    namespace: str,
    gpu_nodes: NodeFactory,
    control_plane: ClusterAccess,
    fault_proxy: FaultProxy,
) -> None:
    core = client.CoreV1Api(api)
    queue, name = unique("team"), unique("plain")
    await create_queue(api, queue, gpu_quota=1)
    await gpu_nodes(GpuNode(name=unique("gpu"), gpus=1, gpu_memory_mib=40960))
    groups = rf"/namespaces/{namespace}/podgroups"
    creates = fault_proxy.add(Rule("POST", rf"{groups}$", Observe()))
    patches = fault_proxy.add(Rule("PATCH", rf"{groups}/[^/]+$", Observe()))
    try:
        config = operator_config(fault_proxy.kubeconfig, namespace)
        async with running_operator(config) as (operator, _):
            await core.create_namespaced_pod(namespace, gpu_pod(name, queue, gpus=1))

            async def cycle_done() -> bool:  # its summary is kept once its stamps are written
                return any(f"{namespace}/{name}" in c.bound for c in operator.loop.recent)

            await wait_for("the cycle that binds the plain pod", cycle_done)
            (group,) = await list_pod_groups(api, namespace)
            assert group["metadata"]["annotations"].get(LAST_START), group["metadata"]
            assert (creates.fired, patches.fired) == (1, 0)
    finally:
        fault_proxy.remove(creates)
        fault_proxy.remove(patches)
        await delete_queue(api, queue)


async def _only_group_annotations(api: client.ApiClient, namespace: str) -> dict[str, Any] | None:
    groups = await list_pod_groups(api, namespace)
    return dict(groups[0]["metadata"].get("annotations") or {}) if groups else None


async def test_a_start_carried_by_a_create_is_taken_back_when_the_bind_is_refused(
    api: client.ApiClient,
    namespace: str,
    gpu_nodes: NodeFactory,
    control_plane: ClusterAccess,
    fault_proxy: FaultProxy,
) -> None:
    core = client.CoreV1Api(api)
    queue, name = unique("team"), unique("plain")
    await create_queue(api, queue, gpu_quota=1)
    await gpu_nodes(GpuNode(name=unique("gpu"), gpus=1, gpu_memory_mib=40960))
    refusals = fault_proxy.add(Rule("POST", rf"/pods/{name}/binding$", Fail(403)))
    try:
        config = operator_config(fault_proxy.kubeconfig, namespace)
        async with running_operator(config):
            await core.create_namespaced_pod(namespace, gpu_pod(name, queue, gpus=1))

            async def start_taken_back() -> bool:
                annotations = await _only_group_annotations(api, namespace)
                return (
                    refusals.fired >= 1
                    and annotations is not None
                    and LAST_START not in annotations
                )

            await wait_for(
                "no start timestamp on the group while its bind is refused", start_taken_back
            )
            fault_proxy.remove(refusals)

            async def started() -> bool:
                annotations = await _only_group_annotations(api, namespace) or {}
                return name in await bound_pods(api, namespace) and LAST_START in annotations

            await wait_for("the pod bound and its start written", started)
    finally:
        fault_proxy.remove(refusals)
        await delete_queue(api, queue)
