"""Two shards on the real control plane: `kai run --node-pool a` and the default shard.

Pool "a" has one node with 2 GPUs and three 1-GPU pods, so a shard that saw the
unlabelled node would bind the third there; the default shard has a 4-GPU node and
two pods. Each shard must bind only its own pool's pods onto its own pool's nodes,
lead through its own Lease, and write status only for its own queue and PodGroups.
A pod of a pool no shard serves is bound by neither, and the default shard tells it
why (one `NoSchedulerForNodePool` event naming the pool and the missing Lease).
A Job labelled with pool "a" whose pod is not: its group takes the owner's pool, so
shard "a" binds the pod, and labels it with the pool as KAI's scheduler does; the
default shard's binds add no pool label.
"""

from __future__ import annotations

import contextlib
from typing import Any

from kai_operator_support import (
    bound_pods,
    create_queue,
    delete_queue,
    get_queue,
    gpu_job,
    gpu_pod,
    list_pod_groups,
    operator_config,
    running_operator,
    unique,
    wait_for,
)
from kubernetes_asyncio import client

from kai.operator.app import Operator
from kai.operator.unserved import NO_SCHEDULER_FOR_NODE_POOL
from kai.testing.controlplane import ClusterAccess
from kai.testing.fakes import GpuNode, NodeFactory

POOL = "kai.scheduler/node-pool"


async def test_two_shards_schedule_their_own_pools_only(
    api: client.ApiClient, namespace: str, gpu_nodes: NodeFactory, control_plane: ClusterAccess
) -> None:
    core = client.CoreV1Api(api)
    queue_a, queue_d = unique("pool-a"), unique("pool-d")
    node_a, node_d = unique("node-a"), unique("node-d")
    await create_queue(api, queue_a, labels={POOL: "a"})
    await create_queue(api, queue_d)
    await gpu_nodes(GpuNode(name=node_a, gpus=2, topology={POOL: "a"}))
    await gpu_nodes(GpuNode(name=node_d, gpus=4))
    default_config = operator_config(control_plane.kubeconfig, namespace)
    pool_config = operator_config(
        control_plane.kubeconfig, namespace, lease_name=default_config.lease_name, node_pool="a"
    )
    try:
        async with contextlib.AsyncExitStack() as stack:
            default, _ = await stack.enter_async_context(running_operator(default_config))
            shard_a, _ = await stack.enter_async_context(running_operator(pool_config))
            for index in range(3):
                pod = gpu_pod(f"a-{index}", queue_a, gpus=1, labels={POOL: "a"})
                await core.create_namespaced_pod(namespace, pod)
            for index in range(2):
                await core.create_namespaced_pod(namespace, gpu_pod(f"d-{index}", queue_d, gpus=1))
            orphan = gpu_pod("b-0", queue_d, gpus=1, labels={POOL: "b"})  # no shard serves "b"
            await core.create_namespaced_pod(namespace, orphan)
            owned = gpu_job("owned", queue_a, parallelism=1, gpus=0)  # no GPU: it always fits
            owned.metadata.labels[POOL] = "a"  # on the Job only, not on its pod template
            await client.BatchV1Api(api).create_namespaced_job(namespace, owned)

            async def settled() -> bool:
                bound = await bound_pods(api, namespace)
                return len(bound) == 5 and await _pending_with_reason(api, namespace, "a")

            await wait_for("each shard to bind its own pool", settled, timeout=90)
            bound = await bound_pods(api, namespace)
            assert {name: node for name, node in bound.items() if name.startswith("a-")} == {
                name: node_a for name in bound if name.startswith("a-")
            }
            assert len([name for name in bound if name.startswith("a-")]) == 2
            assert {name for name in bound if name.startswith("d-")} == {"d-0", "d-1"}
            assert node_a not in {bound["d-0"], bound["d-1"]}
            assert "b-0" not in bound
            (owned_pod,) = [name for name in bound if name.startswith("owned-")]
            assert bound[owned_pod] == node_a
            assert await _binders(core, namespace, "a-") == {pool_config.identity}
            assert await _binders(core, namespace, "d-") == {default_config.identity}
            assert await _binders(core, namespace, "owned-", 1) == {pool_config.identity}

            async def pool_labels() -> dict[str, str | None]:
                return {
                    pod.metadata.name: (pod.metadata.labels or {}).get(POOL)
                    for pod in (await core.list_namespaced_pod(namespace)).items
                    if pod.metadata.name in bound
                }

            async def owned_labelled() -> bool:
                return (await pool_labels())[owned_pod] == "a"

            await wait_for("shard a to label the pod it bound with its pool", owned_labelled)
            labels = await pool_labels()
            assert {labels[name] for name in bound if name.startswith("a-")} == {"a"}
            assert labels["d-0"] is None and labels["d-1"] is None  # the default shard: none

            leases = client.CoordinationV1Api(api)
            for config in (default_config, pool_config):
                lease = await leases.read_namespaced_lease(
                    config.shard.lease_name(config.lease_name), namespace
                )
                assert lease.spec.holder_identity == config.identity
            assert _leads(default) and _leads(shard_a)

            async def queue_allocated(name: str, gpus: str) -> bool:
                status = (await get_queue(api, name)).get("status") or {}
                return (status.get("allocated") or {}).get("nvidia.com/gpu") == gpus

            await wait_for("pool a's queue status", lambda: queue_allocated(queue_a, "2"))
            await wait_for("the default queue's status", lambda: queue_allocated(queue_d, "2"))
            groups = await list_pod_groups(api, namespace)
            for operator, pool, queue in ((shard_a, "a", queue_a), (default, None, queue_d)):
                written = operator.loop.status_writer.written
                assert f"Queue {queue}" in written
                other = queue_d if pool else queue_a
                assert f"Queue {other}" not in written
                for group in groups:
                    labels = group["metadata"].get("labels") or {}
                    key = f"PodGroup {namespace}/{group['metadata']['name']}"
                    if key in written:
                        assert labels.get(POOL) == pool
            assert not [g for g in groups if (g["metadata"].get("labels") or {}).get(POOL) == "b"]

            async def told() -> bool:
                return bool(await _warnings(core, namespace, "b-0"))

            await wait_for("the default shard to tell the pod of pool b", told)
            (warning,) = await _warnings(core, namespace, "b-0")
            assert warning.reporting_instance == default_config.identity
            assert "'b'" in warning.message and f"{default_config.lease_name}-b" in warning.message
            for name in ("a-0", "a-1", "a-2", "d-0", "d-1", owned_pod):
                assert not await _warnings(core, namespace, name)  # served pools: nothing
    finally:
        await delete_queue(api, queue_a)
        await delete_queue(api, queue_d)


