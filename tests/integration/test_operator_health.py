"""A scheduler whose cycles fail says so, and one group that trips the engine does not stop the rest.

The operator runs in process with an engine that raises on data the test puts in
the cluster (`tests/faulty_engine.py`): a labelled node (a failure no group
causes) or a pod named `poisoned-...` (a failure its group causes).
"""

from __future__ import annotations

from kai_operator_support import (
    bound_pods,
    create_queue,
    delete_queue,
    events_for,
    gpu_pod,
    healthz,
    list_pod_groups,
    metric,
    operator_config,
    running_operator,
    unique,
    wait_for,
)
from kubernetes_asyncio import client

from kai.operator.isolation import ENGINE_INVARIANT_VIOLATED
from kai.testing.controlplane import ClusterAccess
from kai.testing.fakes import GpuNode, NodeFactory
from tests.faulty_engine import FaultyEngine

UNHEALTHY_AFTER = 3


async def test_failing_cycles_turn_healthz_red_until_one_succeeds(
    api: client.ApiClient, namespace: str, gpu_nodes: NodeFactory, control_plane: ClusterAccess
) -> None:
    core = client.CoreV1Api(api)
    queue = unique("health")
    await create_queue(api, queue)
    node = unique("gpu")
    await gpu_nodes(GpuNode(name=node, gpus=8, gpu_memory_mib=40960))
    engine = FaultyEngine()
    config = operator_config(
        control_plane.kubeconfig,
        namespace,
        leader_election=False,
        failed_cycles_unhealthy=UNHEALTHY_AFTER,
    )
    try:
        async with running_operator(config, engine) as (operator, _):

            async def cycled_and_healthy() -> bool:
                return operator.loop.cycles > 0 and await healthz(operator) == 200

            await wait_for("a good cycle and a green /healthz", cycled_and_healthy, timeout=60)

            await _label_node(core, node, {engine.poisoned_node_label: "yes"})
            await core.create_namespaced_pod(namespace, gpu_pod("waits", queue, gpus=1))

            async def red() -> bool:
                return await healthz(operator) == 503

            await wait_for("/healthz to turn red", red, timeout=60)
            failures = await metric(operator, "kai_scheduler_cycle_failures_total")
            assert failures >= UNHEALTHY_AFTER
            assert await metric(operator, "kai_scheduler_consecutive_failed_cycles") >= (
                UNHEALTHY_AFTER
            )
            assert operator.loop.failed_in_a_row >= UNHEALTHY_AFTER

            await _label_node(core, node, {engine.poisoned_node_label: None})

            async def green_and_bound() -> bool:
                return await healthz(operator) == 200 and "waits" in await bound_pods(
                    api, namespace
                )

            await wait_for("/healthz green and the pod bound", green_and_bound, timeout=60)
            assert await metric(operator, "kai_scheduler_consecutive_failed_cycles") == 0
            assert await metric(operator, "kai_scheduler_cycle_failures_total") >= failures
    finally:
        await delete_queue(api, queue)


async def test_a_group_that_trips_the_engine_is_set_aside_and_the_rest_bind(
    api: client.ApiClient, namespace: str, gpu_nodes: NodeFactory, control_plane: ClusterAccess
) -> None:
    core = client.CoreV1Api(api)
    queue = unique("isolate")
    await create_queue(api, queue)
    await gpu_nodes(GpuNode(name=unique("gpu"), gpus=8, gpu_memory_mib=40960))
    good = [f"good-{index}" for index in range(4)]
    for name in [*good, "poisoned-job"]:
        await core.create_namespaced_pod(namespace, gpu_pod(name, queue, gpus=1))
    engine = FaultyEngine()
    config = operator_config(control_plane.kubeconfig, namespace, leader_election=False)
    try:
        async with running_operator(config, engine) as (operator, _):

            async def set_aside() -> bool:
                return any(
                    _condition_reason(group) == ENGINE_INVARIANT_VIOLATED
                    for group in await list_pod_groups(api, namespace)
                )

            await wait_for("the poisoned group's condition", set_aside, timeout=60)

            async def good_bound() -> bool:
                return set(good) <= set(await bound_pods(api, namespace))

            await wait_for("the other pods to be bound", good_bound, timeout=60)
            # In the very cycle that found the poisoned group: it never stopped the others.
            keys = {f"{namespace}/{name}" for name in good}
            assert any(keys <= set(summary.bound) for summary in operator.loop.recent)
            assert operator.loop.failed_in_a_row == 0
            assert "poisoned-job" not in await bound_pods(api, namespace)

            async def announced() -> bool:
                return any(
                    ENGINE_INVARIANT_VIOLATED in (event.message or "")
                    for event in await events_for(api, namespace, "poisoned-job")
                )

            await wait_for("an event on the poisoned pod", announced, timeout=60)
    finally:
        await delete_queue(api, queue)


def _condition_reason(group: dict[str, object]) -> str | None:
    status = group.get("status") or {}
    assert isinstance(status, dict)
    for condition in status.get("schedulingConditions") or []:
        for reason in condition.get("reasons") or []:
            return str(reason.get("reason"))
    return None


async def _label_node(core: client.CoreV1Api, name: str, labels: dict[str, str | None]) -> None:
    await core.patch_node(name, {"metadata": {"labels": labels}})
