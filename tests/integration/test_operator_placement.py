"""Where `kai run` places pods, through the real API server.

- `--placement` reaches the engine: two 1-GPU pods arrive one after the other on two empty
  4-GPU nodes. Under binpack the second joins the first (the fuller node); under spread it
  goes to the other one.
- A scalar resource decides the node: of two pods that ask for an RDMA device, the first
  goes to the one node that has one, the second waits, told why.
- A MIG slice goes to a node that offers it (the GPU operator's mixed strategy), and a pod
  of whole GPUs does not, told why.
- A host port is held by one pod per node: of three pods that ask for the same one on two
  nodes, two take a node each (bin-packing would put them together) and the third waits,
  told why.
- Preferred anti-affinity spreads: three replicas that prefer not to share a host, on three
  empty nodes, take one each, where bin-packing would stack them.

Each test's pods select its own nodes by a label, so other tests' nodes take none.
"""

from __future__ import annotations

import pytest
from kai_operator_support import (
    a_queue,
    bound_pods,
    gpu_pod,
    operator_config,
    running_operator,
    told_unschedulable,
    unique,
    wait_for,
)
from kubernetes_asyncio import client

from kai.testing.controlplane import ClusterAccess
from kai.testing.fakes import GpuNode, NodeFactory

RDMA = "rdma/hca"
SLICE = "nvidia.com/mig-1g.10gb"
MIXED = {"nvidia.com/mig.strategy": "mixed", "node-role.kubernetes.io/mig-enabled": "true"}


def _pod(
    name: str,
    queue: str,
    pool: dict[str, str],
    gpus: int = 0,
    devices: dict[str, str] | None = None,
) -> client.V1Pod:
    """A pod of the test's pool asking for whole GPUs and `devices` (resource name ->
    amount, requested with an equal limit, as the API server wants of an extended one)."""
    pod = gpu_pod(name, queue, gpus=gpus)
    pod.spec.node_selector = pool
    resources = pod.spec.containers[0].resources
    for resource, amount in (devices or {}).items():
        resources.requests[resource] = amount
        resources.limits = {**(resources.limits or {}), resource: amount}
    return pod


async def _pool_of(gpu_nodes: NodeFactory, count: int) -> tuple[dict[str, str], list[str]]:
    """`count` empty 4-GPU nodes of a pool of the test's own, and the label that selects it."""
    pool = {"kai-test/placement": unique("pool")}
    names = [unique("gpu") for _ in range(count)]
    for name in names:
        await gpu_nodes(GpuNode(name=name, gpus=4, gpu_memory_mib=40960, topology=pool))
    return pool, names


@pytest.mark.parametrize(("placement", "nodes_used"), [("binpack", 1), ("spread", 2)])
async def test_the_placement_strategy_decides_where_the_second_pod_goes(
    api: client.ApiClient,
    namespace: str,
    gpu_nodes: NodeFactory,
    control_plane: ClusterAccess,
    placement: str,
    nodes_used: int,
) -> None:
    core = client.CoreV1Api(api)
    pool, names = await _pool_of(gpu_nodes, 2)
    config = operator_config(control_plane.kubeconfig, namespace, placement=placement)
    async with a_queue(api, "place") as queue, running_operator(config):
        for index in range(2):
            await core.create_namespaced_pod(namespace, _pod(f"p{index}", queue, pool, gpus=1))

            async def bound(count: int = index + 1) -> bool:
                return len(await bound_pods(api, namespace)) == count

            await wait_for(f"pod {index} to be bound", bound)
        placed = await bound_pods(api, namespace)
        assert set(placed.values()) <= set(names)
        assert len(set(placed.values())) == nodes_used


async def test_a_pod_that_asks_for_an_rdma_device_goes_where_one_is_free(
    api: client.ApiClient,
    namespace: str,
    gpu_nodes: NodeFactory,
    control_plane: ClusterAccess,
) -> None:
    core = client.CoreV1Api(api)
    pool = {"kai-test/placement": unique("pool")}
    plain, wired = unique("gpu"), unique("gpu")
    await gpu_nodes(GpuNode(name=plain, gpus=4, gpu_memory_mib=40960, topology=pool))
    await gpu_nodes(
        GpuNode(name=wired, gpus=4, gpu_memory_mib=40960, topology=pool, extended={RDMA: "1"})
    )
    config = operator_config(control_plane.kubeconfig, namespace)
    async with a_queue(api, "rdma") as queue, running_operator(config):
        for index in range(2):
            pod = _pod(f"p{index}", queue, pool, gpus=1, devices={RDMA: "1"})
            await core.create_namespaced_pod(namespace, pod)

        async def one_bound_one_told() -> bool:
            placed = await bound_pods(api, namespace)
            if len(placed) != 1:
                return False
            [(_, node)] = placed.items()
            [waiting] = {"p0", "p1"} - set(placed)
            return node == wired and await told_unschedulable(
                api, namespace, waiting, f"insufficient {RDMA} (needs 1, free 0)"
            )

        await wait_for("one pod bound to the RDMA node, the other told why", one_bound_one_told)


