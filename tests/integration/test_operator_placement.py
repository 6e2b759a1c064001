"""Where `kai run` places pods, through the real API server.

- `--placement` reaches the engine: two 1-GPU pods arrive one after the other on two empty
  4-GPU nodes. Under binpack the second joins the first (the fuller node); under spread it
  goes to the other one.
- A scalar resource decides the node: of two pods that ask for an RDMA device, the first
  goes to the one node that has one, the second waits, told why.
- A MIG slice goes to a node that offers it (the GPU operator's mixed strategy), and a pod
  of whole GPUs does not, told why.
"""

from __future__ import annotations

import pytest
from kai_operator_support import (
    bound_pods,
    create_queue,
    delete_queue,
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
    queue = unique("place")
    await create_queue(api, queue)
    label = {"kai-test/placement": unique("pool")}
    names = [unique("gpu") for _ in range(2)]
    for name in names:
        await gpu_nodes(GpuNode(name=name, gpus=4, gpu_memory_mib=40960, topology=label))
    try:
        config = operator_config(control_plane.kubeconfig, namespace, placement=placement)
        async with running_operator(config):
            for index in range(2):
                pod = gpu_pod(f"p{index}", queue, gpus=1)
                pod.spec.node_selector = label  # only this test's nodes
                await core.create_namespaced_pod(namespace, pod)

                async def bound(count: int = index + 1) -> bool:
                    return len(await bound_pods(api, namespace)) == count

                await wait_for(f"pod {index} to be bound", bound)
            placed = await bound_pods(api, namespace)
            assert set(placed.values()) <= set(names)
            assert len(set(placed.values())) == nodes_used
    finally:
        await delete_queue(api, queue)


async def test_a_pod_that_asks_for_an_rdma_device_goes_where_one_is_free(
    api: client.ApiClient,
    namespace: str,
    gpu_nodes: NodeFactory,
    control_plane: ClusterAccess,
) -> None:
    core = client.CoreV1Api(api)
    queue = unique("rdma")
    await create_queue(api, queue)
    label = {"kai-test/placement": unique("pool")}
    plain, wired = unique("gpu"), unique("gpu")
    await gpu_nodes(GpuNode(name=plain, gpus=4, gpu_memory_mib=40960, topology=label))
    await gpu_nodes(
        GpuNode(
            name=wired,
            gpus=4,
            gpu_memory_mib=40960,
            topology=label,
            extended={RDMA: "1"},
        )
    )
    try:
        async with running_operator(operator_config(control_plane.kubeconfig, namespace)):
            for index in range(2):
                pod = gpu_pod(f"p{index}", queue, gpus=1)
                pod.spec.node_selector = label  # only this test's nodes
                pod.spec.containers[0].resources.requests[RDMA] = "1"
                pod.spec.containers[0].resources.limits[RDMA] = "1"
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
    finally:
        await delete_queue(api, queue)


async def test_a_mig_slice_goes_to_the_mig_node_and_a_whole_gpu_does_not(
    api: client.ApiClient,
    namespace: str,
    gpu_nodes: NodeFactory,
    control_plane: ClusterAccess,
) -> None:
    core = client.CoreV1Api(api)
    queue = unique("mig")
    await create_queue(api, queue)
    label = {"kai-test/placement": unique("pool")}
    name = unique("mig")
    mixed = {"nvidia.com/mig.strategy": "mixed", "node-role.kubernetes.io/mig-enabled": "true"}
    await gpu_nodes(
        GpuNode(
            name=name,
            gpus=0,
            gpu_memory_mib=40960,
            topology={**label, **mixed},
            extended={SLICE: "2"},
        )
    )
    try:
        async with running_operator(operator_config(control_plane.kubeconfig, namespace)):
            sliced = gpu_pod("sliced", queue)
            sliced.spec.containers[0].resources.requests[SLICE] = "1"
            sliced.spec.containers[0].resources.limits = {SLICE: "1"}
            whole = gpu_pod("whole", queue, gpus=1)
            for pod in (sliced, whole):
                pod.spec.node_selector = label  # only this test's node
                await core.create_namespaced_pod(namespace, pod)

            async def sliced_bound_whole_told() -> bool:
                placed = await bound_pods(api, namespace)
                return placed == {"sliced": name} and await told_unschedulable(
                    api, namespace, "whole", "MIG strategy mixed: only pods of MIG slices run here"
                )

            await wait_for("the slice bound, the whole GPU told why not", sliced_bound_whole_told)
    finally:
        await delete_queue(api, queue)
