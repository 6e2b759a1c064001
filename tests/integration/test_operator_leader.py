"""Two replicas: only the Lease holder writes; when it stops, or loses the Lease midway, the other takes over."""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

from kai_operator_support import (
    body,
    bound_pods,
    create_queue,
    delete_queue,
    get_queue,
    gpu_pod,
    list_pod_groups,
    operator_config,
    running_operator,
    stop_operator,
    unique,
    wait_for,
)
from kubernetes_asyncio import client

from kai.operator.app import Operator
from kai.testing.controlplane import ClusterAccess
from kai.testing.fakes import GpuNode, NodeFactory
from tests.faulty_engine import FaultyEngine

LONG_LEASE = {"lease_seconds": 120.0, "renew_deadline_seconds": 80.0, "retry_seconds": 0.5}
"""A Lease no test waits out: a takeover within a test's patience is the release's doing."""
STANDBY_PASSES = 3


async def test_only_the_leader_binds_and_the_standby_takes_over(
    api: client.ApiClient, namespace: str, gpu_nodes: NodeFactory, control_plane: ClusterAccess
) -> None:
    core = client.CoreV1Api(api)
    queue = unique("ha")
    await create_queue(api, queue)
    await gpu_nodes(GpuNode(name=unique("gpu"), gpus=8, gpu_memory_mib=40960))
    first_config = operator_config(control_plane.kubeconfig, namespace, **LONG_LEASE)
    second_config = operator_config(
        control_plane.kubeconfig, namespace, lease_name=first_config.lease_name, **LONG_LEASE
    )
    try:
        async with contextlib.AsyncExitStack() as stack:
            first, first_task = await stack.enter_async_context(running_operator(first_config))
            await wait_for("the first replica to lead", _leads(first), timeout=60)
            second, _ = await stack.enter_async_context(running_operator(second_config))
            await _wait_standing_by(second)

            for index in range(3):
                await core.create_namespaced_pod(
                    namespace, gpu_pod(f"early-{index}", queue, gpus=1)
                )

            async def early_bound() -> bool:
                return len(await bound_pods(api, namespace)) == 3

            await wait_for("the leader to bind", early_bound, timeout=60)
            assert second.loop.cycles == 0  # the standby never ran a cycle
            assert await _binders(core, namespace, "early-") == {first_config.identity}

            await stop_operator(first_task)  # a clean stop releases the Lease
            # The Lease lasts longer than this wait: only its release lets the standby in.
            await wait_for("the standby to take over", _leads(second), timeout=60)

            for index in range(2):
                await core.create_namespaced_pod(namespace, gpu_pod(f"late-{index}", queue, gpus=1))

            async def late_bound() -> bool:
                return len(await bound_pods(api, namespace)) == 5

            await wait_for("the new leader to bind", late_bound, timeout=60)
            assert await _binders(core, namespace, "late-") == {second_config.identity}
    finally:
        await delete_queue(api, queue)


async def test_a_leader_that_loses_the_lease_mid_cycle_writes_nothing_more(
    api: client.ApiClient, namespace: str, gpu_nodes: NodeFactory, control_plane: ClusterAccess
) -> None:
    core = client.CoreV1Api(api)
    leases = client.CoordinationV1Api(api)
    queue = unique("deposed")
    await create_queue(api, queue)
    await gpu_nodes(GpuNode(name=unique("gpu"), gpus=8, gpu_memory_mib=40960))
    first_config = operator_config(control_plane.kubeconfig, namespace)
    second_config = operator_config(
        control_plane.kubeconfig, namespace, lease_name=first_config.lease_name
    )
    engine = FaultyEngine()
    try:
        async with contextlib.AsyncExitStack() as stack:
            stack.callback(engine.release.set)  # never leave the engine thread waiting
            first, first_task = await stack.enter_async_context(
                running_operator(first_config, engine)
            )
            await wait_for("the first replica to lead", _leads(first), timeout=60)
            second, _ = await stack.enter_async_context(running_operator(second_config))
            await _wait_standing_by(second)

            queue_status = (await get_queue(api, queue)).get("status")
            engine.holding = True
            await core.create_namespaced_pod(namespace, gpu_pod("contested", queue, gpus=1))

            async def in_the_engine() -> bool:
                return engine.entered.is_set()

            await wait_for("the leader's cycle to reach the engine", in_the_engine, timeout=60)
            passes = first.loop.passes  # the held cycle's pass has not ended
            await _steal_lease(leases, namespace, first_config.lease_name, "thief")

            async def deposed() -> bool:
                return not first.is_leader()

            await wait_for("the first replica to notice it lost the Lease", deposed, timeout=60)
            engine.release.set()

            async def cycle_ended() -> bool:
                return first.loop.passes > passes

            await wait_for("the deposed leader's cycle to end", cycle_ended, timeout=60)
            # Its cycle is over: whatever it had written would be in the cluster now.
            assert "contested" not in await bound_pods(api, namespace)
            assert (await get_queue(api, queue)).get("status") == queue_status
            groups = await list_pod_groups(api, namespace)  # written while it led, if at all
            assert all(group.get("status") is None for group in groups)
            assert not [
                event
                for event in (await core.list_namespaced_event(namespace)).items
                if event.reporting_instance == first_config.identity
            ]
            # At least the held cycle; on a loaded machine a renewal can come late, and a cycle
            # that finds the Lease's validity run out meanwhile is dropped the same way.
            assert first.loop.abandoned >= 1

            await stop_operator(first_task)
            await leases.delete_namespaced_lease(first_config.lease_name, namespace)  # thief gone
            await wait_for("the standby to take over", _leads(second), timeout=60)

            async def bound() -> bool:
                return "contested" in await bound_pods(api, namespace)

            await wait_for("the new leader to bind", bound, timeout=60)
            assert await _binders(core, namespace, "contested") == {second_config.identity}
    finally:
        await delete_queue(api, queue)


def _leads(operator: Operator) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        return operator.is_leader()

    return check


async def _wait_standing_by(operator: Operator) -> None:
    """Until the replica has run a few passes of its loop (its elector tries every pass's time)."""

    async def passes() -> bool:
        return operator.loop.passes >= STANDBY_PASSES

    await wait_for("the second replica to stand by", passes, timeout=60)
    assert not operator.is_leader()


async def _steal_lease(
    leases: client.CoordinationV1Api, namespace: str, name: str, holder: str
) -> None:
    """Another holder takes the Lease for longer than the test lasts, as a partitioned peer might."""

    async def stolen() -> bool:
        lease = await leases.read_namespaced_lease(name, namespace)
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        taken = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": name, "resourceVersion": lease.metadata.resource_version},
            "spec": {
                "holderIdentity": holder,
                "leaseDurationSeconds": 3600,
                "acquireTime": now,
                "renewTime": now,
                "leaseTransitions": (lease.spec.lease_transitions or 0) + 1,
            },
        }
        try:
            await leases.replace_namespaced_lease(name, namespace, body(taken))
        except client.exceptions.ApiException as error:
            if error.status != 409:  # the holder renewed since the read: read again
                raise
            return False
        return True

    await wait_for("the Lease to be taken", stolen, timeout=60)


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

    await wait_for("Scheduled events", reported, timeout=60)
    return found