async def test_a_mig_slice_goes_to_the_mig_node_and_a_whole_gpu_does_not(
    api: client.ApiClient,
    namespace: str,
    gpu_nodes: NodeFactory,
    control_plane: ClusterAccess,
) -> None:
    core = client.CoreV1Api(api)
    pool = {"kai-test/placement": unique("pool")}
    name = unique("mig")
    await gpu_nodes(
        GpuNode(
            name=name,
            gpus=0,
            gpu_memory_mib=40960,
            topology={**pool, **MIXED},
            extended={SLICE: "2"},
        )
    )
    config = operator_config(control_plane.kubeconfig, namespace)
    async with a_queue(api, "mig") as queue, running_operator(config):
        for pod in (
            _pod("sliced", queue, pool, devices={SLICE: "1"}),
            _pod("whole", queue, pool, gpus=1),
        ):
            await core.create_namespaced_pod(namespace, pod)

        async def sliced_bound_whole_told() -> bool:
            placed = await bound_pods(api, namespace)
            return placed == {"sliced": name} and await told_unschedulable(
                api, namespace, "whole", "MIG strategy mixed: only pods of MIG slices run here"
            )

        await wait_for("the slice bound, the whole GPU told why not", sliced_bound_whole_told)


async def test_pods_that_ask_for_one_host_port_take_a_node_each(
    api: client.ApiClient,
    namespace: str,
    gpu_nodes: NodeFactory,
    control_plane: ClusterAccess,
) -> None:
    core = client.CoreV1Api(api)
    pool, names = await _pool_of(gpu_nodes, 2)
    config = operator_config(control_plane.kubeconfig, namespace)
    async with a_queue(api, "ports") as queue, running_operator(config):
        for index in range(3):
            pod = _pod(f"p{index}", queue, pool, gpus=1)
            port = client.V1ContainerPort(container_port=80, host_port=8080)
            pod.spec.containers[0].ports = [port]
            await core.create_namespaced_pod(namespace, pod)

        async def two_apart_one_told() -> bool:
            placed = await bound_pods(api, namespace)
            if len(placed) != 2 or len(set(placed.values())) != 2:
                return False
            [waiting] = {"p0", "p1", "p2"} - set(placed)
            return await told_unschedulable(
                api, namespace, waiting, "insufficient host-port/TCP/8080 (needs 1, free 0)"
            )

        await wait_for("two pods on two nodes, the third told why", two_apart_one_told)
        assert set((await bound_pods(api, namespace)).values()) == set(names)


async def test_replicas_that_prefer_to_be_apart_take_a_node_each(
    api: client.ApiClient,
    namespace: str,
    gpu_nodes: NodeFactory,
    control_plane: ClusterAccess,
) -> None:
    core = client.CoreV1Api(api)
    pool, names = await _pool_of(gpu_nodes, 3)
    apart = client.V1WeightedPodAffinityTerm(
        weight=100,
        pod_affinity_term=client.V1PodAffinityTerm(
            label_selector=client.V1LabelSelector(match_labels={"app": "web"}),
            topology_key="kubernetes.io/hostname",
        ),
    )
    config = operator_config(control_plane.kubeconfig, namespace)
    async with a_queue(api, "apart") as queue, running_operator(config):
        for index in range(3):
            pod = _pod(f"web{index}", queue, pool, gpus=1)
            pod.metadata.labels = {**(pod.metadata.labels or {}), "app": "web"}
            pod.spec.affinity = client.V1Affinity(
                pod_anti_affinity=client.V1PodAntiAffinity(
                    preferred_during_scheduling_ignored_during_execution=[apart]
                )
            )
            await core.create_namespaced_pod(namespace, pod)

        async def all_bound() -> bool:
            return len(await bound_pods(api, namespace)) == 3

        await wait_for("three replicas bound", all_bound)
        assert sorted((await bound_pods(api, namespace)).values()) == sorted(names)
