"""Killing the scheduler while it binds a gang, then starting it again, loses nothing.

`kai run` runs as a separate process with one bind in flight at a time, so a gang
of 40 takes long enough to be interrupted. It is killed (SIGKILL: no cleanup, its
Lease left held) once some but not all of the gang are bound. A new process waits
out the Lease, finds the half-bound gang in the cluster and completes it: every
pod bound exactly once, the earlier binds untouched, no node over capacity, and
the queue's status matching the pods.
"""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import sys
from pathlib import Path

from kai_operator_support import (
    bound_pods,
    create_queue,
    delete_queue,
    get_queue,
    gpu_job,
    unique,
    wait_for,
)
from kubernetes_asyncio import client

from kai.testing.controlplane import ClusterAccess
from kai.testing.fakes import GpuNode, NodeFactory

REPO_ROOT = Path(__file__).resolve().parents[2]
GANG = 200  # large enough that binding one at a time takes seconds: the kill lands mid-gang
GPUS_PER_NODE = 8


def _start_scheduler(
    kubeconfig: Path, namespace: str, lease: str, log: Path
) -> subprocess.Popen[bytes]:
    argv = [
        sys.executable,
        "-m",
        "kai.cli.main",
        "run",
        f"--kubeconfig={kubeconfig}",
        "--period=0.5s",
        "--time-limit=0.5",
        "--bind-concurrency=1",
        "--metrics-port=-1",
        f"--namespace={namespace}",
        f"--lease-name={lease}",
        "--lease-duration=3s",
        "--renew-deadline=2s",
        "--retry-period=0.5s",
        "--reservation-runtime-class=",
    ]
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    with log.open("ab") as out:
        return subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=REPO_ROOT)


async def test_killed_mid_gang_and_restarted_binds_each_pod_once(
    api: client.ApiClient,
    namespace: str,
    gpu_nodes: NodeFactory,
    control_plane: ClusterAccess,
    tmp_path: Path,
) -> None:
    queue = unique("restart")
    await create_queue(api, queue)
    for _ in range(GANG // GPUS_PER_NODE):
        await gpu_nodes(GpuNode(name=unique("gpu"), gpus=GPUS_PER_NODE, gpu_memory_mib=40960))
    lease = unique("kai-lease")
    log = tmp_path / "scheduler.log"
    first = _start_scheduler(control_plane.kubeconfig, namespace, lease, log)
    second: subprocess.Popen[bytes] | None = None
    try:
        job = gpu_job("gang", queue, parallelism=GANG, gpus=1, min_member=GANG)
        await client.BatchV1Api(api).create_namespaced_job(namespace, job)

        async def binding_started() -> bool:
            # Server-side filter, one item: cheap enough to notice the first bind at once
            # (decoding every pod of the gang on each poll would miss the window).
            bound = await client.CoreV1Api(api).list_namespaced_pod(
                namespace, field_selector="spec.nodeName!=", limit=1
            )
            return bool(bound.items)

        await wait_for("the first binds", binding_started, timeout=60, every=0.005)
        first.send_signal(signal.SIGKILL)
        first.wait()
        before = await bound_pods(api, namespace)
        assert 0 < len(before) < GANG, f"the kill came too late: {len(before)} of {GANG} bound"

        second = _start_scheduler(control_plane.kubeconfig, namespace, lease, log)

        async def all_bound() -> bool:
            return len(await bound_pods(api, namespace)) == GANG

        await wait_for("the restarted scheduler to complete the gang", all_bound, timeout=60)
        after = await bound_pods(api, namespace)
        assert {pod: after[pod] for pod in before} == before  # earlier binds untouched
        per_node = collections.Counter(after.values())
        assert max(per_node.values()) <= GPUS_PER_NODE

        scheduled: collections.Counter[str] = collections.Counter()

        async def binds_reported() -> bool:  # events go out at the end of the binding cycle
            nonlocal scheduled
            scheduled = collections.Counter(
                e.involved_object.name
                for e in (await client.CoreV1Api(api).list_namespaced_event(namespace)).items
                if e.reason == "Scheduled"
            )
            return set(after) - set(before) <= set(scheduled)

        # The killed process never sent its queued events; the new one reports each of its binds.
        await wait_for("a Scheduled event for each bind of the new process", binds_reported)
        assert max(scheduled.values()) == 1  # no pod was bound twice

        async def queue_status_correct() -> bool:
            status = (await get_queue(api, queue)).get("status") or {}
            return (status.get("allocated") or {}).get("nvidia.com/gpu") == str(GANG)

        await wait_for("the queue status to count the whole gang", queue_status_correct)
    finally:
        for process in (first, second):
            if process is not None:
                _stop(process)
        await delete_queue(api, queue)


def _stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM (it releases its Lease), then SIGKILL if it does not exit: never left running."""
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
