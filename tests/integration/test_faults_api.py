"""The fault matrix, API side: the operator talks to kube-apiserver through the fault proxy.

Each test runs the operator in process against the proxy, injects one kind of
fault (lost bind answers, 5xx, 429, broken, expired or garbled watches, a lagging
watch, a Lease renewal answered late), lets the fault clear, and then requires
that the workload is scheduled and that the independent watcher saw no invariant
broken at any point: no pod bound twice, no queue over its limit, no gang left
partial, Queue status equal to what runs.

The job tests size the cluster so that the queue's GPU limit, not the nodes,
holds back the second gang: a scheduler that loses track of a committed or
retried bind hands the same quota out twice, and the watcher sees it.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable

from kai_operator_support import (
    bound_pods,
    create_queue,
    delete_queue,
    gpu_job,
    gpu_pod,
    list_pod_groups,
    operator_config,
    pods_in,
    reporting,
    running_operator,
    unique,
    wait_bound,
    wait_fired,
    wait_for,
    wait_passes,
)
from kubernetes_asyncio import client

from kai.operator.app import Operator
from kai.testing.controlplane import ClusterAccess
from kai.testing.fakes import GpuNode, NodeFactory, set_pod_phase
from kai.testing.faultproxy import (
    Action,
    CommitThenDrop,
    CommitThenHang,
    Delay,
    Fail,
    FaultProxy,
    Gone,
    Hang,
    MalformedLine,
    Rule,
    Stall,
    Throttle,
)
from kai.testing.invariants import InvariantWatcher

POD_WATCH = r"^/api/v1/pods$"
GANG_SIZE = 4
GPUS_PER_POD = 2
QUEUE_LIMIT = GANG_SIZE * GPUS_PER_POD
"""One gang fills the queue; the nodes have room for two."""
NODES, GPUS_PER_NODE = 4, 4


@contextlib.asynccontextmanager
async def _queue_with_room(api: client.ApiClient, gpu_nodes: NodeFactory) -> AsyncIterator[str]:
    """A queue limited to one gang, on nodes with room for two."""
    queue = unique("faults")
    await create_queue(api, queue, gpu_limit=QUEUE_LIMIT)
    try:
        for _ in range(NODES):
            await gpu_nodes(GpuNode(name=unique("gpu"), gpus=GPUS_PER_NODE, gpu_memory_mib=40960))
        yield queue
    finally:
        await delete_queue(api, queue)


async def _submit(api: client.ApiClient, namespace: str, name: str, queue: str, size: int) -> None:
    job = gpu_job(name, queue, parallelism=size, gpus=GPUS_PER_POD, min_member=size)
    await client.BatchV1Api(api).create_namespaced_job(namespace, job)


async def _finish_job(api: client.ApiClient, namespace: str, job: str) -> None:
    """Report the job's pods Succeeded, as a kubelet would: their GPUs return to the queue."""
    for pod in await pods_in(api, namespace):
        if (pod.metadata.labels or {}).get("job-name") == job and pod.spec.node_name:
            await set_pod_phase(api, namespace, pod.metadata.name, "Succeeded")


async def _bind_fault_scenario(
    api: client.ApiClient,
    namespace: str,
    gpu_nodes: NodeFactory,
    proxy: FaultProxy,
    watcher: InvariantWatcher,
    rule: Rule,
) -> None:
    """Fault the first gang's binds; a second gang waits on the queue limit until the first ends.

    The second gang fits the nodes at any time, and the queue only once the first
    gang has finished: a scheduler that stops counting the first gang's running
    pods while it deals with the fault binds the second too early. The fault
    lasts until the operator has seen the second gang for some cycles and, for a
    held bind, until the operator's client has given up on it.
    """
    async with _queue_with_room(api, gpu_nodes) as queue:
        proxy.add(rule)
        config = operator_config(proxy.kubeconfig, namespace)
        async with running_operator(config) as (operator, _), reporting(watcher):
            await _submit(api, namespace, "first", queue, GANG_SIZE)
            await wait_fired(rule)
            await _submit(api, namespace, "second", queue, GANG_SIZE)
            await wait_for("both gangs grouped", _groups(api, namespace, 2), timeout=120)
            await wait_passes(operator, 5)
            if isinstance(rule.action, CommitThenHang):
                await wait_for("the operator to give up on the held bind", _abandoned(rule), 120)
                await wait_passes(operator, 5)
            proxy.remove(rule)
            await wait_bound(api, namespace, GANG_SIZE)
            await wait_passes(operator, 5)
            await _finish_job(api, namespace, "first")
            await wait_bound(api, namespace, 2 * GANG_SIZE)
            # Checked while the operator runs: status settles only while it writes.
            assert await watcher.verify([queue]) == []


