"""A burst of new pods is taken on a bounded number per cycle, first in line first.

With `burst_pods` = 5 and 13 pending pods, the first cycle binds at most 5 and
each next one at most four times the one before (so some cycle binds more than 5); the
cycles bind the pods in the order they were created, a pod that does not fit, left
for a later cycle by the bound, still gets its reason, and the status of the
groups bound during the burst, and their pods' Scheduled events, are written once
it is over. The groups of the pods a cycle binds during the burst are written
after it, each with the start timestamp of its bind.
"""

from __future__ import annotations

from typing import Any

from kai_operator_support import (
    bound_pods,
    create_queue,
    delete_queue,
    gpu_pod,
    list_pod_groups,
    operator_config,
    running_operator,
    unique,
    wait_for,
)
from kubernetes_asyncio import client

from kai.operator.burst import cycle_bound
from kai.testing.controlplane import ClusterAccess
from kai.testing.fakes import GpuNode, NodeFactory

BURST = 5
FITTING = 12


async def test_a_burst_is_bound_a_bounded_number_per_cycle_in_order(
    api: client.ApiClient, namespace: str, gpu_nodes: NodeFactory, control_plane: ClusterAccess
) -> None:
    core = client.CoreV1Api(api)
    queue = unique("burst")
    await create_queue(api, queue)
    await gpu_nodes(GpuNode(name=unique("gpu"), gpus=FITTING, gpu_memory_mib=40960))
    names = [f"p-{index:02d}" for index in range(FITTING)]
    try:
        for name in names:  # all pending before the scheduler starts: one burst
            await core.create_namespaced_pod(namespace, gpu_pod(name, queue, gpus=1))
        await core.create_namespaced_pod(namespace, gpu_pod("too-big", queue, gpus=FITTING + 1))
        config = operator_config(control_plane.kubeconfig, namespace, burst_pods=BURST)
        async with running_operator(config) as (operator, _):

            async def all_bound() -> bool:
                return len(await bound_pods(api, namespace)) == FITTING

            await wait_for("every fitting pod to be bound", all_bound, timeout=120)

            def recorded() -> list[str]:
                return [key for cycle in operator.loop.recent for key in cycle.bound]

            async def summaries_recorded() -> bool:
                return {key.partition("/")[2] for key in recorded()} == set(names)

            def loop_state() -> str:
                loop = operator.loop
                return (
                    f"bound {recorded()}, {loop.cycles} cycles, {loop.abandoned} abandoned, "
                    f"{loop.failed_in_a_row} failed in a row"
                )

            await wait_for(
                "the binding cycles' summaries", summaries_recorded, timeout=60, seen=loop_state
            )
            assert len(recorded()) == FITTING, loop_state()  # none bound twice
            # Every cycle since the start, in order. Pods other tests left in terminating
            # namespaces may be first in line and start the burst; the bound grows at
            # most once a cycle, so the cycle at `index` binds at most cycle_bound(BURST, index).
            cycles = list(operator.loop.recent)
            binding = [(index, c.bound) for index, c in enumerate(cycles) if c.bound]
            assert all(len(bound) <= cycle_bound(BURST, index) for index, bound in binding), (
                loop_state()
            )
            assert max(len(bound) for _, bound in binding) > BURST, loop_state()  # it grew
            per_cycle = [bound for _, bound in binding]
            in_order = [key.partition("/")[2] for bound in per_cycle for key in sorted(bound)]
            assert in_order == names  # no later pod overtakes an earlier one

            async def too_big_has_a_reason() -> bool:
                for group in await list_pod_groups(api, namespace):
                    conditions = (group.get("status") or {}).get("schedulingConditions") or []
                    if group["spec"]["queue"] == queue and conditions:
                        return bool(conditions[0]["reasons"][0]["reason"])
                return False

            await wait_for("the pod that does not fit to get its reason", too_big_has_a_reason)
            assert "too-big" not in await bound_pods(api, namespace)

            async def bound_groups_show_their_gpu() -> bool:  # written once the burst is over
                allocated = [
                    ((g.get("status") or {}).get("resourcesStatus") or {}).get("allocated") or {}
                    for g in await list_pod_groups(api, namespace)
                ]
                return sum(1 for a in allocated if a.get("nvidia.com/gpu") == "1") == FITTING

            await wait_for("every bound group's status", bound_groups_show_their_gpu)
            # Written after the burst (kai.operator.group_writes), each with its start.
            starts = [
                (g["metadata"].get("annotations") or {}).get("kai.scheduler/last-start-timestamp")
                for g in await list_pod_groups(api, namespace)
                if g["metadata"]["ownerReferences"][0]["name"] in names
            ]
            assert len(starts) == FITTING and all(starts)

            async def scheduled_events() -> list[Any]:
                events = (await core.list_namespaced_event(namespace)).items
                return [e for e in events if e.reason == "Scheduled"]

            async def every_pod_told() -> bool:  # held while the burst lasted, then sent
                told = {e.involved_object.name for e in await scheduled_events()}
                return told == set(names)

            await wait_for("a Scheduled event for every bound pod", every_pod_told)
            pods = (await core.list_namespaced_pod(namespace)).items
            last_bind = max(
                c.last_transition_time
                for p in pods
                for c in p.status.conditions or []
                if c.type == "PodScheduled" and c.status == "True"
            )
            # none went out before the burst's last bind (the API keeps whole seconds)
            assert all(e.metadata.creation_timestamp >= last_bind for e in await scheduled_events())
    finally:
        await delete_queue(api, queue)
