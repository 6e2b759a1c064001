"""Reclaim takes back, live, the pod consolidation pipelined in the same cycle: it is never bound.

Two 4-GPU nodes. Queue `borrower` (quota 4) runs 5 GPUs: `a` (2) on one node, `b` (2)
and `c` (1) on the other. With the operator stopped, `borrower` asks for `wide` (3 GPUs)
and queue `owner` (quota 4) for `claim` (4 GPUs), so the next cycle sees both. Neither
fits. Consolidation moves `b` beside `a` and pipelines `wide` where `b` was; reclaim then
takes `c` and `wide`'s place for `claim`, as KAI's reclaim takes what its consolidation
pipelined. Before, kai bound `wide` and reclaimed it two cycles later: a pod started only
to be killed. The cluster must show it: `wide` is never bound and is told why, `c` is
evicted, and `claim` is bound where they were.
"""

from __future__ import annotations

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

from kai.testing.controlplane import ClusterAccess
from kai.testing.fakes import GpuNode, NodeFactory


async def test_reclaim_takes_back_what_consolidation_pipelined_which_is_never_bound(
    api: client.ApiClient, namespace: str, gpu_nodes: NodeFactory, control_plane: ClusterAccess
) -> None:
    core = client.CoreV1Api(api)
    borrower, owner = unique("borrower"), unique("owner")
    await create_queue(api, borrower, gpu_quota=4)
    await create_queue(api, owner, gpu_quota=4)
    first, second = unique("gpu"), unique("gpu")
    config = operator_config(control_plane.kubeconfig, namespace)
    try:
        async with running_operator(config):
            # b and c go to the only node there is; a then to the second node, the first
            # having one GPU free.
            await gpu_nodes(GpuNode(name=second, gpus=4, gpu_memory_mib=40960))
            for name, gpus in (("b", 2), ("c", 1)):
                await core.create_namespaced_pod(namespace, gpu_pod(name, borrower, gpus=gpus))

            async def b_and_c_bound() -> bool:
                bound = await bound_pods(api, namespace)
                return bound.get("b") == second and bound.get("c") == second

            await wait_for("b and c bound on the first node", b_and_c_bound)
            await gpu_nodes(GpuNode(name=first, gpus=4, gpu_memory_mib=40960))
            await core.create_namespaced_pod(namespace, gpu_pod("a", borrower, gpus=2))

            async def a_bound() -> bool:
                return (await bound_pods(api, namespace)).get("a") == first

            await wait_for("a bound on the second node", a_bound)
        await core.create_namespaced_pod(namespace, gpu_pod("wide", borrower, gpus=3))
        await core.create_namespaced_pod(namespace, gpu_pod("claim", owner, gpus=4))
        async with running_operator(config):

            async def wide_told() -> bool:
                assert "wide" not in await bound_pods(api, namespace)
                taken = f"taken back before binding by reclaim for {namespace}/"
                return await told_unschedulable(api, namespace, "wide", taken)

            await wait_for("an Unschedulable event naming the take-back on wide", wide_told)

            async def claim_bound() -> bool:
                bound = await bound_pods(api, namespace)
                assert "wide" not in bound
                return bound.get("claim") == second

            await wait_for("claim bound where b and c ran", claim_bound)
            pods = {p.metadata.name: p for p in await pods_in(api, namespace)}
            assert "c" not in pods or pods["c"].metadata.deletion_timestamp is not None
            assert "wide" not in await bound_pods(api, namespace)
    finally:
        await delete_queue(api, borrower)
        await delete_queue(api, owner)
