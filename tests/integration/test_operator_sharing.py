"""Two half-GPU pods share one device the way KAI's binder shares it.

One reservation pod holds the device (pinned to the node, asking for a whole
`nvidia.com/gpu`); both pods carry its `runai-gpu-group`; each gets ConfigMaps
with GPU_PORTION and, once the reservation pod publishes the device UUID (which
NVML does on a real node, and this test does by hand as no kubelet runs), with
NVIDIA_VISIBLE_DEVICES. The reservation pod goes away with its last user.
"""

from __future__ import annotations

from kai_operator_support import (
    bound_pods,
    create_queue,
    delete_queue,
    ensure_namespace,
    gpu_pod,
    operator_config,
    pods_in,
    running_operator,
    unique,
    wait_for,
    wait_passes,
)
from kubernetes_asyncio import client

from kai.testing.controlplane import ClusterAccess
from kai.testing.fakes import GpuNode, NodeFactory

RESERVATIONS = "kai-resource-reservation"
GROUP_LABEL = "runai-gpu-group"


async def test_two_half_gpu_pods_share_one_reserved_device(
    api: client.ApiClient, namespace: str, gpu_nodes: NodeFactory, control_plane: ClusterAccess
) -> None:
    core = client.CoreV1Api(api)
    await ensure_namespace(api, RESERVATIONS)
    queue = unique("share")
    await create_queue(api, queue)
    node = unique("gpu")
    await gpu_nodes(GpuNode(name=node, gpus=2, gpu_memory_mib=40960))
    try:
        config = operator_config(control_plane.kubeconfig, namespace)
        async with running_operator(config) as (operator, _):
            for name in ("half-a", "half-b"):
                await core.create_namespaced_pod(
                    namespace, gpu_pod(name, queue, annotations={"gpu-fraction": "0.5"})
                )

            async def both_bound() -> bool:
                return len(await bound_pods(api, namespace)) == 2

            await wait_for("both half-GPU pods to be bound", both_bound)
            pods = {p.metadata.name: p for p in await pods_in(api, namespace)}
            groups = {p.metadata.labels.get(GROUP_LABEL) for p in pods.values()}
            assert len(groups) == 1  # one shared device
            (group,) = groups
            assert group is not None
            assert {p.spec.node_name for p in pods.values()} == {node}

            reservations = await _reservations(core, group)
            assert len(reservations) == 1
            reservation = reservations[0]
            assert reservation.spec.node_name == node
            assert reservation.spec.containers[0].resources.limits["nvidia.com/gpu"] == "1"

            prefix = pods["half-a"].metadata.annotations["runai/shared-gpu-configmap"]
            evar = await core.read_namespaced_config_map(f"{prefix}-0-evar", namespace)
            assert evar.data["GPU_PORTION"] == "0.5"
            devices = await core.read_namespaced_config_map(f"{prefix}-0", namespace)
            assert "NVIDIA_VISIBLE_DEVICES" not in (devices.data or {})  # no UUID published yet

            # What the reservation pod does through NVML on a real node:
            uuid = "GPU-3f1c5b9e-0000-4000-8000-000000000001"
            await core.patch_namespaced_pod(
                reservation.metadata.name,
                RESERVATIONS,
                {"metadata": {"annotations": {"run.ai/reserve_for_gpu_index": uuid}}},
            )

            async def devices_published() -> bool:
                found = await core.read_namespaced_config_map(f"{prefix}-0", namespace)
                return (found.data or {}).get("NVIDIA_VISIBLE_DEVICES") == uuid

            await wait_for("the device UUID to reach the pod's ConfigMap", devices_published)

            await core.delete_namespaced_pod("half-a", namespace, grace_period_seconds=0)

            async def cycles_without_half_a() -> bool:
                return f"{namespace}/half-a" not in operator.cache.view().pods

            await wait_for("the operator to see half-a gone", cycles_without_half_a)
            # Two whole passes that knew half-a was gone: time enough to collect it wrongly.
            await wait_passes(operator, 3)
            assert len(await _reservations(core, group)) == 1  # half-b still uses the device

            await core.delete_namespaced_pod("half-b", namespace, grace_period_seconds=0)

            async def reservation_gone() -> bool:
                return not await _reservations(core, group)

            await wait_for("the unused reservation pod to be deleted", reservation_gone)
    finally:
        await delete_queue(api, queue)


async def _reservations(core: client.CoreV1Api, group: str) -> list[client.V1Pod]:
    listing = await core.list_namespaced_pod(RESERVATIONS, label_selector=f"{GROUP_LABEL}={group}")
    return [p for p in listing.items if p.metadata.deletion_timestamp is None]
