"""Live, a pending pod stops waiting on the room of a pod stuck in its deletion.

A running pod that a finalizer keeps after its deletion is Releasing, then, past KAI's
`--stuck-in-releasing-threshold`, StuckInReleasing: its room is no longer offered. kai read
every deleting pod as Releasing, so a pod that only fits there stayed Pipelined on it for as
long as the finalizer held, however long. With the threshold at 3 s the pending pod is told
it fits nowhere, and once the stuck pod is gone it is bound there.
"""

from __future__ import annotations

import contextlib

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
from kai.testing.fakes import GpuNode, NodeFactory, set_pod_phase

HOLD = "kai.test/hold"
THRESHOLD_SECONDS = 3.0


async def test_a_pod_stuck_in_its_deletion_is_not_waited_on(
    api: client.ApiClient, namespace: str, gpu_nodes: NodeFactory, control_plane: ClusterAccess
) -> None:
    core = client.CoreV1Api(api)
    queue = unique("stuck")
    await create_queue(api, queue, gpu_quota=1)
    node = unique("gpu")
    await gpu_nodes(GpuNode(name=node, gpus=1, gpu_memory_mib=40960))
    stuck = gpu_pod("stuck", queue, gpus=1)
    stuck.metadata.finalizers = [HOLD]  # deleted, it stays until the finalizer goes
    config = operator_config(
        control_plane.kubeconfig, namespace, stuck_in_releasing_seconds=THRESHOLD_SECONDS
    )
    try:
        async with running_operator(config):
            await core.create_namespaced_pod(namespace, stuck)

            async def stuck_bound() -> bool:
                return "stuck" in await bound_pods(api, namespace)

            await wait_for("the first pod bound", stuck_bound)
            await set_pod_phase(api, namespace, "stuck", "Running")
            await core.delete_namespaced_pod("stuck", namespace, grace_period_seconds=0)
            await core.create_namespaced_pod(namespace, gpu_pod("next", queue, gpus=1))

            async def told_it_fits_nowhere() -> bool:
                return await told_unschedulable(
                    api,
                    namespace,
                    "next",
                    "insufficient GPUs (needs 1, free 0; 1 held by pods stuck in their deletion)",
                )

            await wait_for("the pending pod told it fits nowhere", told_it_fits_nowhere)
            assert "next" not in await bound_pods(api, namespace)
            await core.patch_namespaced_pod("stuck", namespace, {"metadata": {"finalizers": None}})

            async def next_bound() -> bool:
                return (await bound_pods(api, namespace)).get("next") == node

            await wait_for("the pending pod bound once the stuck pod is gone", next_bound)
    finally:
        with contextlib.suppress(client.ApiException):
            await core.patch_namespaced_pod("stuck", namespace, {"metadata": {"finalizers": None}})
        await delete_queue(api, queue)
