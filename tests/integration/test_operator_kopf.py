"""`kai run` is a kopf operator: kopf serves its liveness probe, runs the scheduler from its
startup handler and, on SIGTERM, stops it from its cleanup handler, which releases the Lease.

`kai run` runs as its own process, as in a Deployment; the test reads only what a kubelet
and the API server would see.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import aiohttp
from kai_operator_support import bound_pods, create_queue, delete_queue, gpu_pod, unique, wait_for
from kubernetes_asyncio import client

from kai.testing.controlplane import ClusterAccess
from kai.testing.fakes import GpuNode, NodeFactory
from kai.testing.processes import Child, free_loopback_port

STOP_SECONDS = 30.0


async def _get(url: str) -> tuple[int | None, str]:
    try:
        async with aiohttp.ClientSession() as session, session.get(url) as response:
            return response.status, await response.text()
    except aiohttp.ClientError:
        return None, ""


async def test_kopf_hosts_the_scheduler_its_probe_and_its_clean_stop(
    api: client.ApiClient,
    namespace: str,
    gpu_nodes: NodeFactory,
    control_plane: ClusterAccess,
    tmp_path: Path,
) -> None:
    queue = unique("kopf")
    await create_queue(api, queue)
    await gpu_nodes(GpuNode(name=unique("gpu"), gpus=1, gpu_memory_mib=40960))
    lease = unique("kai-lease")
    liveness, metrics = free_loopback_port(), free_loopback_port()
    argv = [
        sys.executable,
        "-m",
        "kai.cli.main",
        "run",
        f"--kubeconfig={control_plane.kubeconfig}",
        "--period=0.5s",
        "--time-limit=0.5",
        f"--metrics-port={metrics}",
        f"--liveness-endpoint=http://127.0.0.1:{liveness}/healthz",
        f"--namespace={namespace}",
        f"--lease-name={lease}",
        "--lease-duration=15s",
        "--reservation-runtime-class=",
    ]
    scheduler = Child("kai-run", argv, tmp_path / "scheduler.log")
    try:
        probe: dict[str, dict[str, object]] = {}

        async def live_and_leading() -> bool:
            nonlocal probe
            if scheduler.exit_code() is not None:
                raise AssertionError(f"kai run exited:\n{scheduler.log_tail()}")
            status, text = await _get(f"http://127.0.0.1:{liveness}/healthz")
            probe = json.loads(text) if status == 200 else {}
            report = probe.get("scheduler") or {}
            return bool(report.get("leader")) and int(str(report.get("cycles", 0))) > 0

        await wait_for("kopf's probe to report a leading, cycling scheduler", live_and_leading, 90)
        assert probe["scheduler"]["synced"] is True
        # Readiness and metrics stay on the metrics port; liveness is kopf's alone.
        assert (await _get(f"http://127.0.0.1:{metrics}/readyz"))[0] == 200
        assert (await _get(f"http://127.0.0.1:{metrics}/healthz"))[0] == 404

        await client.CoreV1Api(api).create_namespaced_pod(namespace, gpu_pod("p", queue, 1))

        async def bound() -> bool:
            return "p" in await bound_pods(api, namespace)

        await wait_for("the pod to be bound by the kopf-hosted scheduler", bound)

        scheduler.stop(STOP_SECONDS)  # SIGTERM: kopf's cleanup handler stops the scheduler
        assert scheduler.exit_code() == 0, scheduler.log_tail()
        held = await client.CoordinationV1Api(api).read_namespaced_lease(lease, namespace)
        assert not held.spec.holder_identity  # released: a standby takes over at once
    finally:
        scheduler.stop(STOP_SECONDS)
        await delete_queue(api, queue)
