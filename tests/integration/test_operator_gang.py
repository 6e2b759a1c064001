"""The live scheduler binds a Job's pods as one gang: all in one cycle, or none.

The Job controller of the real control plane creates the pods; the operator's pod
grouper makes the PodGroup; the engine places the gang; the binder binds it.
"""

from __future__ import annotations

from kai_operator_support import (
    bound_pods,
    create_queue,
    delete_queue,
    events_for,
    get_queue,
    gpu_job,
    list_pod_groups,
    operator_config,
    pods_in,
    running_operator,
    unique,
    wait_for,
    wait_passes,
)
from kubernetes_asyncio import client

from kai.testing.controlplane import ClusterAccess
from kai.testing.fakes import GpuNode, NodeFactory


async def _two_gpu_nodes(gpu_nodes: NodeFactory, names: list[str]) -> None:
    for name in names:
        await gpu_nodes(GpuNode(name=name, gpus=2, gpu_memory_mib=40960))


async def test_job_gang_binds_together_once_it_fits(
    api: client.ApiClient, namespace: str, gpu_nodes: NodeFactory, control_plane: ClusterAccess
) -> None:
    queue = unique("train")
    await create_queue(api, queue)
    node_names = [unique("gpu") for _ in range(4)]
    await _two_gpu_nodes(gpu_nodes, node_names[:3])
    try:
        config = operator_config(control_plane.kubeconfig, namespace)
        async with running_operator(config) as (operator, _):
            job = gpu_job("train", queue, parallelism=4, gpus=2, min_member=4)
            await client.BatchV1Api(api).create_namespaced_job(namespace, job)

            async def grouped_and_refused() -> bool:
                groups = await list_pod_groups(api, namespace)
                if len(groups) != 1:
                    return False
                conditions = (groups[0].get("status") or {}).get("schedulingConditions") or []
                # The Job controller creates its pods in batches: the group can be refused
                # before the last pod exists, and that pod is annotated a cycle later.
                pods = await pods_in(api, namespace)
                annotated = [
                    p for p in pods if (p.metadata.annotations or {}).get("pod-group-name")
                ]
                return bool(conditions) and len(annotated) == 4

            await wait_for("the gang to be found unschedulable", grouped_and_refused)
            pods = await pods_in(api, namespace)
            assert len(pods) == 4
            group = (await list_pod_groups(api, namespace))[0]
            assert group["spec"]["minMember"] == 4
            assert group["spec"]["queue"] == queue
            assert {p.metadata.annotations["pod-group-name"] for p in pods} == {
                group["metadata"]["name"]
            }
            reasons = group["status"]["schedulingConditions"][0]["reasons"]
            assert reasons[0]["reason"] and reasons[0]["message"]
            await wait_passes(operator, 3)
            assert await bound_pods(api, namespace) == {}  # 3 of 4 would fit: none is bound
            events = await events_for(api, namespace, pods[0].metadata.name)
            assert any(e.reason == "Unschedulable" for e in events)

            await _two_gpu_nodes(gpu_nodes, node_names[3:])

            async def all_bound() -> bool:
                return len(await bound_pods(api, namespace)) == 4

            await wait_for("the whole gang to be bound", all_bound)
            bound = await bound_pods(api, namespace)
            assert sorted(bound.values()) == sorted(node_names)  # 2 GPUs each: one pod per node

            # The watch can show the binds before the cycle that made them has finished (its
            # status and timestamp writes come after the binds) and recorded its summary.
            async def binding_cycle_recorded() -> bool:
                return any(c.bound for c in operator.loop.recent)

            await wait_for("the binding cycle's summary", binding_cycle_recorded)
            binding_cycles = [c for c in operator.loop.recent if c.bound]
            assert len(binding_cycles) == 1
            assert len(binding_cycles[0].bound) == 4

            async def status_current() -> bool:
                queue_status = (await get_queue(api, queue)).get("status") or {}
                groups = await list_pod_groups(api, namespace)
                conditions = (groups[0].get("status") or {}).get("schedulingConditions")
                return (queue_status.get("allocated") or {}).get(
                    "nvidia.com/gpu"
                ) == "8" and conditions == []

            await wait_for("queue and group status to show the gang running", status_current)

            async def scheduled_event() -> bool:  # events go out after the status writes
                scheduled = await events_for(api, namespace, pods[0].metadata.name)
                return any(e.reason == "Scheduled" for e in scheduled)

            await wait_for("a Scheduled event on the pod", scheduled_event)
    finally:
        await delete_queue(api, queue)


async def test_pods_beyond_a_running_gangs_minimum_say_why_they_wait(
    api: client.ApiClient, namespace: str, gpu_nodes: NodeFactory, control_plane: ClusterAccess
) -> None:
    """As KAI records a job's pending pods, so a group that runs with pods left over carries a
    scheduling condition, and its waiting pods an Unschedulable event, until they are bound."""
    queue = unique("elastic")
    await create_queue(api, queue)
    node_names = [unique("gpu") for _ in range(4)]
    await _two_gpu_nodes(gpu_nodes, node_names[:2])
    try:
        config = operator_config(control_plane.kubeconfig, namespace)
        async with running_operator(config):
            job = gpu_job("grow", queue, parallelism=4, gpus=2, min_member=2)
            await client.BatchV1Api(api).create_namespaced_job(namespace, job)

            # The Job controller creates its pods over more than one cycle, so a cycle may see
            # three and say one waits; the one after the fourth arrives says two do.
            async def two_bound_and_two_told() -> bool:
                groups = await list_pod_groups(api, namespace)
                messages = [
                    reason.get("message") or ""
                    for g in groups
                    for c in (g.get("status") or {}).get("schedulingConditions") or []
                    for reason in c.get("reasons") or []
                ]
                return len(await bound_pods(api, namespace)) == 2 and any(
                    "the gang runs; 2 pod(s) beyond its minimum wait" in m for m in messages
                )

            await wait_for("two pods bound and the group told why two wait", two_bound_and_two_told)
            (group,) = await list_pod_groups(api, namespace)
            (reason,) = group["status"]["schedulingConditions"][0]["reasons"]
            assert reason["reason"] == "Unschedulable"
            # Said by the cycle that bound the two (no GPU left after them) or by a later one
            # (each node full): either way with the numbers.
            assert any(
                said in reason["message"]
                for said in ("only 0 whole GPUs are free", "insufficient GPUs (needs 2, free 0)")
            )
            bound = await bound_pods(api, namespace)
            waiting = [p for p in await pods_in(api, namespace) if p.metadata.name not in bound]
            assert len(waiting) == 2

            async def waiting_pod_told() -> bool:
                events = await events_for(api, namespace, waiting[0].metadata.name)
                return any(e.reason == "Unschedulable" for e in events)

            await wait_for("an Unschedulable event on a waiting pod", waiting_pod_told)

            await _two_gpu_nodes(gpu_nodes, node_names[2:])

            async def all_bound_and_cleared() -> bool:
                groups = await list_pod_groups(api, namespace)
                conditions = (groups[0].get("status") or {}).get("schedulingConditions")
                return len(await bound_pods(api, namespace)) == 4 and conditions == []

            await wait_for("all four bound and the condition cleared", all_bound_and_cleared)
    finally:
        await delete_queue(api, queue)
