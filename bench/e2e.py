"""End-to-end throughput on the real control plane: `kai run` against kube-scheduler.

    python bench/e2e.py --nodes 500 --pods 5000 [--compare kube-scheduler] [--json]

A fresh control plane (etcd, kube-apiserver, kube-controller-manager from
tests/controlplane/build.sh) gets N fake GPU nodes and M pending plain pods
(one whole GPU each, no gang). Each scheduler runs as its own process, started
once every pod exists; its time is from its start until a watch has seen the
last pod bound, so start-up, caches and every API write are included. kai's pods
carry no PodGroup: its pod grouper makes one per pod, as KAI's does, which is
part of the measured time. kube-scheduler runs with client rate limits raised
(qps/burst 5000) so that neither side is throttled by its client. Output per
contracts/bench.md; progress on stderr.

Each side also reports the CPU seconds that the scheduler, kube-apiserver and
etcd used during its measured time (`cpuSeconds`), which says where the time
went on a machine they all share. `--log-dir` keeps the schedulers' logs;
`--kai-profile` runs kai under cProfile and writes its statistics there.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from kai.kube.client import ApiError, Kube, connect
from kai.testing.binaries import default_repo_root, locate_binaries
from kai.testing.controlplane import ClusterAccess, ControlPlane
from kai.testing.fakes import GpuNode, create_gpu_node
from kai.testing.processes import free_loopback_port

NAMESPACE = "bench"
QUEUE = "bench"
CREATE_CONCURRENCY = 64


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


async def _bounded(coroutines: list[Any], limit: int) -> None:
    semaphore = asyncio.Semaphore(limit)

    async def one(coroutine: Any) -> None:
        async with semaphore:
            await coroutine

    await asyncio.gather(*(one(c) for c in coroutines))


def _pod(name: str, scheduler: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"kai.scheduler/queue": QUEUE}},
        "spec": {
            "schedulerName": scheduler,
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {
                    "name": "main",
                    "image": "example.invalid/none",
                    "resources": {
                        "requests": {"cpu": "100m", "memory": "100Mi", "nvidia.com/gpu": "1"},
                        "limits": {"nvidia.com/gpu": "1"},
                    },
                }
            ],
        },
    }


async def _prepare(kube: Kube, api: Any, nodes: int, gpus_per_node: int) -> None:
    await kube.create("/api/v1/namespaces", {"metadata": {"name": NAMESPACE}})
    unlimited = {"quota": -1, "limit": -1, "overQuotaWeight": 1}
    await kube.create(
        "/apis/scheduling.run.ai/v2/queues",
        {
            "apiVersion": "scheduling.run.ai/v2",
            "kind": "Queue",
            "metadata": {"name": QUEUE},
            "spec": {"resources": {"gpu": unlimited, "cpu": unlimited, "memory": unlimited}},
        },
    )
    while True:  # pods are admitted once the namespace's default ServiceAccount exists
        try:
            await kube.get(f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts/default")
            break
        except ApiError:
            await asyncio.sleep(0.1)
    await _bounded(
        [
            create_gpu_node(api, GpuNode(name=f"node-{i:05d}", gpus=gpus_per_node, pods=250))
            for i in range(nodes)
        ],
        CREATE_CONCURRENCY,
    )


async def _create_pods(kube: Kube, count: int, scheduler: str, prefix: str) -> None:
    collection = f"/api/v1/namespaces/{NAMESPACE}/pods"
    await _bounded(
        [kube.create(collection, _pod(f"{prefix}-{i:05d}", scheduler)) for i in range(count)],
        CREATE_CONCURRENCY,
    )


async def _wait_all_bound(kube: Kube, prefix: str, count: int, timeout: float) -> float:
    """Block until `count` pods named `prefix-*` are bound; the monotonic time of the last bind."""
    path = f"/api/v1/namespaces/{NAMESPACE}/pods"
    listing = await kube.get(path)
    bound = {
        p["metadata"]["name"]
        for p in listing["items"]
        if p["metadata"]["name"].startswith(prefix) and p["spec"].get("nodeName")
    }
    version = listing["metadata"]["resourceVersion"]
    last = time.monotonic()
    deadline = time.monotonic() + timeout
    while len(bound) < count:
        if time.monotonic() > deadline:
            raise TimeoutError(f"only {len(bound)} of {count} pods bound after {timeout:g}s")
        query = [("resourceVersion", version), ("timeoutSeconds", "30")]
        async for event in kube.watch(path, query, timeout=60):
            obj = event.get("object") or {}
            version = (obj.get("metadata") or {}).get("resourceVersion", version)
            name = (obj.get("metadata") or {}).get("name", "")
            if (
                name.startswith(prefix)
                and (obj.get("spec") or {}).get("nodeName")
                and name not in bound
            ):
                bound.add(name)
                last = time.monotonic()
                if len(bound) % 1000 == 0:
                    log(f"  {len(bound)} bound")
            if len(bound) >= count:
                break
    return last


async def _delete_pods(kube: Kube) -> None:
    path = f"/api/v1/namespaces/{NAMESPACE}/pods"
    await kube.delete(path, {"gracePeriodSeconds": 0})
    while (await kube.get(path, [("limit", "1")]))["items"]:
        await asyncio.sleep(0.2)


def _kai_process(
    access: ClusterAccess, port: int, time_limit: float, log_path: Path, profile: Path | None
) -> subprocess.Popen[bytes]:
    profiler = ["-m", "cProfile", "-o", str(profile.resolve())] if profile is not None else []
    argv = [
        sys.executable, *profiler, "-m", "kai.cli.main", "run",
        f"--kubeconfig={access.kubeconfig}", f"--metrics-port={port}",
        f"--time-limit={time_limit}", "--no-leader-election", "--log-level=info",
    ]  # fmt: skip
    with log_path.open("wb") as out:
        return subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, cwd=default_repo_root())


def _kube_scheduler_process(
    access: ClusterAccess, binary: Path, workdir: Path
) -> subprocess.Popen[bytes]:
    config = workdir / "kube-scheduler.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kubescheduler.config.k8s.io/v1",
                "kind": "KubeSchedulerConfiguration",
                "clientConnection": {
                    "kubeconfig": str(access.kubeconfig),
                    "qps": 5000,
                    "burst": 5000,
                },
                "leaderElection": {"leaderElect": False},
            }
        )
    )
    argv = [str(binary), f"--config={config}", "--secure-port=0", "-v=1"]
    with (workdir / "kube-scheduler.log").open("wb") as out:
        return subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)


def _stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM, then SIGKILL if it has not exited in 30 s: a scheduler must not outlive its run."""
    process.terminate()
    try:
        process.wait(30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


async def _cycle_seconds(port: int) -> dict[str, float]:
    """Mean and count of kai's cycles, from its e2e latency histogram.

    The binds come before a cycle's status writes, so the cycle that bound the last
    pod may still be running: wait for it.
    """
    for _ in range(300):
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
            text = response.read().decode()
        total = _sample(text, "e2e_scheduling_latency_milliseconds_sum")
        count = _sample(text, "e2e_scheduling_latency_milliseconds_count")
        if count:
            return {"cycles": count, "meanCycleSeconds": round(total / 1000 / count, 3)}
        await asyncio.sleep(0.1)
    return {}


def _sample(text: str, name: str) -> float:
    found = re.search(rf"^{name} (\S+)$", text, re.MULTILINE)
    return float(found[1]) if found else 0.0


_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def _cpu_seconds(pid: int) -> float:
    """User plus system CPU time of a process so far (0 if it is gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    fields = stat.rsplit(")", 1)[1].split()  # after "(comm)": state is field 3
    return (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS


def _control_plane_pids() -> dict[str, int]:
    """kube-apiserver's and etcd's pids: children of this process, by program name."""
    found: dict[str, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            program = Path((entry / "cmdline").read_bytes().split(b"\0")[0].decode()).name
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        if parent == os.getpid() and program in ("kube-apiserver", "etcd"):
            found[program] = int(entry.name)
    return found


async def _measure(
    kube: Kube,
    start: Callable[[], subprocess.Popen[bytes]],
    prefix: str,
    pods: int,
    timeout: float,
) -> tuple[float, dict[str, float], subprocess.Popen[bytes]]:
    """Seconds until the last pod was bound, and the CPU seconds each process spent meanwhile."""
    others = _control_plane_pids()
    before = {name: _cpu_seconds(pid) for name, pid in others.items()}
    began = time.monotonic()
    process = start()
    try:
        last = await _wait_all_bound(kube, prefix, pods, timeout)
    except BaseException:
        _stop(process)
        raise
    cpu = {"scheduler": round(_cpu_seconds(process.pid), 1)}
    for name, pid in others.items():
        cpu[name] = round(_cpu_seconds(pid) - before[name], 1)
    return last - began, cpu, process


async def run(args: argparse.Namespace) -> dict[str, Any]:
    binaries = locate_binaries(default_repo_root())
    gpus_per_node = max(args.gpus_per_node, math.ceil(args.pods / args.nodes))
    with (
        ControlPlane(binaries, default_repo_root() / "crds") as access,
        tempfile.TemporaryDirectory() as tmp,
    ):
        workdir = args.log_dir or Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        client = await connect(access.kubeconfig)
        async with client:
            kube = Kube(client)
            log(f"creating {args.nodes} nodes ({gpus_per_node} GPUs each)")
            await _prepare(kube, client, args.nodes, gpus_per_node)
            result: dict[str, Any] = {
                "bench": "e2e",
                "nodes": args.nodes,
                "gpusPerNode": gpus_per_node,
                "pods": args.pods,
            }
            log(f"creating {args.pods} pending pods for kai")
            await _create_pods(kube, args.pods, "kai-scheduler", "kai")
            port = free_loopback_port()
            log("running kai")
            seconds, cpu, process = await _measure(
                kube,
                lambda: _kai_process(
                    access, port, args.time_limit, workdir / "kai.log", args.kai_profile
                ),
                "kai",
                args.pods,
                args.timeout,
            )
            cycles = await _cycle_seconds(port)
            _stop(process)
            result["kai"] = {
                "podsBoundPerSecond": round(args.pods / seconds, 1),
                "seconds": round(seconds, 2),
                **cycles,
                "cpuSeconds": cpu,
            }
            log(f"kai: {result['kai']}")
            if args.compare == "kube-scheduler":
                log("deleting kai's pods")
                await _delete_pods(kube)
                log(f"creating {args.pods} pending pods for kube-scheduler")
                await _create_pods(kube, args.pods, "default-scheduler", "kube")
                log("running kube-scheduler")
                seconds, cpu, process = await _measure(
                    kube,
                    lambda: _kube_scheduler_process(access, binaries.kube_scheduler, workdir),
                    "kube",
                    args.pods,
                    args.timeout,
                )
                _stop(process)
                result["kubeScheduler"] = {
                    "podsBoundPerSecond": round(args.pods / seconds, 1),
                    "seconds": round(seconds, 2),
                    "cpuSeconds": cpu,
                }
                log(f"kube-scheduler: {result['kubeScheduler']}")
                result["ratio"] = round(
                    result["kai"]["podsBoundPerSecond"]
                    / result["kubeScheduler"]["podsBoundPerSecond"],
                    2,
                )
            return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--pods", type=int, default=5000)
    parser.add_argument("--gpus-per-node", type=int, default=8, help="raised to fit every pod")
    parser.add_argument("--compare", choices=("kube-scheduler", "none"), default="kube-scheduler")
    parser.add_argument(
        "--time-limit", type=float, default=1.0, help="kai's solver seconds per cycle"
    )
    parser.add_argument("--timeout", type=float, default=900.0, help="per scheduler, seconds")
    parser.add_argument("--log-dir", type=Path, help="keep the schedulers' logs here")
    parser.add_argument("--kai-profile", type=Path, help="run kai under cProfile, stats here")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    result = asyncio.run(run(args))
    if args.json:
        print(json.dumps(result))
    else:
        for name in ("kai", "kubeScheduler"):
            if name in result:
                row = result[name]
                print(f"{name:15} {row['podsBoundPerSecond']:>8} pods/s  {row['seconds']:>8} s")
        if "ratio" in result:
            print(f"ratio (kai / kube-scheduler): {result['ratio']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
