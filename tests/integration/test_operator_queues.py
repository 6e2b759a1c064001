"""Queue rules hold live: a limit caps what a queue gets, a missing queue is named.

Queue status is KAI's queue controller's: `childQueues`, totals summed up the tree, no
conditions of its own and any another writer set kept (the CRD keeps them too).

A pod being deleted still holds its devices until it is gone (a kubelet stopping it, a
finalizer such as the Job controller's): its queue's limit counts it, so a pod of the
queue that fits only in the room it will leave is pipelined there, not bound, until it
has left (the soak saw a queue of limit 16 hold 17 GPUs this way).
"""

from __future__ import annotations

import contextlib

from kai_operator_support import (
    QUEUES,
    bound_pods,
    create_queue,
    delete_queue,
    events_for,
    get_queue,
    gpu_pod,
    list_pod_groups,
    operator_config,
    running_operator,
    unique,
    wait_for,
)
from kubernetes_asyncio import client

from kai.testing.controlplane import ClusterAccess
from kai.testing.fakes import GpuNode, NodeFactory

GPU = "nvidia.com/gpu"


async def test_queue_limit_holds_and_missing_queue_is_reported(
    api: client.ApiClient, namespace: str, gpu_nodes: NodeFactory, control_plane: ClusterAccess
) -> None:
    core = client.CoreV1Api(api)
    limited = unique("capped")
    missing = unique("no-such-queue")
    await create_queue(api, limited, gpu_quota=1, gpu_limit=2)
    await gpu_nodes(GpuNode(name=unique("gpu"), gpus=8, gpu_memory_mib=40960))
    try:
        async with running_operator(operator_config(control_plane.kubeconfig, namespace)):
            for index in range(3):
                await core.create_namespaced_pod(
                    namespace, gpu_pod(f"capped-{index}", limited, gpus=1)
                )
            await core.create_namespaced_pod(namespace, gpu_pod("lost", missing, gpus=1))

            async def decided() -> bool:
                groups = await list_pod_groups(api, namespace)
                refused = [g for g in groups if (g.get("status") or {}).get("schedulingConditions")]
                return len(await bound_pods(api, namespace)) == 2 and len(refused) == 2

            await wait_for("two pods bound and two groups refused", decided)
            bound = await bound_pods(api, namespace)
            assert set(bound) <= {"capped-0", "capped-1", "capped-2"}

            reasons = {}
            for group in await list_pod_groups(api, namespace):
                conditions = (group.get("status") or {}).get("schedulingConditions") or []
                if conditions:
                    reason = conditions[0]["reasons"][0]
                    reasons[group["spec"]["queue"]] = (reason["reason"], reason["message"])
            assert reasons[limited][0] == "OverLimit"
            assert reasons[missing][0] == "QueueDoesNotExist"
            assert missing in reasons[missing][1]

            async def event_named_the_queue() -> bool:
                events = await events_for(api, namespace, "lost")
                return any(
                    e.reason == "Unschedulable"
                    and missing in e.message
                    and "QueueDoesNotExist" in e.message
                    for e in events
                )

            await wait_for("an Unschedulable event naming the missing queue", event_named_the_queue)

            async def queue_status() -> bool:
                status = (await get_queue(api, limited)).get("status") or {}
                return (status.get("allocated") or {}).get("nvidia.com/gpu") == "2" and (
                    status.get("requested") or {}
                ).get("nvidia.com/gpu") == "3"

            await wait_for("the capped queue's status", queue_status)
    finally:
        await delete_queue(api, limited)


HOLD = "kai.test/hold"


async def _pod_group_reasons(api: client.ApiClient, namespace: str) -> list[str]:
    reasons = []
    for group in await list_pod_groups(api, namespace):
        for condition in (group.get("status") or {}).get("schedulingConditions") or []:
            reasons += [reason["reason"] for reason in condition.get("reasons") or []]
    return reasons


