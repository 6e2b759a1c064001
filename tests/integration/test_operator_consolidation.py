"""Consolidation moves a replica with required anti-affinity, through `kai run`.

Three 2-GPU nodes of the test's own pool, a GPU taken on each: replicas web-a and web-b
(which must not share a host) on the first two, a pod of another scheduler on the third
(kai never moves it); a 2-GPU pod then arrives. Only a move seats it, and the only move
there is takes a replica to the third node. Before, kai's consolidation moved no pod an inter-pod term concerns,
and the 2-GPU pod waited. The cluster must show it: one replica evicted, the 2-GPU pod
bound on the node that replica left, the other pods where they were. (With no
controller here the evicted replica is not made again; where the engine re-seats it is
the unit and scenario tests' to check.)
"""

from __future__ import annotations

from kai_operator_support import (
    a_queue,
    bound_pods,
    gpu_pod,
    operator_config,
    running_operator,
    unique,
    wait_for,
)
from kubernetes_asyncio import client

from kai.testing.controlplane import ClusterAccess
from kai.testing.fakes import GpuNode, NodeFactory

HOST = "kubernetes.io/hostname"


def _bound_to(name: str, queue: str, node: str, app: str | None = None) -> client.V1Pod:
    """A 1-GPU pod bound to `node` at its creation, as if a scheduler had placed it; with
    `app`, a replica that must not share a host with another of the app."""
    pod = gpu_pod(name, queue, gpus=1, labels={"app": app} if app else None)
    pod.spec.node_name = node
    if app:
        apart = client.V1PodAffinityTerm(
            label_selector=client.V1LabelSelector(match_labels={"app": app}), topology_key=HOST
        )
        pod.spec.affinity = client.V1Affinity(
            pod_anti_affinity=client.V1PodAntiAffinity(
                required_during_scheduling_ignored_during_execution=[apart]
            )
        )
    return pod


async def test_consolidation_moves_a_replica_that_must_stay_apart(
    api: client.ApiClient, namespace: str, gpu_nodes: NodeFactory, control_plane: ClusterAccess
) -> None:
    core = client.CoreV1Api(api)
    pool = {"kai-test/consolidation": unique("pool")}
    names = [unique("gpu") for _ in range(3)]
    for name in names:
        await gpu_nodes(GpuNode(name=name, gpus=2, gpu_memory_mib=40960, topology=pool))
    app = unique("web")
    config = operator_config(control_plane.kubeconfig, namespace)
    async with a_queue(api, "moves") as queue, running_operator(config):
        placed = {"web-a": names[0], "web-b": names[1], "batch": names[2]}
        for pod_name, node in placed.items():
            replica = app if pod_name.startswith("web") else None
            pod = _bound_to(pod_name, queue, node, replica)
            if replica is None:
                pod.spec.scheduler_name = "default-scheduler"
            await core.create_namespaced_pod(namespace, pod)
        wide = gpu_pod("wide", queue, gpus=2)
        wide.spec.node_selector = pool
        await core.create_namespaced_pod(namespace, wide)

        async def wide_bound_where_a_replica_was() -> bool:
            bound = await bound_pods(api, namespace)
            if "wide" not in bound:
                return False
            left = [pod for pod in ("web-a", "web-b") if placed[pod] == bound["wide"]]
            assert left, f"wide bound on {bound['wide']}, where no replica ran: {bound}"
            return left[0] not in bound

        await wait_for(
            "wide bound on the node a moved replica left", wide_bound_where_a_replica_was
        )
        bound = await bound_pods(api, namespace)
        stayed = {pod: node for pod, node in placed.items() if pod in bound}
        assert len(stayed) == 2 and "batch" in stayed, bound
        assert all(bound[pod] == node for pod, node in stayed.items()), bound