def _first_gang_binds(action: Action, skip: int = 0, times: int | None = None) -> Rule:
    """`action` for binds of the first job's pods (the second job's are not faulted)."""
    return Rule("POST", r"/pods/first-[^/]+/binding$", action, times=times, skip=skip)


def _groups(api: client.ApiClient, namespace: str, count: int) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        return len(await list_pod_groups(api, namespace)) >= count

    return check


def _abandoned(rule: Rule) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        return rule.abandoned >= 1

    return check


async def test_a_bind_that_committed_but_timed_out_is_not_bound_or_counted_twice(
    api: client.ApiClient,
    namespace: str,
    gpu_nodes: NodeFactory,
    fault_proxy: FaultProxy,
    invariants: InvariantWatcher,
) -> None:
    rule = _first_gang_binds(CommitThenHang(), times=1)
    await _bind_fault_scenario(api, namespace, gpu_nodes, fault_proxy, invariants, rule)


async def test_binds_answered_5xx_are_retried_without_breaking_the_queue_limit(
    api: client.ApiClient,
    namespace: str,
    gpu_nodes: NodeFactory,
    fault_proxy: FaultProxy,
    invariants: InvariantWatcher,
) -> None:
    rule = _first_gang_binds(Fail(503), skip=GANG_SIZE // 2)
    await _bind_fault_scenario(api, namespace, gpu_nodes, fault_proxy, invariants, rule)


async def test_binds_throttled_with_429_are_retried_after_the_asked_delay(
    api: client.ApiClient,
    namespace: str,
    gpu_nodes: NodeFactory,
    fault_proxy: FaultProxy,
    invariants: InvariantWatcher,
) -> None:
    rule = _first_gang_binds(Throttle(1), skip=GANG_SIZE // 2)
    await _bind_fault_scenario(api, namespace, gpu_nodes, fault_proxy, invariants, rule)


async def _watch_fault_scenario(
    api: client.ApiClient,
    namespace: str,
    gpu_nodes: NodeFactory,
    proxy: FaultProxy,
    watcher: InvariantWatcher,
    action: Action | None,
) -> None:
    """Break the operator's watches (optionally answering the re-watch with `action`) between jobs.

    The first gang finishes right after the watches are cut: only an operator
    whose cache caught up again sees the freed quota and binds the second.
    """
    async with _queue_with_room(api, gpu_nodes) as queue:
        config = operator_config(proxy.kubeconfig, namespace)
        async with running_operator(config) as (operator, task), reporting(watcher):
            await _submit(api, namespace, "first", queue, GANG_SIZE)
            await wait_bound(api, namespace, GANG_SIZE)
            rule = None
            if action is not None:
                rule = proxy.add(Rule("GET", POD_WATCH, action, times=1, watch=True))
            assert proxy.drop_watches() > 0
            if rule is not None:
                await wait_fired(rule)
            await _finish_job(api, namespace, "first")
            await _submit(api, namespace, "second", queue, GANG_SIZE)
            await wait_bound(api, namespace, 2 * GANG_SIZE)
            assert not task.done()
            await wait_passes(operator, 2)
            # Checked while the operator runs: status settles only while it writes.
            assert await watcher.verify([queue]) == []


async def test_dropped_watch_connections_are_resumed(
    api: client.ApiClient,
    namespace: str,
    gpu_nodes: NodeFactory,
    fault_proxy: FaultProxy,
    invariants: InvariantWatcher,
) -> None:
    await _watch_fault_scenario(api, namespace, gpu_nodes, fault_proxy, invariants, None)


async def test_a_watch_answered_410_gone_relists(
    api: client.ApiClient,
    namespace: str,
    gpu_nodes: NodeFactory,
    fault_proxy: FaultProxy,
    invariants: InvariantWatcher,
) -> None:
    await _watch_fault_scenario(api, namespace, gpu_nodes, fault_proxy, invariants, Gone())


async def test_a_malformed_watch_line_does_not_stop_the_operator(
    api: client.ApiClient,
    namespace: str,
    gpu_nodes: NodeFactory,
    fault_proxy: FaultProxy,
    invariants: InvariantWatcher,
) -> None:
    await _watch_fault_scenario(api, namespace, gpu_nodes, fault_proxy, invariants, MalformedLine())


async def test_a_leader_whose_renewal_is_answered_late_binds_nothing_once_the_standby_leads(
    api: client.ApiClient,
    namespace: str,
    gpu_nodes: NodeFactory,
    fault_proxy: FaultProxy,
    invariants: InvariantWatcher,
    control_plane: ClusterAccess,
) -> None:
    """The leader's Lease renewal commits but its answer comes late, after the Lease has expired
    for the standby (its later renewals hang). The standby takes over; its binds are held in
    its own proxy, so the jobs submitted then wait. Leadership counted from when the renewal
    was answered, not sent, would let the old leader bind them: each bind it sends is counted
    (and refused with 503) here, and there must be none."""
    async with (
        _queue_with_room(api, gpu_nodes) as queue,
        FaultProxy.for_control_plane(control_plane) as standby_proxy,
    ):
        leader_config = operator_config(fault_proxy.kubeconfig, namespace)
        standby_config = operator_config(
            standby_proxy.kubeconfig, namespace, lease_name=leader_config.lease_name
        )
        async with contextlib.AsyncExitStack() as stack, reporting(invariants):
            leader, _ = await stack.enter_async_context(running_operator(leader_config))
            await wait_for("the proxied replica to lead", _leads(leader))
            standby, _ = await stack.enter_async_context(running_operator(standby_config))
            late = fault_proxy.add(Rule("PUT", r"/leases/", Delay(15), times=1))
            await wait_fired(late)
            fault_proxy.add(Rule("*", r"/leases/", Hang()))  # while the late answer is held
            await wait_for("the standby to take over", _leads(standby), timeout=120)
            held = standby_proxy.add(Rule("POST", r"/binding$", Hang()))
            deposed_binds = fault_proxy.add(Rule("POST", r"/binding$", Fail(503)))
            await _submit(api, namespace, "first", queue, GANG_SIZE)
            await _submit(api, namespace, "second", queue, GANG_SIZE)
            await wait_fired(held)
            await wait_for("the late answer, or the leader giving up on it", _over(late), 120)
            await wait_for("the old leader to step down", _follows(leader), timeout=120)
            assert deposed_binds.fired == 0
            standby_proxy.remove(held)
            await wait_bound(api, namespace, GANG_SIZE)
            for pod in await bound_pods(api, namespace):
                await set_pod_phase(api, namespace, pod, "Succeeded")
            await wait_bound(api, namespace, 2 * GANG_SIZE)
            # Checked while the operator runs: status settles only while it writes.
            assert await invariants.verify([queue]) == []


def _over(rule: Rule) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        return rule.delivered + rule.abandoned >= 1

    return check


def _follows(operator: Operator) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        return not operator.is_leader()

    return check


def _leads(operator: Operator) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        return operator.is_leader()

    return check


async def test_a_bind_whose_answer_is_lost_holds_its_capacity_until_the_watch_shows_it(
    api: client.ApiClient,
    namespace: str,
    gpu_nodes: NodeFactory,
    fault_proxy: FaultProxy,
    invariants: InvariantWatcher,
) -> None:
    """The first bind commits but its answer is lost, and the operator's pod watch lags: only a
    scheduler that assumes the bind happened keeps the node's GPUs for it. One that counts it
    as failed gives the same GPUs to the second pod, and the node holds twice what it has."""
    queue = unique("faults")
    await create_queue(api, queue)
    try:
        node = unique("gpu")
        await gpu_nodes(GpuNode(name=node, gpus=GPUS_PER_POD, gpu_memory_mib=40960))
        core = client.CoreV1Api(api)
        for name in ("one", "two"):
            await core.create_namespaced_pod(namespace, gpu_pod(name, queue, gpus=GPUS_PER_POD))
        lost = fault_proxy.add(Rule("POST", r"/binding$", CommitThenDrop(), times=1))
        stalled = fault_proxy.add(Rule("GET", POD_WATCH, Stall(), watch=True))
        config = operator_config(fault_proxy.kubeconfig, namespace)
        async with running_operator(config) as (operator, _), reporting(invariants):
            await wait_fired(lost)
            await wait_fired(stalled)
            await wait_passes(operator, 10)  # every chance to hand the node out again
            assert invariants.current_violations() == []
            fault_proxy.remove(stalled)
            await wait_bound(api, namespace, 1)
            for first in await bound_pods(api, namespace):
                await set_pod_phase(api, namespace, first, "Succeeded")
            await wait_bound(api, namespace, 2)
            # Checked while the operator runs: status settles only while it writes.
            assert await invariants.verify([queue]) == []
    finally:
        await delete_queue(api, queue)