def _leads(operator: Operator) -> bool:
    return operator.is_leader()


async def _pending_with_reason(api: client.ApiClient, namespace: str, pool: str) -> bool:
    """Pool a's third gang waits, and its condition names the shard that decided."""
    for group in await list_pod_groups(api, namespace):
        if (group["metadata"].get("labels") or {}).get(POOL) != pool:
            continue
        conditions: list[dict[str, Any]] = (group.get("status") or {}).get(
            "schedulingConditions"
        ) or []
        if conditions and conditions[0].get("nodePool") == pool:
            return True
    return False


async def _warnings(core: client.CoreV1Api, namespace: str, pod: str) -> list[Any]:
    events = (await core.list_namespaced_event(namespace)).items
    return [
        e
        for e in events
        if e.reason == NO_SCHEDULER_FOR_NODE_POOL and e.involved_object.name == pod
    ]


async def _binders(core: client.CoreV1Api, namespace: str, prefix: str, count: int = 2) -> set[str]:
    """Which scheduler instances reported binding the pods named `prefix...` (events are
    flushed after the binds, so wait for one per bound pod)."""
    found: set[str] = set()

    async def reported() -> bool:
        nonlocal found
        events = [
            e
            for e in (await core.list_namespaced_event(namespace)).items
            if e.reason == "Scheduled" and e.involved_object.name.startswith(prefix)
        ]
        found = {e.reporting_instance for e in events}
        return len({e.involved_object.name for e in events}) == count

    await wait_for(f"Scheduled events for {prefix}*", reported)
    return found
