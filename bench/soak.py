"""Soak: `kai run` for a long while under arriving and finishing jobs and random API faults.

    python bench/soak.py [--minutes 30] [--seed 1] [--output soak.json]

A fresh control plane gets fake GPU nodes and a few queues with GPU limits.
`kai run` runs as a child process (so its RSS can be read) behind the fault
proxy of kai.testing; an independent invariant watcher (kai.testing.invariants)
watches the API server directly. Gangs (Jobs with batch-min-member) arrive at
random; once a pod has been bound for its run time the soak reports it
Succeeded through the status subresource, as a kubelet would, and deletes Jobs
whose pods have all finished. Every so often a random fault is switched on for
a few seconds: 5xx or 429 on binds, a bind that commits but whose answer is
lost, dropped watches, a watch answered 410 Gone, a malformed watch line.

The JSON report: invariant violations (must be empty), binds, jobs, the faults
injected, the scheduler's RSS sampled over time and its spread after warm-up
(the target: within 10%), and how often the scheduler process died (restarted).
Not run in CI. Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kai.kube.client import ApiError, Kube, connect
from kai.testing.binaries import default_repo_root, locate_binaries
from kai.testing.controlplane import ClusterAccess, ControlPlane
from kai.testing.fakes import GpuNode, create_gpu_node, wait_for_default_service_account
from kai.testing.faultproxy import (
    CommitThenDrop,
    Fail,
    FaultProxy,
    Gone,
    MalformedLine,
    Rule,
    Throttle,
)
from kai.testing.invariants import InvariantWatcher

NAMESPACE = "soak"
LEASE = "kai-soak"
BINDING = r"/pods/[^/]+/binding$"
POD_WATCH = r"^/api/v1/pods$"
QUEUE_LIMITS = {"soak-a": 16.0, "soak-b": 24.0, "soak-c": -1.0}
TICK_SECONDS = 1.0
RSS_EVERY_SECONDS = 10.0
WARM_UP_FRACTION = 0.2
FAULTS = ("bind-5xx", "bind-429", "bind-commit-lost", "watch-drop", "watch-410", "watch-malformed")


def log(message: str) -> None:
    print(f"[soak {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def _job(name: str, queue: str, size: int, gpus: int) -> dict[str, Any]:
    container = {
        "name": "main",
        "image": "example.invalid/none",
        "resources": {
            "requests": {"cpu": "100m", "memory": "100Mi", "nvidia.com/gpu": str(gpus)},
            "limits": {"nvidia.com/gpu": str(gpus)},
        },
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "labels": {"kai.scheduler/queue": queue},
            "annotations": {"kai.scheduler/batch-min-member": str(size)},
        },
        "spec": {
            "parallelism": size,
            "completions": size,
            "backoffLimit": 0,
            "template": {
                "metadata": {"labels": {"kai.scheduler/queue": queue}},
                "spec": {
                    "schedulerName": "kai-scheduler",
                    "restartPolicy": "Never",
                    "terminationGracePeriodSeconds": 0,
                    "containers": [container],
                },
            },
        },
    }


def _queue(name: str, limit: float) -> dict[str, Any]:
    unlimited = {"quota": -1, "limit": -1, "overQuotaWeight": 1}
    return {
        "apiVersion": "scheduling.run.ai/v2",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": {
            "resources": {
                "gpu": {"quota": 0, "limit": limit, "overQuotaWeight": 1},
                "cpu": unlimited,
                "memory": unlimited,
            }
        },
    }


class Scheduler:
    """`kai run` as a child process behind the proxy; restarted (and counted) if it dies."""

    def __init__(self, kubeconfig: Path, log_path: Path) -> None:
        self._kubeconfig = kubeconfig
        self._log_path = log_path
        self.exits: list[int] = []
        self.process = self._start()

    def _start(self) -> subprocess.Popen[bytes]:
        argv = [
            sys.executable,
            "-m",
            "kai.cli.main",
            "run",
            f"--kubeconfig={self._kubeconfig}",
            "--period=1",
            "--time-limit=0.5",
            "--metrics-port=-1",
            f"--namespace={NAMESPACE}",
            f"--lease-name={LEASE}",
            "--reservation-runtime-class=",
            "--log-level=warning",
        ]
        with self._log_path.open("ab") as out:
            return subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)

    def keep_running(self) -> None:
        code = self.process.poll()
        if code is not None:
            self.exits.append(code)
            log(f"scheduler exited with {code}; restarting it")
            self.process = self._start()

    def rss_mib(self) -> float | None:
        try:
            status = Path(f"/proc/{self.process.pid}/status").read_text()
        except OSError:
            return None
        for line in status.splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return None

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


class Faults:
    """Switches one random fault on at a time, for a few seconds, and counts them."""

    def __init__(self, proxy: FaultProxy, rng: random.Random, kinds: list[str]) -> None:
        self._proxy = proxy
        self._rng = rng
        self._kinds = kinds
        self._active: Rule | None = None
        self._until = 0.0
        self.injected: Counter[str] = Counter()

    def step(self, now: float, every: float, lasting: float) -> None:
        if self._active is not None and now >= self._until:
            self._proxy.remove(self._active)
            self._active = None
        if self._active is not None or not self._kinds or self._rng.random() > TICK_SECONDS / every:
            return
        kind = self._rng.choice(self._kinds)
        self.injected[kind] += 1
        make: dict[str, Callable[[], Rule]] = {
            "bind-5xx": lambda: Rule("POST", BINDING, Fail(503), times=5),
            "bind-429": lambda: Rule("POST", BINDING, Throttle(1), times=5),
            "bind-commit-lost": lambda: Rule("POST", BINDING, CommitThenDrop(), times=1),
            "watch-410": lambda: Rule("GET", POD_WATCH, Gone(), times=1, watch=True),
            "watch-malformed": lambda: Rule("GET", POD_WATCH, MalformedLine(), times=1, watch=True),
        }
        if kind != "watch-drop":
            self._active = self._proxy.add(make[kind]())
            self._until = now + lasting
        if kind.startswith("watch-"):
            self._proxy.drop_watches()

    def clear(self) -> None:
        self._proxy.clear()
        self._active = None


class Workload:
    """Submits gangs at random, finishes pods after their run time, deletes finished Jobs."""

    def __init__(self, kube: Kube, rng: random.Random, runtime: tuple[float, float]) -> None:
        self._kube = kube
        self._rng = rng
        self._runtime = runtime
        self._bound_since: dict[str, float] = {}
        self._runtimes: dict[str, float] = {}
        self.submitted = 0
        self.finished_pods = 0
        self.deleted_jobs = 0

    async def submit(self) -> None:
        queue = self._rng.choice(sorted(QUEUE_LIMITS))
        size, gpus = self._rng.randint(1, 4), self._rng.choice((1, 2))
        name = f"job-{self.submitted:05d}"
        self.submitted += 1
        await self._kube.create(
            f"/apis/batch/v1/namespaces/{NAMESPACE}/jobs", _job(name, queue, size, gpus)
        )

    async def advance(self, now: float) -> None:
        pods = (await self._kube.get(f"/api/v1/namespaces/{NAMESPACE}/pods"))["items"]
        present = set()
        for pod in pods:
            uid = pod["metadata"]["uid"]
            present.add(uid)
            if not pod["spec"].get("nodeName") or pod["status"].get("phase") != "Pending":
                continue
            since = self._bound_since.setdefault(uid, now)
            runtime = self._runtimes.setdefault(uid, self._rng.uniform(*self._runtime))
            if now - since >= runtime:
                path = f"/api/v1/namespaces/{NAMESPACE}/pods/{pod['metadata']['name']}/status"
                await self._kube.merge_patch(path, {"status": {"phase": "Succeeded"}})
                self.finished_pods += 1
        for uid in set(self._bound_since) - present:
            del self._bound_since[uid]
            self._runtimes.pop(uid, None)
        jobs = (await self._kube.get(f"/apis/batch/v1/namespaces/{NAMESPACE}/jobs"))["items"]
        for job in jobs:
            status, spec = job.get("status") or {}, job["spec"]
            if job["metadata"].get("deletionTimestamp"):
                continue
            if (status.get("succeeded") or 0) + (status.get("failed") or 0) >= spec["completions"]:
                path = f"/apis/batch/v1/namespaces/{NAMESPACE}/jobs/{job['metadata']['name']}"
                await self._kube.delete(path, {"propagationPolicy": "Background"})
                self.deleted_jobs += 1


async def _prepare(kube: Kube, access: ClusterAccess, nodes: int, gpus: int) -> None:
    await kube.create("/api/v1/namespaces", {"metadata": {"name": NAMESPACE}})
    for name, limit in QUEUE_LIMITS.items():
        await kube.create("/apis/scheduling.run.ai/v2/queues", _queue(name, limit))
    await wait_for_default_service_account(kube, NAMESPACE)
    api = await connect(access.kubeconfig)
    async with api:
        for index in range(nodes):
            await create_gpu_node(api, GpuNode(name=f"soak-{index:03d}", gpus=gpus))


def _spread(samples: list[tuple[float, float]], seconds: float) -> dict[str, Any]:
    """RSS after warm-up: min, max and (max - min) / min."""
    warm = [rss for at, rss in samples if at >= WARM_UP_FRACTION * seconds]
    if not warm:
        return {}
    low, high = min(warm), max(warm)
    return {
        "minMiB": round(low, 1),
        "maxMiB": round(high, 1),
        "spreadPercent": round(100 * (high - low) / low, 1),
    }


async def run(args: argparse.Namespace) -> dict[str, Any]:
    rng = random.Random(args.seed)
    binaries = locate_binaries(default_repo_root())
    seconds = args.minutes * 60
    with (
        ControlPlane(binaries, default_repo_root() / "crds") as access,
        tempfile.TemporaryDirectory() as tmp,
    ):
        log_dir = args.log_dir or Path(tmp)
        log_dir.mkdir(parents=True, exist_ok=True)
        client = await connect(access.kubeconfig)
        async with (
            client,
            FaultProxy.for_control_plane(access) as proxy,
            InvariantWatcher(access.kubeconfig, namespace=NAMESPACE) as watcher,
        ):
            kube = Kube(client)
            await _prepare(kube, access, args.nodes, args.gpus_per_node)
            scheduler = Scheduler(proxy.kubeconfig, log_dir / "kai.log")
            faults = Faults(proxy, rng, args.faults)
            workload = Workload(kube, rng, (args.min_runtime, args.max_runtime))
            rss: list[tuple[float, float]] = []
            began = time.monotonic()
            next_rss = began
            try:
                while (now := time.monotonic()) - began < seconds:
                    scheduler.keep_running()
                    faults.step(now, args.fault_every, args.fault_seconds)
                    try:
                        if rng.random() < TICK_SECONDS / args.arrival_seconds:
                            await workload.submit()
                        await workload.advance(now)
                    except ApiError as error:  # the driver's own requests: try again next tick
                        log(f"workload request failed: {error}")
                    if now >= next_rss and (sample := scheduler.rss_mib()) is not None:
                        rss.append((now - began, sample))
                        next_rss = now + RSS_EVERY_SECONDS
                        log(
                            f"{(now - began) / 60:.1f} min: {watcher.binds} binds, "
                            f"rss {sample:.0f} MiB, faults {dict(faults.injected)}, "
                            f"violations {len(watcher.current_violations())}"
                        )
                    await asyncio.sleep(TICK_SECONDS)
                faults.clear()
                scheduler.keep_running()
                violations = await watcher.verify(QUEUE_LIMITS, timeout=120)
            finally:
                scheduler.stop()
            return {
                "bench": "soak",
                "minutes": args.minutes,
                "seed": args.seed,
                "nodes": args.nodes,
                "gpusPerNode": args.gpus_per_node,
                "violations": violations,
                "binds": watcher.binds,
                "eventsRecorded": len(watcher.events),
                "watcherRelists": watcher.relists,
                "jobsSubmitted": workload.submitted,
                "jobsDeleted": workload.deleted_jobs,
                "podsFinished": workload.finished_pods,
                "faultsInjected": dict(faults.injected),
                "proxyActions": dict(proxy.actions),
                "watchesDropped": proxy.watches_dropped,
                "schedulerExits": scheduler.exits,
                "rssMiB": [(round(at), round(value, 1)) for at, value in rss],
                "rssAfterWarmUp": _spread(rss, seconds),
            }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--nodes", type=int, default=8)
    parser.add_argument("--gpus-per-node", type=int, default=8)
    parser.add_argument("--arrival-seconds", type=float, default=2.0, help="mean between jobs")
    parser.add_argument("--min-runtime", type=float, default=5.0, help="seconds a pod runs")
    parser.add_argument("--max-runtime", type=float, default=40.0)
    parser.add_argument("--fault-every", type=float, default=20.0, help="mean seconds between")
    parser.add_argument("--fault-seconds", type=float, default=5.0, help="how long one lasts")
    parser.add_argument(
        "--faults",
        type=lambda text: [kind for kind in text.split(",") if kind],
        default=list(FAULTS),
        help=f"comma-separated subset of {','.join(FAULTS)} (default: all)",
    )
    parser.add_argument("--log-dir", type=Path, help="keep the scheduler's log here")
    parser.add_argument("--output", type=Path, help="also write the JSON report here")
    args = parser.parse_args(argv)
    unknown = set(args.faults) - set(FAULTS)
    if unknown:
        parser.error(f"unknown faults: {sorted(unknown)}")
    result = asyncio.run(run(args))
    text = json.dumps(result, indent=1)
    if args.output:
        args.output.write_text(text)
    print(text)
    return 0 if not result["violations"] and not result["schedulerExits"] else 1


if __name__ == "__main__":
    sys.exit(main())
