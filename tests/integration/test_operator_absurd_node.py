"""A Node reporting more GPUs than any machine is left out, live, and the pods go elsewhere.

A broken device plugin (or a typo in a hand-made node) can report 10^12 `nvidia.com/gpu`;
the API server accepts any integer. The scheduler ranks nodes by free devices in a table
as long as the largest node's count, so every cycle ran out of memory while that Node
existed: nothing was scheduled anywhere. The Node is now refused by its count
(`kai.api.constants.MAX_GPUS_PER_NODE`) and left out; a GPU pod is bound on the node beside it.
"""

from __future__ import annotations

import contextlib
import resource
from collections.abc import Iterator
from pathlib import Path

from kai_operator_support import (
    bound_pods,
    create_queue,
    delete_queue,
    gpu_pod,
    operator_config,
    running_operator,
    unique,
    wait_for,
)
from kubernetes_asyncio import client

from kai.testing.controlplane import ClusterAccess
from kai.testing.fakes import GpuNode, NodeFactory

HEADROOM = 4 << 30
"""Address space the test process may grow by while the operator runs: the old code's table
for 10^12 devices grows until memory runs out, and should fail here, not in the machine's OOM
killer."""


def _address_space() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmSize:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmSize in /proc/self/status")


@contextlib.contextmanager
def _bounded_growth(headroom: int) -> Iterator[None]:
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    bound = _address_space() + headroom
    if hard != resource.RLIM_INFINITY:
        bound = min(bound, hard)
    resource.setrlimit(resource.RLIMIT_AS, (bound, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


async def test_a_node_with_absurdly_many_gpus_is_left_out_and_the_others_schedule(
    api: client.ApiClient, namespace: str, gpu_nodes: NodeFactory, control_plane: ClusterAccess
) -> None:
    queue = unique("absurd")
    await create_queue(api, queue, gpu_quota=2)
    absurd, usable = unique("absurd"), unique("gpu")
    await gpu_nodes(GpuNode(name=absurd, gpus=10**12, gpu_memory_mib=40960))
    await gpu_nodes(GpuNode(name=usable, gpus=2, gpu_memory_mib=40960))
    core = client.CoreV1Api(api)
    try:
        await core.create_namespaced_pod(namespace, gpu_pod("train", queue, gpus=1))
        with _bounded_growth(HEADROOM):
            async with running_operator(operator_config(control_plane.kubeconfig, namespace)):

                async def bound() -> bool:
                    return "train" in await bound_pods(api, namespace)

                await wait_for("the GPU pod bound beside the absurd node", bound)
        assert (await bound_pods(api, namespace))["train"] == usable
    finally:
        await delete_queue(api, queue)
