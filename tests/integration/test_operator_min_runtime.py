"""Min-runtime protects a running job live, and the eviction that ends it is stamped.

Queue `lender` (deserved 0, reclaimMinRuntime 8s) fills a 4-GPU node with a Job of one
4-GPU pod; queue `owner` (deserved 4) then asks for the same 4 GPUs. Reclaim is the only way
in, and min-runtime counts from the lender's `kai.scheduler/last-start-timestamp`,
which only the operator writes: the engine reads the start back from the PodGroup
every cycle, so without the write the lender's job would look as if it had never
started and would be reclaimed at once (KAI protects only a job with a recorded
start). So the owner first waits, with its PodGroup saying so, while the lender keeps
running; once the minimum has passed the lender is evicted and its PodGroup gets
`kai.scheduler/last-eviction-timestamp`, the clock of its preemption delay.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from kai_operator_support import (
    bound_pods,
    create_queue,
    delete_queue,
    gpu_job,
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
LAST_EVICTION = "kai.scheduler/last-eviction-timestamp"
MIN_RUNTIME = timedelta(seconds=8)


def _time(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp)


async def _group_of(api: client.ApiClient, namespace: str, queue: str) -> dict[str, Any] | None:
    for group in await list_pod_groups(api, namespace):
        if group["spec"].get("queue") == queue:
            return group
    return None


def _unschedulable_message(group: dict[str, Any] | None) -> str:
    for condition in ((group or {}).get("status") or {}).get("schedulingConditions") or []:
        if condition.get("type") == "UnschedulableOnNodePool":
            return " ".join(str(r.get("message")) for r in condition.get("reasons") or [])
    return ""


async def test_min_runtime_holds_off_reclaim_until_it_has_passed(
    api: client.ApiClient, namespace: str, gpu_nodes: NodeFactory, control_plane: ClusterAccess
) -> None:
    core = client.CoreV1Api(api)
    lender, owner = unique("lender"), unique("owner")
    await create_queue(api, lender, gpu_quota=0, reclaimMinRuntime=f"{MIN_RUNTIME.seconds}s")
    await create_queue(api, owner, gpu_quota=4)
    node = unique("gpu")
    await gpu_nodes(GpuNode(name=node, gpus=4, gpu_memory_mib=40960))
    try:
        async with running_operator(operator_config(control_plane.kubeconfig, namespace)):
            await client.BatchV1Api(api).create_namespaced_job(
                namespace, gpu_job("borrowed", lender, parallelism=1, gpus=4)
            )

            running: list[str] = []

            async def lender_started() -> bool:
                # A new group is created with its start stamp, before its pods' binds land.
                nonlocal running
                group = await _group_of(api, namespace, lender)
                stamped = LAST_START in ((group or {}).get("metadata", {}).get("annotations") or {})
                running = [name for name in await bound_pods(api, namespace) if "borrowed-" in name]
                return stamped and bool(running)

            await wait_for("the lender's job bound and its start stamped", lender_started)
            assert len(running) == 1
            await core.create_namespaced_pod(namespace, gpu_pod("claim", owner, gpus=4))

            async def owner_told_to_wait() -> bool:
                message = _unschedulable_message(await _group_of(api, namespace, owner))
                return "min-runtime protects" in message

            await wait_for("the owner's PodGroup saying why it waits", owner_told_to_wait)

            async def lender_evicted() -> bool:
                pods = {p.metadata.name: p for p in await pods_in(api, namespace)}
                victim = pods.get(running[0])
                return victim is None or victim.metadata.deletion_timestamp is not None

            await wait_for("the lender reclaimed once min-runtime has passed", lender_evicted, 90)

            async def eviction_stamped() -> bool:
                group = await _group_of(api, namespace, lender)
                return LAST_EVICTION in ((group or {}).get("metadata", {}).get("annotations") or {})

            await wait_for("the lender's last-eviction timestamp on its PodGroup", eviction_stamped)
            # Not reclaimed inside min-runtime, by the cluster's own record (whatever the load).
            stamps = ((await _group_of(api, namespace, lender)) or {})["metadata"]["annotations"]
            ran = _time(stamps[LAST_EVICTION]) - _time(stamps[LAST_START])
            assert ran >= MIN_RUNTIME, f"the lender was reclaimed after {ran} of min-runtime"

            async def owner_bound() -> bool:
                return (await bound_pods(api, namespace)).get("claim") == node

            await wait_for("the owner's pod bound on the freed node", owner_bound)
    finally:
        await delete_queue(api, lender)
        await delete_queue(api, owner)
