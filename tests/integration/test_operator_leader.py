"""Two replicas: only the Lease holder schedules; when it stops, the other takes over."""

from __future__ import annotations

import asyncio
import contextlib
import time

from kai_operator_support import (
    bound_pods,
    create_queue,
    delete_queue,
    gpu_pod,
    operator_config,
    running_operator,
    stop_operator,
    unique,
    wait_for,
)
from kubernetes_asyncio import client

from kai.testing.controlplane import ClusterAccess
from kai.testing.fakes import GpuNode, NodeFactory


async def test_only_the_leader_binds_and_the_standby_takes_over(
    api: client.ApiClient, namespace: str, gpu_nodes: NodeFactory, control_plane: ClusterAccess
) -> None:
    core = client.CoreV1Api(api)
    queue = unique("ha")
    await create_queue(api, queue)
    await gpu_nodes(GpuNode(name=unique("gpu"), gpus=8, gpu_memory_mib=40960))
    first_config = operator_config(control_plane.kubeconfig, namespace)
    second_config = operator_config(
        control_plane.kubeconfig, namespace, lease_name=first_config.lease_name
    )
    try:
        async with contextlib.AsyncExitStack() as stack:
            first, first_task = await stack.enter_async_context(running_operator(first_config))

            async def first_leads() -> bool:
                return first.is_leader()

            await wait_for("the first replica to lead", first_leads)
            second, _ = await stack.enter_async_context(running_operator(second_config))
            await asyncio.sleep(3 * second_config.retry_seconds)
            assert not second.is_leader()

            for index in range(3):
                await core.create_namespaced_pod(
                    namespace, gpu_pod(f"early-{index}", queue, gpus=1)
                )

            async def early_bound() -> bool:
                return len(await bound_pods(api, namespace)) == 3

            await wait_for("the leader to bind", early_bound)
            assert second.loop.cycles == 0  # the standby never ran a cycle
            assert await _binders(core, namespace, "early-") == {first_config.identity}

            await stop_operator(first_task)  # a clean stop releases the Lease
            stopped = time.monotonic()

            async def second_leads() -> bool:
                return second.is_leader()

            await wait_for("the standby to take over", second_leads, timeout=10)
            assert time.monotonic() - stopped < 2 * second_config.lease_seconds

            for index in range(2):
                await core.create_namespaced_pod(namespace, gpu_pod(f"late-{index}", queue, gpus=1))

            async def late_bound() -> bool:
                return len(await bound_pods(api, namespace)) == 5

            await wait_for("the new leader to bind", late_bound)
            assert await _binders(core, namespace, "late-") == {second_config.identity}
    finally:
        await delete_queue(api, queue)


async def _binders(core: client.CoreV1Api, namespace: str, prefix: str) -> set[str]:
    """Which scheduler instances reported binding the pods named `prefix...`."""

    async def collect() -> set[str]:
        events = (await core.list_namespaced_event(namespace)).items
        return {
            e.reporting_instance
            for e in events
            if e.reason == "Scheduled" and e.involved_object.name.startswith(prefix)
        }

    found: set[str] = set()

    async def reported() -> bool:
        nonlocal found
        found = await collect()
        return bool(found)

    await wait_for("Scheduled events", reported)
    return found