async def test_a_limit_counts_the_pods_of_its_queue_that_are_being_deleted(
    api: client.ApiClient, namespace: str, gpu_nodes: NodeFactory, control_plane: ClusterAccess
) -> None:
    core = client.CoreV1Api(api)
    queue = unique("capped")
    await create_queue(api, queue, gpu_quota=2, gpu_limit=2)
    await gpu_nodes(GpuNode(name=unique("gpu"), gpus=4, gpu_memory_mib=40960))
    leaving = gpu_pod("leaving", queue, gpus=2)
    leaving.metadata.finalizers = [HOLD]  # deleted, it stays until the finalizer goes
    try:
        async with running_operator(operator_config(control_plane.kubeconfig, namespace)):
            await core.create_namespaced_pod(namespace, leaving)

            async def first_bound() -> bool:
                return "leaving" in await bound_pods(api, namespace)

            await wait_for("the first pod bound", first_bound)
            await core.delete_namespaced_pod("leaving", namespace, grace_period_seconds=0)
            await core.create_namespaced_pod(namespace, gpu_pod("next", queue, gpus=2))

            async def next_decided() -> bool:
                waits = "Pipelined" in await _pod_group_reasons(api, namespace)
                return waits or "next" in await bound_pods(api, namespace)

            # It waits on the room the first pod leaves, as on capacity being freed.
            await wait_for("the next pod bound or pipelined", next_decided)
            assert "next" not in await bound_pods(api, namespace)

            async def status_counts_the_leaving_pod() -> bool:
                # As KAI's controllers count it: still on its node, it is allocated.
                status = (await get_queue(api, queue)).get("status") or {}
                return (status.get("allocated") or {}).get(GPU) == "2" and (
                    status.get("requested") or {}
                ).get(GPU) == "4"

            await wait_for(
                "the queue's status to count the pod being deleted", status_counts_the_leaving_pod
            )
            await core.patch_namespaced_pod(
                "leaving", namespace, {"metadata": {"finalizers": None}}
            )

            async def next_bound() -> bool:
                return "next" in await bound_pods(api, namespace)

            await wait_for("the next pod bound once the first is gone", next_bound)
    finally:
        with contextlib.suppress(client.ApiException):
            await core.patch_namespaced_pod(
                "leaving", namespace, {"metadata": {"finalizers": None}}
            )
        await delete_queue(api, queue)


async def test_queue_status_shows_child_queues_and_keeps_conditions_it_does_not_write(
    api: client.ApiClient, namespace: str, gpu_nodes: NodeFactory, control_plane: ClusterAccess
) -> None:
    core = client.CoreV1Api(api)
    objects = client.CustomObjectsApi(api)
    root, dept = unique("root"), unique("dept")
    teams = sorted([unique("team-b"), unique("team-a")])
    await create_queue(api, root, gpu_quota=-1)
    await create_queue(api, dept, gpu_quota=-1, parent=root)
    for team in teams:
        await create_queue(api, team, gpu_quota=-1, parent=dept)
    # A condition of a type KAI declares, set by someone else: kai writes none (neither
    # does KAI's queue controller) and must not remove it.
    condition = {
        "type": "Orphan",
        "status": "False",
        "reason": "ParentFound",
        "message": "set by the test",
        "lastProbeTime": "2026-01-01T00:00:00Z",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }
    await objects.patch_cluster_custom_object_status(
        *QUEUES,
        dept,
        {"status": {"conditions": [condition]}},
        _content_type="application/merge-patch+json",  # type: ignore[call-arg]  # not in the stubs
    )
    await gpu_nodes(GpuNode(name=unique("gpu"), gpus=8, gpu_memory_mib=40960))
    try:
        async with running_operator(operator_config(control_plane.kubeconfig, namespace)):
            await core.create_namespaced_pod(namespace, gpu_pod("worker", teams[0], gpus=1))

            async def tree_status() -> bool:
                statuses = [(await get_queue(api, q)).get("status") or {} for q in (root, dept)]
                return all((s.get("allocated") or {}).get(GPU) == "1" for s in statuses)

            await wait_for("the pod's GPU counted in its queue's ancestors", tree_status)
            root_status = (await get_queue(api, root))["status"]
            dept_status = (await get_queue(api, dept))["status"]
            assert root_status["childQueues"] == [dept]
            assert dept_status["childQueues"] == teams
            assert dept_status["conditions"] == [condition]
            assert "conditions" not in root_status
            for team in teams:
                assert "childQueues" not in (await get_queue(api, team))["status"]
    finally:
        for name in [*teams, dept, root]:
            await delete_queue(api, name)
