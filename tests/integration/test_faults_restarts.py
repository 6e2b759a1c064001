"""The fault matrix, process side (slow): kube-apiserver restarted, the leader SIGKILLed.

kube-apiserver is killed and started again on the same etcd while the operator
runs; the leader (`kai run` as a child process, so it can be SIGKILLed) dies
with binds in flight, mid-cycle and mid-gang, while a standby waits. Afterwards
the workload must be scheduled and the independent watcher must have seen no
invariant broken: no pod bound twice, no queue over its limit, no gang left
below minMember past its grace, Queue status equal to what runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest
from kai_operator_support import (
    bound_pods,
    create_queue,
    delete_queue,
    gpu_job,
    operator_config,
    pods_in,
    reporting,
    running_operator,
    unique,
    wait_bound,
    wait_fired,
    wait_for,
)
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from kai.operator.app import Operator
from kai.operator.config import OperatorConfig
from kai.testing.controlplane import ClusterAccess, ControlPlane
from kai.testing.fakes import GpuNode, NodeFactory, set_pod_phase
from kai.testing.faultproxy import FaultProxy, Hang, Rule
from kai.testing.invariants import InvariantWatcher

T = TypeVar("T")
REPO_ROOT = Path(__file__).resolve().parents[2]
GANG_SIZE = 4
GPUS_PER_POD = 2


@contextlib.asynccontextmanager
async def _queue_and_nodes(
    api: client.ApiClient, gpu_nodes: NodeFactory, gpu_limit: float
) -> AsyncIterator[str]:
    queue = unique("faults")
    await create_queue(api, queue, gpu_limit=gpu_limit)
    try:
        for _ in range(4):
            await gpu_nodes(GpuNode(name=unique("gpu"), gpus=4, gpu_memory_mib=40960))
        yield queue
    finally:
        await delete_queue(api, queue)


async def _submit(api: client.ApiClient, namespace: str, name: str, queue: str) -> None:
    job = gpu_job(name, queue, parallelism=GANG_SIZE, gpus=GPUS_PER_POD, min_member=GANG_SIZE)
    await client.BatchV1Api(api).create_namespaced_job(namespace, job)


async def test_the_operator_recovers_when_kube_apiserver_restarts(
    api: client.ApiClient,
    namespace: str,
    gpu_nodes: NodeFactory,
    control_plane_processes: tuple[ControlPlane, ClusterAccess],
    invariants: InvariantWatcher,
) -> None:
    """Every watch and connection breaks, the Lease cannot be renewed for a while; the first
    gang finishes right after the restart, and only an operator whose cache caught up again
    sees the quota free for the second."""
    plane, access = control_plane_processes
    async with _queue_and_nodes(api, gpu_nodes, GANG_SIZE * GPUS_PER_POD) as queue:
        config = operator_config(access.kubeconfig, namespace)
        async with running_operator(config) as (_, task), reporting(invariants):
            await _submit(api, namespace, "first", queue)
            await wait_bound(api, namespace, GANG_SIZE)
            await asyncio.to_thread(plane.restart_apiserver)
            for pod in await _retrying(lambda: pods_in(api, namespace)):
                await _retrying(functools.partial(_succeed, api, namespace, pod.metadata.name))
            await _retrying(lambda: _submit(api, namespace, "second", queue))
            await wait_bound(api, namespace, 2 * GANG_SIZE)
            assert not task.done()
            # Checked while the operator runs: status settles only while it writes.
            assert await invariants.verify([queue]) == []


async def _succeed(api: client.ApiClient, namespace: str, name: str) -> None:
    await set_pod_phase(api, namespace, name, "Succeeded")


async def _retrying(call: Callable[[], Awaitable[T]], attempts: int = 20) -> T:
    """The test's own requests right after the restart may meet a connection the old server
    closed; they are retried (the operator's are its own business)."""
    for _ in range(attempts - 1):
        with contextlib.suppress(ApiException, OSError, asyncio.TimeoutError):
            return await call()
        await asyncio.sleep(0.5)
    return await call()


@contextlib.contextmanager
def _kai_run(config: OperatorConfig, log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """`kai run` as a child process (so it can be SIGKILLed), with the test config's timings."""
    argv = [
        sys.executable,
        "-m",
        "kai.cli.main",
        "run",
        f"--kubeconfig={config.kubeconfig}",
        f"--period={config.period_seconds}",
        f"--time-limit={config.time_limit_seconds}",
        "--metrics-port=-1",
        f"--namespace={config.namespace}",
        f"--identity={config.identity}",
        f"--lease-name={config.lease_name}",
        f"--lease-duration={config.lease_seconds}",
        f"--renew-deadline={config.renew_deadline_seconds}",
        f"--retry-period={config.retry_seconds}",
        "--reservation-runtime-class=",
    ]
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    with log.open("ab") as out:
        process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env)
    try:
        yield process
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=30)


async def _lease_holder(api: client.ApiClient, namespace: str, lease: str) -> str:
    try:
        found = await client.CoordinationV1Api(api).read_namespaced_lease(lease, namespace)
    except ApiException as error:
        if error.status == 404:
            return ""
        raise
    return str(found.spec.holder_identity or "")


@pytest.mark.parametrize(
    "binds_before_kill",
    [pytest.param(0, id="mid-cycle"), pytest.param(GANG_SIZE // 2, id="mid-gang")],
)
async def test_a_sigkilled_leader_leaves_no_partial_gang_and_the_standby_finishes(
    api: client.ApiClient,
    namespace: str,
    gpu_nodes: NodeFactory,
    control_plane: ClusterAccess,
    fault_proxy: FaultProxy,
    invariants: InvariantWatcher,
    tmp_path: Path,
    binds_before_kill: int,
) -> None:
    """The leader's binds are held in the proxy after `binds_before_kill` went through (none:
    it dies in the middle of the cycle; half the gang: in the middle of the gang), then it is
    SIGKILLed: its Lease is not released, its held binds are never carried out. The standby
    takes over once the Lease expires and schedules both gangs, completing a half-bound one."""
    async with _queue_and_nodes(api, gpu_nodes, gpu_limit=-1) as queue:
        leader_config = operator_config(fault_proxy.kubeconfig, namespace)
        standby_config = operator_config(
            control_plane.kubeconfig, namespace, lease_name=leader_config.lease_name
        )
        held = fault_proxy.add(
            Rule("POST", r"/pods/[^/]+/binding$", Hang(), skip=binds_before_kill)
        )
        with _kai_run(leader_config, tmp_path / "leader.log") as leader:
            await wait_for("the child process to lead", _holds(api, leader_config), timeout=120)
            async with running_operator(standby_config) as (standby, _), reporting(invariants):
                await _submit(api, namespace, "first", queue)
                await _submit(api, namespace, "second", queue)
                await wait_fired(held)
                await wait_bound(api, namespace, binds_before_kill)
                leader.send_signal(signal.SIGKILL)
                await asyncio.to_thread(leader.wait, 30)
                fault_proxy.remove(held)
                assert len(await bound_pods(api, namespace)) < 2 * GANG_SIZE
                await wait_for("the standby to take over", _leads(standby), timeout=120)
                await wait_bound(api, namespace, 2 * GANG_SIZE)
                # Checked while the operator runs: status settles only while it writes.
                assert await invariants.verify([queue]) == []


def _holds(api: client.ApiClient, config: OperatorConfig) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        return await _lease_holder(api, config.namespace, config.lease_name) == config.identity

    return check


def _leads(operator: Operator) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        return operator.is_leader()

    return check
