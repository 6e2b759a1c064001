"""Reclaim live: a queue owed its deserved quota gets it back from a queue that borrowed it.

Queue `lender` (deserved 0) fills a 4-GPU node with four 1-GPU pods. Queue `owner`
(deserved 4) then asks for one 4-GPU pod. The only valid reclaim takes all four
borrowed GPUs: exactly the lender's pods are evicted, each with an Evicted event
naming the reclaim, the owner's pod is never touched, and once the victims are gone
(no kubelet runs here, so the test finishes any graceful deletion; meanwhile the
owner's PodGroup says it is pipelined onto the room they leave) the owner's pod is
bound.
"""

from __future__ import annotations

from kai_operator_support import (
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


async def test_reclaim_evicts_exactly_the_borrowed_pods_and_binds_the_owner(
    api: client.ApiClient, namespace: str, gpu_nodes: NodeFactory, control_plane: ClusterAccess
) -> None:
    core = client.CoreV1Api(api)
    lender, owner = unique("lender"), unique("owner")
    await create_queue(api, lender, gpu_quota=0)
    await create_queue(api, owner, gpu_quota=4)
    node = unique("gpu")
    await gpu_nodes(GpuNode(name=node, gpus=4, gpu_memory_mib=40960))
    borrowed = {f"borrowed-{i}" for i in range(4)}
    try:
        async with running_operator(operator_config(control_plane.kubeconfig, namespace)):
            for name in sorted(borrowed):
                pod = gpu_pod(name, lender, gpus=1)
                pod.spec.termination_grace_period_seconds = 30  # they linger, as on a kubelet
                await core.create_namespaced_pod(namespace, pod)

            async def lender_running() -> bool:
                return set(await bound_pods(api, namespace)) == borrowed

            await wait_for("the lender's four pods bound", lender_running)
            await core.create_namespaced_pod(namespace, gpu_pod("claim", owner, gpus=4))

            async def victims_evicted() -> bool:
                pods = {p.metadata.name: p for p in await pods_in(api, namespace)}
                leaving = {
                    name
                    for name in borrowed
                    if name not in pods or pods[name].metadata.deletion_timestamp is not None
                }
                return leaving == borrowed

            await wait_for("all four borrowed pods evicted", victims_evicted)
            pods = {p.metadata.name: p for p in await pods_in(api, namespace)}
            assert pods["claim"].metadata.deletion_timestamp is None

            async def each_victim_told_why() -> bool:
                for name in borrowed:
                    events = await events_for(api, namespace, name)
                    if not any(
                        e.reason == "Evicted" and "evicted by reclaim" in e.message for e in events
                    ):
                        return False
                return True

            await wait_for(
                "an Evicted event naming the reclaim on each victim", each_victim_told_why
            )

            async def owner_pipelined() -> bool:
                for group in await list_pod_groups(api, namespace):
                    if group["spec"].get("queue") != owner:
                        continue
                    conditions = (group.get("status") or {}).get("schedulingConditions") or []
                    reasons = [r.get("reason") for c in conditions for r in c.get("reasons") or []]
                    return "Pipelined" in reasons
                return False

            # While the victims terminate, the owner waits on the room they leave.
            await wait_for("the owner's PodGroup showing it is pipelined", owner_pipelined)
            for name in borrowed & set(pods):  # what a kubelet would do: finish the deletion
                if pods[name].metadata.deletion_timestamp is not None:
                    await core.delete_namespaced_pod(name, namespace, grace_period_seconds=0)

            async def owner_bound() -> bool:
                return (await bound_pods(api, namespace)).get("claim") == node

            await wait_for("the owner's pod bound on the freed node", owner_bound)
    finally:
        await delete_queue(api, lender)
        await delete_queue(api, owner)
