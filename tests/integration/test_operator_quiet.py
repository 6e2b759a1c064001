"""A quiet cluster is let be: cycles are skipped until something changes, and a change is seen at once.

The support's config sets no periodic full cycle (an hour), so the second pod can
only be bound because its creation ended the quiet.
"""

from __future__ import annotations

import asyncio

from kai_operator_support import (
    bound_pods,
    create_queue,
    delete_queue,
    gpu_pod,
    metric,
    operator_config,
    running_operator,
    unique,
    wait_for,
)
from kubernetes_asyncio import client

from kai.testing.controlplane import ClusterAccess
from kai.testing.fakes import GpuNode, NodeFactory


async def test_cycles_are_skipped_while_nothing_changes_and_a_new_pod_ends_it(
    api: client.ApiClient, namespace: str, gpu_nodes: NodeFactory, control_plane: ClusterAccess
) -> None:
    core = client.CoreV1Api(api)
    queue = unique("quiet")
    await create_queue(api, queue)
    await gpu_nodes(GpuNode(name=unique("gpu"), gpus=8, gpu_memory_mib=40960))
    config = operator_config(control_plane.kubeconfig, namespace, leader_election=False)
    try:
        async with running_operator(config) as (operator, _):
            await core.create_namespaced_pod(namespace, gpu_pod("first", queue, gpus=1))

            async def first_bound_then_quiet() -> bool:
                return "first" in await bound_pods(api, namespace) and operator.loop.skipped >= 3

            await wait_for("the first pod bound, then skipped cycles", first_bound_then_quiet)
            assert await metric(operator, "kai_cycles_skipped_total") >= 3
            # idle: the solver no cycle needed yet is loaded on the engine's thread
            preload = operator.loop.solver_preload
            assert preload is not None
            await asyncio.wait_for(asyncio.wrap_future(preload), timeout=120)

            await core.create_namespaced_pod(namespace, gpu_pod("second", queue, gpus=1))

            async def second_bound() -> bool:
                return "second" in await bound_pods(api, namespace)

            await wait_for("the second pod bound", second_bound, timeout=60)
    finally:
        await delete_queue(api, queue)
