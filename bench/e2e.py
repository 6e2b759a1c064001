"""End-to-end throughput and latency on the real control plane: `kai run` against kube-scheduler.

    python bench/e2e.py --nodes 500 --pods 5000 [--runs 3] [--stream-pods 3000]
                        [--stream-rate 100] [--compare kube-scheduler] [--shards 1] [--json]

A fresh control plane (etcd, kube-apiserver, kube-controller-manager from
tests/controlplane/build.sh) gets N fake GPU nodes; pods are plain (one whole
GPU each, no gang). One watch, started before anything runs, records when each
pod was first seen bound; every figure comes from it, not from a scheduler's log.

Bursts: M pending pods exist, then the scheduler starts (its own process); the
time runs from its start until the watch has seen the last pod bound, so start-up,
caches and every API write count. kai's pods carry no PodGroup: its pod grouper
makes one per pod, as KAI's does. kube-scheduler runs with client rate limits
raised (qps/burst 5000) so that neither side is throttled by its client. The
ceiling is a bare client posting each pod's Binding, 64 at a time, to the same
control plane: no scheduler binds faster than that. Each side runs `--runs`
times, interleaved (kai, kube-scheduler, ceiling, kai, ...) so drifting load
falls on all alike; the figures are medians and the ratios are of medians.
Between runs the control plane rests (`--cooldown-seconds`, 60), and each run
starts once its CPU is quiet (`settleSeconds`): a run that follows another
too closely pays for it (see `Cooldown`).

Shards (`--shards N`, N > 1): the bursts add a side `kaiShards`, N `kai run
--node-pool pool-<i>` processes (each its own metrics port and log) on the same
nodes and the same number of pods, interleaved with one default-shard kai. For it
the nodes are labelled `kai.scheduler/node-pool=pool-<i>` round robin, each pool
has its own Queue (`bench-pool-<i>`, labelled with its pool), and the pods are
split evenly, each labelled with its pool and its pool's queue; before a `kai`
burst the labels come off again, so each side sees the layout it needs. Each
shard's cycles come from its own metrics port, and `ratioShardsToKai` is the
shards' median pods/s over one kai's. Streams stay one kai (and kube-scheduler).

Streams: the scheduler starts and binds one warm-up pod; then pods are created
at `--stream-rate` per second; each pod's latency is from its create request to
its bind, and time to first bind is from the first create.

kai binds a new group before it writes the group (after the burst, in a burst),
so its bursts also report when the last pod's PodGroup was seen
(`groupsWrittenSeconds`, from a second watch started with the first).

Each burst also reports the CPU seconds that the scheduler, kube-apiserver and
etcd used during its measured time (`cpuSeconds`), which says where the time
went on a machine they all share. After each burst the scheduler keeps running
with every pod bound and nothing changing: once it has settled (kai: its status
writes out and seen), `--idle-seconds` of its CPU per wall second is `idle`, what
a quiet cluster costs it (kai also gives its cycles in that time). Then
`--steady-pods` pods come one at a time beside the burst's, each created a second
after the one before is bound: `steady` is their latency and the scheduler's CPU
per pod (kai: its cycles' mean time too), what one more pod costs on a busy
cluster. `--log-dir` keeps the schedulers' logs; `--kai-profile` runs kai's first burst under cProfile and writes its statistics
there. Output per contracts/bench.md; progress on stderr.

kai runs from the checkout with its bytecode compiled first, as installing it (the
image) compiles it: where PYTHONDONTWRITEBYTECODE is set (this machine sets it), each
start otherwise compiled kai's modules again, 0.15-0.2 s of a burst that
kube-scheduler, a compiled binary, does not pay.
"""

from __future__ import annotations

import argparse
import asyncio
import compileall
import json
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

# `python bench/e2e.py` puts bench/ on the import path, not the checkout that holds it.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.timing import nearest_rank
from kai.api.constants import SCHEDULER_NAME
from kai.api.shards import NODE_POOL_LABEL_KEY
from kai.kube.client import ApiError, Kube, connect
from kai.testing.binaries import default_repo_root, locate_binaries
from kai.testing.controlplane import ClusterAccess, ControlPlane
from kai.testing.fakes import GpuNode, create_gpu_node, wait_for_default_service_account
from kai.testing.processes import free_loopback_port

NAMESPACE = "bench"
QUEUE = "bench"
CONCURRENCY = 64
"""Requests in flight when the benchmark creates pods, and the bare client's binds (the ceiling)."""


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


async def _bounded(coroutines: list[Any], limit: int) -> None:
    semaphore = asyncio.Semaphore(limit)

    async def one(coroutine: Any) -> None:
        async with semaphore:
            await coroutine

    await asyncio.gather(*(one(c) for c in coroutines))


def _node_name(index: int) -> str:
    return f"node-{index:05d}"


def pool_name(index: int) -> str:
    return f"pool-{index}"


def pool_queue(pool: str) -> str:
    """The Queue of one pool: labelled with the pool, so only that pool's shard serves it."""
    return f"{QUEUE}-{pool}"


def round_robin_pools(count: int, shards: int) -> list[str | None]:
    """The pool of each of `count` objects (nodes or pods), round robin over `shards` pools,
    so each pool gets an even share (counts differ by at most one); one shard: no pools."""
    if shards <= 1:
        return [None] * count
    return [pool_name(index % shards) for index in range(count)]


def gpus_per_node_needed(nodes: int, pods: int, shards: int, at_least: int) -> int:
    """GPUs per node so that every pod of a burst fits, also when pods and nodes are cut
    into `shards` pools (no pool has more than ceil(pods/N) pods or fewer than floor(nodes/N)
    nodes)."""
    needed = math.ceil(pods / nodes)
    if shards > 1:
        needed = max(needed, math.ceil(math.ceil(pods / shards) / (nodes // shards)))
    return max(at_least, needed)


def _pod(name: str, scheduler: str, pool: str | None = None) -> dict[str, Any]:
    labels = {"kai.scheduler/queue": QUEUE}
    if pool is not None:
        labels = {"kai.scheduler/queue": pool_queue(pool), NODE_POOL_LABEL_KEY: pool}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels},
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


async def _prepare(kube: Kube, api: Any, nodes: int, gpus_per_node: int, shards: int) -> None:
    await kube.create("/api/v1/namespaces", {"metadata": {"name": NAMESPACE}})
    unlimited = {"quota": -1, "limit": -1, "overQuotaWeight": 1}
    pools = [pool_name(index) for index in range(shards)] if shards > 1 else []
    for name, labels in [(QUEUE, {}), *((pool_queue(p), {NODE_POOL_LABEL_KEY: p}) for p in pools)]:
        await kube.create(
            "/apis/scheduling.run.ai/v2/queues",
            {
                "apiVersion": "scheduling.run.ai/v2",
                "kind": "Queue",
                "metadata": {"name": name, "labels": labels},
                "spec": {"resources": {"gpu": unlimited, "cpu": unlimited, "memory": unlimited}},
            },
        )
    await wait_for_default_service_account(kube, NAMESPACE)
    await _bounded(
        [
            create_gpu_node(api, GpuNode(name=_node_name(i), gpus=gpus_per_node, pods=250))
            for i in range(nodes)
        ],
        CONCURRENCY,
    )


async def _create_pods(kube: Kube, names: Sequence[str], scheduler: str, shards: int = 1) -> None:
    """The pods, split round robin over `shards` pools (one: unlabelled, queue `bench`)."""
    collection = f"/api/v1/namespaces/{NAMESPACE}/pods"
    pools = round_robin_pools(len(names), shards)
    await _bounded(
        [
            kube.create(collection, _pod(name, scheduler, pool))
            for name, pool in zip(names, pools, strict=True)
        ],
        CONCURRENCY,
    )


async def _label_nodes(kube: Kube, nodes: int, shards: int) -> None:
    """Each node's pool label as the next side needs it: round robin over `shards` pools, or
    (one shard) none, which a merge patch's null removes."""
    await _bounded(
        [
            kube.merge_patch(
                f"/api/v1/nodes/{_node_name(index)}",
                {"metadata": {"labels": {NODE_POOL_LABEL_KEY: pool}}},
            )
            for index, pool in enumerate(round_robin_pools(nodes, shards))
        ],
        CONCURRENCY,
    )


async def _assert_no_pods(kube: Kube) -> None:
    """A burst starts from an empty namespace: a pod left over would take GPUs or binds."""
    for path in (
        f"/api/v1/namespaces/{NAMESPACE}/pods",
        f"/apis/scheduling.run.ai/v2alpha2/namespaces/{NAMESPACE}/podgroups",
    ):
        left = (await kube.get(path, [("limit", "1")]))["items"]
        if left:
            raise RuntimeError(f"left over from an earlier run: {left[0]['metadata']['name']}")


def _names(prefix: str, count: int) -> list[str]:
    return [f"{prefix}-{index:05d}" for index in range(count)]


class FirstSeen:
    """When this process first saw each pod of the namespace reach a state (monotonic
    seconds, by pod name): `reached` gives the pod's name once an object of `path` shows it.

    One watch for the whole benchmark, started before any scheduler, so every side's
    writes are seen the same way and the objects' own (one-second) timestamps are not needed.
    """

    def __init__(
        self, kube: Kube, path: str, reached: Callable[[Mapping[str, Any]], str | None]
    ) -> None:
        self._kube = kube
        self._path = path
        self._reached = reached
        self.bound: dict[str, float] = {}
        self._waiters: list[tuple[set[str], asyncio.Event]] = []

    async def run(self) -> None:
        path = self._path
        while True:
            listing = await self._kube.get(path)
            for pod in listing["items"]:
                self._see(pod)
            version = listing["metadata"]["resourceVersion"]
            try:
                while True:
                    query = [("resourceVersion", version), ("timeoutSeconds", "30")]
                    async for event in self._kube.watch(path, query, timeout=60):
                        if event.get("type") == "ERROR":
                            raise ApiError("GET", path, 410, "Expired", "watch expired")
                        pod = event.get("object") or {}
                        version = pod["metadata"]["resourceVersion"]
                        self._see(pod)
            except ApiError as error:
                log(f"  watch restarts: {error}")

    def _see(self, found: Mapping[str, Any]) -> None:
        name = self._reached(found)
        if name is not None and name not in self.bound:
            self.bound[name] = time.monotonic()
            for missing, done in self._waiters:
                missing.discard(name)
                if not missing:
                    done.set()

    async def wait(self, names: Collection[str], timeout: float) -> None:
        """Until every one of `names` is seen; TimeoutError naming how far it got.

        Each sighting crosses one name off (this process shares the machine with the
        scheduler it measures: no rescan of thousands of names per watch event)."""
        missing = {name for name in names if name not in self.bound}
        if not missing:
            return
        waiter = (missing, asyncio.Event())
        self._waiters.append(waiter)
        try:
            await asyncio.wait_for(waiter[1].wait(), timeout)
        except TimeoutError:
            done = len(names) - len(missing)
            raise TimeoutError(
                f"only {done} of {len(names)} pods seen after {timeout:g}s ({self._path})"
            ) from None
        finally:
            self._waiters.remove(waiter)

    def times(self, names: Iterable[str]) -> list[float]:
        return [self.bound[name] for name in names]


def bind_watch(kube: Kube) -> FirstSeen:
    """Each pod's bind: the first time it is seen with a node."""

    def bound(pod: Mapping[str, Any]) -> str | None:
        return str(pod["metadata"]["name"]) if (pod.get("spec") or {}).get("nodeName") else None

    return FirstSeen(kube, f"/api/v1/namespaces/{NAMESPACE}/pods", bound)


def group_watch(kube: Kube) -> FirstSeen:
    """Each pod's PodGroup: when a group owned by the pod (kai's grouper makes one a plain
    pod, owned by it) is first seen."""

    def owner(group: Mapping[str, Any]) -> str | None:
        references = group["metadata"].get("ownerReferences") or []
        return str(references[0]["name"]) if references else None

    return FirstSeen(
        kube, f"/apis/scheduling.run.ai/v2alpha2/namespaces/{NAMESPACE}/podgroups", owner
    )


async def _delete_pods(kube: Kube) -> None:
    """kai's PodGroups, then the pods, so that the next run starts from an empty namespace.

    Groups first: deleting a pod that still owns a group sets the garbage collector to
    read and delete that group, thousands of requests that went on into the next run."""
    for path in (
        f"/apis/scheduling.run.ai/v2alpha2/namespaces/{NAMESPACE}/podgroups",
        f"/api/v1/namespaces/{NAMESPACE}/pods",
    ):
        asked = 0.0
        while True:
            if time.monotonic() - asked > 15:  # again if a timed-out request left some
                asked = time.monotonic()
                try:
                    await kube.delete(path, {"gracePeriodSeconds": 0})
                except ApiError as error:  # a loaded apiserver goes on deleting after a timeout
                    log(f"  delete {path}: {error}; waiting for it")
            if not (await kube.get(path, [("limit", "1")]))["items"]:
                break
            await asyncio.sleep(0.2)


def _kai_process(
    access: ClusterAccess,
    port: int,
    args: argparse.Namespace,
    log_path: Path,
    profile: Path | None,
    pool: str | None = None,
    liveness_port: int | None = None,
) -> subprocess.Popen[bytes]:
    """One `kai run`; a shard (`pool`) also gets a liveness port of its own, as the default
    (8081) can be bound by one process only."""
    profiler = ["-m", "cProfile", "-o", str(profile.resolve())] if profile is not None else []
    shard = [f"--node-pool={pool}"] if pool is not None else []
    if liveness_port is not None:
        shard.append(f"--liveness-endpoint=http://127.0.0.1:{liveness_port}/healthz")
    argv = [
        sys.executable, *profiler, "-m", "kai.cli.main", "run",
        f"--kubeconfig={access.kubeconfig}", f"--metrics-port={port}",
        f"--time-limit={args.time_limit}", f"--burst-pods={args.burst_pods}",
        "--no-leader-election", "--log-level=info", *shard, *args.kai_option,
    ]  # fmt: skip
    with log_path.open("wb") as out:
        return subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, cwd=default_repo_root())


def _kube_scheduler_process(
    access: ClusterAccess, binary: Path, workdir: Path, label: str
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
    with (workdir / f"kube-scheduler-{label}.log").open("wb") as out:
        return subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)


def _stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM, then SIGKILL if it has not exited in 30 s: a scheduler must not outlive its run."""
    process.terminate()
    try:
        process.wait(30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def _first_cycle_start(log_path: Path) -> float | None:
    """When kai's first cycle began (epoch seconds): its summary line's time less its length.

    A cycle is kai's own notion, so this one figure comes from its log; the binds it is
    compared with come from the watch.
    """
    for line in log_path.read_text().splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if entry.get("event") == "cycle":
            ended = datetime.fromisoformat(entry["timestamp"]).timestamp()
            return float(ended - entry["total_ms"] / 1000)
    return None


async def _cycle_seconds(port: int) -> dict[str, float]:
    """Mean and count of kai's cycles, from its e2e latency histogram.

    The binds come before a cycle's status writes, so the cycle that bound the last
    pod may still be running: wait for it.
    """
    for _ in range(300):
        count, total = await _cycle_totals(port)
        if count:
            return {"cycles": count, "meanCycleSeconds": round(total / 1000 / count, 3)}
        await asyncio.sleep(0.1)
    return {}


IDLE_SETTLE_PASSES = 4
"""Passes of kai's loop after the last bind (cycles, and those it skipped as nothing had
changed) before its idle time is measured: the cycle after the burst writes every group's
status, the next waits for those writes, and their watch events make one more run in full."""
IDLE_SETTLE_SECONDS = 5.0
"""The same for a scheduler without kai's cycle counter (kube-scheduler): a fixed wait."""


async def _idle(pid: int, metrics_port: int | None, seconds: float) -> dict[str, float]:
    """The scheduler's CPU while nothing changes: every pod bound, no new ones, after it
    has settled; per wall second of the window, and kai's cycles in it."""
    if metrics_port is None:
        await asyncio.sleep(IDLE_SETTLE_SECONDS)
    else:
        bound_at = await _passes(metrics_port)
        while await _passes(metrics_port) < bound_at + IDLE_SETTLE_PASSES:
            await asyncio.sleep(0.2)
    began, cpu_before = time.monotonic(), _cpu_seconds(pid)
    totals_before = await _cycle_totals(metrics_port) if metrics_port is not None else (0, 0)
    await asyncio.sleep(seconds)
    wall, cpu = time.monotonic() - began, _cpu_seconds(pid) - cpu_before
    found: dict[str, float] = {"seconds": round(wall, 1), "cpuPerSecond": round(cpu / wall, 3)}
    if metrics_port is not None:
        found.update(await _cycles_since(metrics_port, totals_before))
    return found


async def _cycles_since(port: int, before: tuple[float, float]) -> dict[str, float]:
    """kai's cycles since its totals were `before`, and their mean time."""
    count, total_ms = await _cycle_totals(port)
    cycles = count - before[0]
    found = {"cycles": cycles}
    if cycles:
        found["meanCycleSeconds"] = round((total_ms - before[1]) / 1000 / cycles, 3)
    return found


async def _cycle_totals(port: int) -> tuple[float, float]:
    """kai's cycles so far and their milliseconds in all (its e2e latency histogram)."""
    text = await asyncio.to_thread(_metrics_text, port)
    return (
        _sample(text, "e2e_scheduling_latency_milliseconds_count"),
        _sample(text, "e2e_scheduling_latency_milliseconds_sum"),
    )


async def _passes(port: int) -> float:
    """kai's loop passes so far: its cycles and the ones it skipped."""
    text = await asyncio.to_thread(_metrics_text, port)
    return _sample(text, "kai_cycles_total") + _sample(text, "kai_cycles_skipped_total")


def _metrics_text(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        return str(response.read().decode())


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


CONTROL_PLANE = ("kube-apiserver", "etcd", "kube-controller-manager")


def _control_plane_pids() -> dict[str, int]:
    """The control plane's pids (kube-apiserver, etcd, kube-controller-manager): children of
    this process, by program name."""
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
        if parent == os.getpid() and program in CONTROL_PLANE:
            found[program] = int(entry.name)
    return found


QUIET_CORES = 0.2
"""The control plane counts as settled below this much CPU (cores, all of it together)."""
SETTLE_LIMIT_SECONDS = 120.0


async def _settle(pids: Mapping[str, int], window: float = 1.0) -> float:
    """Until the control plane (`pids`, by program) has finished the work the last writes
    left it (watch fan-out, the garbage collector's queue): its CPU over `window` below
    QUIET_CORES, or SETTLE_LIMIT_SECONDS. A burst that starts while the one before is still
    being cleaned up measures that cleanup too, for whichever side runs next. The seconds
    waited."""
    began = time.monotonic()
    while time.monotonic() - began < SETTLE_LIMIT_SECONDS:
        before = sum(_cpu_seconds(pid) for pid in pids.values())
        await asyncio.sleep(window)
        if sum(_cpu_seconds(pid) for pid in pids.values()) - before < QUIET_CORES * window:
            break
    return round(time.monotonic() - began, 1)


class Cooldown:
    """The pause between one run's end and the next run's start, the same for every side.

    Measured: kai alone, four 5,000-pod bursts back to back on one control plane took
    7.7, 9.6, 10.4 and 9.7 s, and with a minute between them 8.0, 8.9, 8.2 and 8.2 s. Every
    process on the machine, kai's imports too, ran slower in a burst that came soon after
    another, while the control plane's CPU was already quiet. So a run was paying for the
    one before it, whichever side that was."""

    def __init__(self, seconds: float) -> None:
        self._seconds = seconds
        self._since: float | None = None  # no run yet: nothing to cool down from

    def restart(self) -> None:
        self._since = time.monotonic()

    async def wait(self) -> None:
        if self._since is not None:
            await asyncio.sleep(max(0.0, self._since + self._seconds - time.monotonic()))


Start = Callable[[str], subprocess.Popen[bytes]]
"""Starts one scheduler; its argument names the run (for its log file)."""


@dataclass(frozen=True)
class ShardProcess:
    """One `kai run --node-pool` of the shard side, with its own metrics port and log."""

    pool: str
    process: subprocess.Popen[bytes]
    port: int
    log: Path


StartShards = Callable[[str], list[ShardProcess]]
"""Starts every shard of the shard side; its argument names the run (for their log files)."""


@dataclass(frozen=True)
class Side:
    name: str  # the key in the JSON output
    prefix: str  # of its pods' names
    scheduler: str  # their schedulerName
    start: Start | None  # None: the bare client binds the pods itself (or start_shards does)
    log: Callable[[str], Path] | None = None  # kai's log file for a run, to find its cycles
    shards: int = 1  # >1: nodes and pods are labelled into this many pools, one kai each
    start_shards: StartShards | None = None


def interleaved(sides: Sequence[Side], runs: int) -> list[tuple[int, Side]]:
    """(run, side) in the order they run: every side once per round, so a change of the
    machine's load during the benchmark falls on all sides alike."""
    return [(run, side) for run in range(runs) for side in sides]


async def _burst(
    kube: Kube,
    watch: FirstSeen,
    groups: FirstSeen,
    side: Side,
    run: int,
    args: argparse.Namespace,
    metrics_port: int,
) -> dict[str, Any]:
    """One burst: `args.pods` pending pods, then the scheduler starts; until the last is bound."""
    names = _names(f"{side.prefix}-b{run}", args.pods)
    await _assert_no_pods(kube)
    await _create_pods(kube, names, side.scheduler, side.shards)
    others = _control_plane_pids()
    settled = await _settle(others)
    before = {name: _cpu_seconds(pid) for name, pid in others.items()}
    label = f"burst-{run}"
    began = time.monotonic()
    process = side.start(label) if side.start is not None else None
    shards = side.start_shards(label) if side.start_shards is not None else []
    try:
        if process is None and not shards:
            await _bind_all(kube, names, args.nodes)
        await _wait_bound(watch, names, args.timeout, [s.process for s in shards])
        cpu: dict[str, Any] = {
            name: round(_cpu_seconds(pid) - before[name], 1) for name, pid in others.items()
        }
        if process is not None:
            cpu["scheduler"] = round(_cpu_seconds(process.pid), 1)
        cycles: dict[str, Any] = await _cycle_seconds(metrics_port) if side.name == "kai" else {}
        if shards:
            by_pool = {shard.pool: round(_cpu_seconds(shard.process.pid), 1) for shard in shards}
            cpu["scheduler"] = round(sum(by_pool.values()), 1)
            cpu["shards"] = by_pool
            cycles = {"shards": {shard.pool: await _cycle_seconds(shard.port) for shard in shards}}
        if side.scheduler == SCHEDULER_NAME:  # kai writes each pod's group, after its bind
            await groups.wait(names, args.timeout)
            cycles["groupsWrittenSeconds"] = round(max(groups.times(names)) - began, 2)
        idle: dict[str, Any] = {}
        if process is not None and args.idle_seconds > 0:
            port = metrics_port if side.name == "kai" else None
            idle = {"idle": await _idle(process.pid, port, args.idle_seconds)}
        if process is not None and args.steady_pods > 0:
            port = metrics_port if side.name == "kai" else None
            idle["steady"] = await _steady(kube, watch, side, run, args, process.pid, port)
    finally:
        if process is not None:
            _stop(process)
        for shard in shards:
            _stop(shard.process)
    times = watch.times(names)
    row: dict[str, Any] = {
        "seconds": round(max(times) - began, 2),
        "firstBindSeconds": round(min(times) - began, 2),
        "settleSeconds": settled,
    }
    cycle_began = _first_cycle_start(side.log(label)) if side.log is not None else None
    if shards:
        starts = [found for shard in shards if (found := _first_cycle_start(shard.log))]
        cycle_began = min(starts) if starts else None
    if cycle_began is not None:
        wall = time.time() - time.monotonic()  # the watch's monotonic times as epoch seconds
        row["firstBindAfterCycleStartSeconds"] = round(min(times) + wall - cycle_began, 2)
    row.update({**cycles, "cpuSeconds": cpu, **idle})
    await _delete_pods(kube)
    return row


async def _steady(
    kube: Kube,
    watch: FirstSeen,
    side: Side,
    run: int,
    args: argparse.Namespace,
    pid: int,
    metrics_port: int | None,
) -> dict[str, Any]:
    """Beside the burst's pods, all bound: pods that come one at a time, each created once
    the one before is bound and a pause has passed, as on a busy cluster that is steady.
    Each one's creation-to-bind latency, and the scheduler's CPU and cycles meanwhile."""
    names = _names(f"{side.prefix}-q{run}", args.steady_pods)
    log(f"  steady: {len(names)} pods one at a time beside the burst's")
    latencies = []
    began, cpu_before = time.monotonic(), _cpu_seconds(pid)
    totals_before = await _cycle_totals(metrics_port) if metrics_port is not None else (0, 0)
    for name in names:
        await asyncio.sleep(STEADY_PAUSE_SECONDS)
        sent = time.monotonic()
        await _create_pods(kube, [name], side.scheduler)
        await watch.wait([name], args.timeout)
        latencies.append(watch.bound[name] - sent)
    await asyncio.sleep(STEADY_PAUSE_SECONDS)  # the last pod's cycle writes its status
    wall, cpu = time.monotonic() - began, _cpu_seconds(pid) - cpu_before
    found: dict[str, Any] = {
        "pods": len(names),
        "latencySeconds": _latency_summary(latencies),
        "cpuSecondsPerPod": round(cpu / len(names), 3),
        "seconds": round(wall, 1),
    }
    if metrics_port is not None:
        found.update(await _cycles_since(metrics_port, totals_before))
    return found


STEADY_PAUSE_SECONDS = 1.0
"""Between a steady pod's bind and the next one's create: its cycle's status writes and
their watch events settle first, so each pod meets a scheduler that is idle."""


async def _wait_bound(
    watch: FirstSeen,
    names: Collection[str],
    timeout: float,
    processes: Sequence[subprocess.Popen[bytes]],
) -> None:
    """As `watch.wait`, but a shard that exits (e.g. could not start) fails the run at once
    instead of after the whole timeout."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            await watch.wait(names, min(2.0, max(0.0, deadline - time.monotonic())))
            return
        except TimeoutError:
            if time.monotonic() >= deadline:
                raise
        for process in processes:
            if process.poll() is not None:
                raise RuntimeError(f"a shard exited with {process.returncode}: {process.args!r}")


async def _bind_all(kube: Kube, names: Sequence[str], nodes: int) -> None:
    """The ceiling: a bare client posts each pod's Binding, round robin over the nodes."""

    def binding(index: int, name: str) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": name},
            "target": {"apiVersion": "v1", "kind": "Node", "name": _node_name(index % nodes)},
        }

    collection = f"/api/v1/namespaces/{NAMESPACE}/pods"
    await _bounded(
        [
            kube.create(f"{collection}/{name}/binding", binding(index, name))
            for index, name in enumerate(names)
        ],
        CONCURRENCY,
    )


async def _stream(
    kube: Kube, watch: FirstSeen, side: Side, run: int, args: argparse.Namespace
) -> dict[str, Any]:
    """Pods created at a fixed rate while the scheduler runs: each one's creation-to-bind latency.

    The scheduler first binds one warm-up pod, so start-up is not counted; a pod's
    creation is when its create request was sent, its bind when the watch saw it.
    """
    assert side.start is not None
    await _settle(_control_plane_pids())
    process = side.start(f"stream-{run}")
    try:
        warm = [f"{side.prefix}-w{run}"]
        await _create_pods(kube, warm, side.scheduler)
        await watch.wait(warm, args.timeout)
        names = _names(f"{side.prefix}-s{run}", args.stream_pods)
        sent: dict[str, float] = {}
        began = time.monotonic()

        async def create(index: int, name: str) -> None:
            await asyncio.sleep(max(0.0, began + index / args.stream_rate - time.monotonic()))
            sent[name] = time.monotonic()
            await kube.create(f"/api/v1/namespaces/{NAMESPACE}/pods", _pod(name, side.scheduler))

        await asyncio.gather(*(create(index, name) for index, name in enumerate(names)))
        created = time.monotonic()
        await watch.wait(names, args.timeout)
    finally:
        _stop(process)
    latencies = [watch.bound[name] - sent[name] for name in names]
    row = {
        "createdPerSecond": round(len(names) / max(created - began, 1e-9), 1),
        "firstBindSeconds": round(min(watch.times(names)) - began, 3),
        "latencySeconds": _latency_summary(latencies),
    }
    await _delete_pods(kube)
    return row


def _latency_summary(latencies: Sequence[float]) -> dict[str, float]:
    return {
        "p50": round(nearest_rank(latencies, 0.5), 3),
        "p99": round(nearest_rank(latencies, 0.99), 3),
        "max": round(max(latencies), 3),
    }


def summarize_bursts(pods: int, rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """One side's bursts: the median run's seconds, and the rate that makes (pods over it)."""
    seconds = statistics.median(row["seconds"] for row in rows)
    summary: dict[str, Any] = {
        "podsBoundPerSecond": round(pods / seconds, 1),
        "seconds": round(seconds, 2),
    }
    for figure in ("firstBindSeconds", "firstBindAfterCycleStartSeconds", "groupsWrittenSeconds"):
        if all(figure in row for row in rows):
            summary[figure] = round(statistics.median(row[figure] for row in rows), 2)
    idle = [row["idle"] for row in rows if "idle" in row]
    if idle:
        summary["idle"] = {
            name: round(statistics.median(found[name] for found in idle), 3)
            for name in ("cpuPerSecond", "meanCycleSeconds")
            if all(name in found for found in idle)
        }
    steady = [row["steady"] for row in rows if "steady" in row]
    if steady:
        summary["steady"] = {
            "latencyP50Seconds": _median(row["latencySeconds"]["p50"] for row in steady),
            "latencyP99Seconds": _median(row["latencySeconds"]["p99"] for row in steady),
            **{
                name: _median(row[name] for row in steady)
                for name in ("cpuSecondsPerPod", "meanCycleSeconds")
                if all(name in row for row in steady)
            },
        }
    return {**summary, "runs": list(rows)}


def _median(values: Iterable[float]) -> float:
    return round(statistics.median(values), 3)


def summarize_streams(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """One side's streams: the median over runs of each figure."""

    def median_of(pick: Callable[[Mapping[str, Any]], float]) -> float:
        return round(statistics.median(pick(row) for row in rows), 3)

    return {
        "firstBindSeconds": median_of(lambda row: row["firstBindSeconds"]),
        "latencySeconds": {
            figure: median_of(lambda row, f=figure: row["latencySeconds"][f])  # type: ignore[misc]
            for figure in ("p50", "p99", "max")
        },
        "runs": list(rows),
    }


def summarize_shard_cycles(rows: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, float]]:
    """Each shard's cycles over the shard side's bursts: the median of its runs' mean cycle
    seconds, and of their cycle counts (a run whose metrics gave nothing is left out)."""
    per_pool: dict[str, list[Mapping[str, float]]] = {}
    for row in rows:
        for pool, cycles in (row.get("shards") or {}).items():
            if cycles:
                per_pool.setdefault(pool, []).append(cycles)
    return {
        pool: {
            "meanCycleSeconds": round(statistics.median(c["meanCycleSeconds"] for c in found), 3),
            "cycles": statistics.median(c["cycles"] for c in found),
        }
        for pool, found in sorted(per_pool.items())
    }


def ratio(numerator: float, denominator: float) -> float:
    return round(numerator / denominator, 2)


async def run(args: argparse.Namespace) -> dict[str, Any]:
    binaries = locate_binaries(default_repo_root())
    compileall.compile_dir(default_repo_root() / "kai", quiet=1)  # see the module's docstring
    most = max(args.pods + args.steady_pods, args.stream_pods + 1)
    gpus_per_node = gpus_per_node_needed(args.nodes, most, args.shards, args.gpus_per_node)
    with (
        ControlPlane(binaries, default_repo_root() / "crds") as access,
        tempfile.TemporaryDirectory() as tmp,
    ):
        workdir = args.log_dir or Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        port = free_loopback_port()

        def kai_log(label: str) -> Path:
            return workdir / f"kai-{label}.log"

        def kai(label: str) -> subprocess.Popen[bytes]:
            profile = args.kai_profile if label == "burst-0" else None
            return _kai_process(access, port, args, kai_log(label), profile)

        def kube_scheduler(label: str) -> subprocess.Popen[bytes]:
            return _kube_scheduler_process(access, binaries.kube_scheduler, workdir, label)

        pools = [pool_name(index) for index in range(args.shards)]
        shard_ports = {pool: free_loopback_port() for pool in pools}

        def kai_shards(label: str) -> list[ShardProcess]:
            started = []
            for pool in pools:
                path = workdir / f"kai-{pool}-{label}.log"
                process = _kai_process(
                    access, shard_ports[pool], args, path, None, pool, free_loopback_port()
                )
                started.append(ShardProcess(pool, process, shard_ports[pool], path))
            return started

        sides = [Side("kai", "kai", "kai-scheduler", kai, kai_log)]
        if args.compare == "kube-scheduler":
            sides.append(Side("kubeScheduler", "kube", "default-scheduler", kube_scheduler))
        burst_sides = [*sides, Side("ceiling", "bare", "none", None)] if args.ceiling else sides
        if args.shards > 1:
            shard_side = Side(
                "kaiShards", "shards", "kai-scheduler", None, None, args.shards, kai_shards
            )
            burst_sides = [*burst_sides, shard_side]
        client = await connect(access.kubeconfig)
        async with client:
            kube = Kube(client)
            log(f"creating {args.nodes} nodes ({gpus_per_node} GPUs each)")
            await _prepare(kube, client, args.nodes, gpus_per_node, args.shards)
            watch, groups = bind_watch(kube), group_watch(kube)
            watching = [asyncio.create_task(watch.run()), asyncio.create_task(groups.run())]
            try:
                result = await _runs(kube, watch, groups, args, port, burst_sides, sides)
            finally:
                for task in watching:
                    task.cancel()
        shards = {"shards": args.shards} if args.shards > 1 else {}
        return {
            "bench": "e2e", "nodes": args.nodes, "gpusPerNode": gpus_per_node, **shards, **result
        }  # fmt: skip


async def _runs(
    kube: Kube,
    watch: FirstSeen,
    groups: FirstSeen,
    args: argparse.Namespace,
    port: int,
    burst_sides: Sequence[Side],
    stream_sides: Sequence[Side],
) -> dict[str, Any]:
    result: dict[str, Any] = {"pods": args.pods, "runs": args.runs}
    cooling = Cooldown(args.cooldown_seconds)
    bursts: dict[str, list[dict[str, Any]]] = {side.name: [] for side in burst_sides}
    if args.pods:
        layout = 1  # the nodes carry no pool label yet
        for run, side in interleaved(burst_sides, args.runs):
            if side.shards != layout:
                log(f"labelling {args.nodes} nodes into {side.shards} pool(s)")
                await _label_nodes(kube, args.nodes, side.shards)
                layout = side.shards
            await cooling.wait()
            log(f"burst {run}: {side.name}, {args.pods} pods")
            row = await _burst(kube, watch, groups, side, run, args, port)
            cooling.restart()
            log(f"  {row}")
            bursts[side.name].append(row)
        for name, rows in bursts.items():
            result[name] = summarize_bursts(args.pods, rows)
        if "kaiShards" in bursts:
            result["kaiShards"]["shardCycles"] = summarize_shard_cycles(bursts["kaiShards"])
        rate = {name: result[name]["podsBoundPerSecond"] for name in bursts}
        if "kubeScheduler" in rate:
            result["ratio"] = ratio(rate["kai"], rate["kubeScheduler"])
        if "ceiling" in rate:
            result["ratioToCeiling"] = ratio(rate["kai"], rate["ceiling"])
        if "kaiShards" in rate:
            result["ratioShardsToKai"] = ratio(rate["kaiShards"], rate["kai"])
    if args.stream_pods:
        if args.shards > 1:  # one kai streams: the default shard's layout
            await _label_nodes(kube, args.nodes, 1)
        streams: dict[str, list[dict[str, Any]]] = {side.name: [] for side in stream_sides}
        for run, side in interleaved(stream_sides, args.stream_runs):
            await cooling.wait()
            log(f"stream {run}: {side.name}, {args.stream_pods} pods at {args.stream_rate}/s")
            row = await _stream(kube, watch, side, run, args)
            cooling.restart()
            log(f"  {row}")
            streams[side.name].append(row)
        result["stream"] = {
            "rate": args.stream_rate,
            "pods": args.stream_pods,
            **{name: summarize_streams(rows) for name, rows in streams.items()},
        }
    return result


def _print_table(result: Mapping[str, Any]) -> None:
    for name in ("kai", "kubeScheduler", "ceiling", "kaiShards"):
        if name in result:
            row = result[name]
            print(
                f"{name:15} {row['podsBoundPerSecond']:>8} pods/s  {row['seconds']:>8} s"
                f"  first bind {row['firstBindSeconds']:>6} s  (median of {len(row['runs'])})"
            )
            if "firstBindAfterCycleStartSeconds" in row:
                print(
                    f"{'':15} first bind {row['firstBindAfterCycleStartSeconds']} s"
                    " after its first cycle began"
                )
            if "groupsWrittenSeconds" in row:
                print(f"{'':15} every pod's PodGroup written at {row['groupsWrittenSeconds']} s")
            if "idle" in row:
                print(f"{'':15} idle: {row['idle']}")
            if "steady" in row:
                print(f"{'':15} steady: {row['steady']}")
            for pool, cycles in (row.get("shardCycles") or {}).items():
                print(
                    f"{'':15} {pool}: {cycles['cycles']:g} cycles,"
                    f" mean {cycles['meanCycleSeconds']} s"
                )
    for key, label in (
        ("ratio", "kai / kube-scheduler"),
        ("ratioToCeiling", "kai / ceiling"),
        ("ratioShardsToKai", f"kaiShards ({result.get('shards')}) / kai"),
    ):
        if key in result:
            print(f"ratio ({label}): {result[key]}")
    stream = result.get("stream")
    if stream:
        print(f"stream: {stream['pods']} pods at {stream['rate']} pods/s")
        for name in ("kai", "kubeScheduler"):
            if name in stream:
                row = stream[name]
                latency = row["latencySeconds"]
                print(
                    f"{name:15} first bind {row['firstBindSeconds']:>6} s  p50 {latency['p50']} s"
                    f"  p99 {latency['p99']} s  max {latency['max']} s"
                )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--pods", type=int, default=5000, help="per burst; 0: no bursts")
    parser.add_argument("--runs", type=int, default=3, help="bursts per side, interleaved")
    parser.add_argument("--gpus-per-node", type=int, default=8, help="raised to fit every pod")
    parser.add_argument("--compare", choices=("kube-scheduler", "none"), default="kube-scheduler")
    parser.add_argument(
        "--no-ceiling", dest="ceiling", action="store_false", help="skip the bare client's bursts"
    )
    parser.add_argument("--stream-pods", type=int, default=3000, help="0: no streaming runs")
    parser.add_argument("--stream-rate", type=float, default=100.0, help="pods created per second")
    parser.add_argument("--stream-runs", type=int, default=1, help="streams per side, interleaved")
    parser.add_argument(
        "--time-limit", type=float, default=1.0, help="kai's solver seconds per cycle"
    )
    parser.add_argument("--burst-pods", type=int, default=500, help="kai run --burst-pods")
    parser.add_argument(
        "--shards",
        type=int,
        default=1,
        help=">1: the bursts also run this many `kai run --node-pool` shards (side kaiShards)",
    )
    parser.add_argument(
        "--kai-option",
        action="append",
        default=[],
        help="one more `kai run` option, e.g. --period=2s",
    )
    parser.add_argument(
        "--idle-seconds",
        type=float,
        default=10.0,
        help="after a burst, the scheduler's CPU while nothing changes, for this long (0: not)",
    )
    parser.add_argument(
        "--steady-pods",
        type=int,
        default=0,
        help="after a burst, beside its pods: this many pods one at a time (0: none)",
    )
    parser.add_argument(
        "--cooldown-seconds",
        type=float,
        default=60.0,
        help="pause between one run's end and the next run's start, for every side",
    )
    parser.add_argument("--timeout", type=float, default=900.0, help="per run, seconds")
    parser.add_argument("--log-dir", type=Path, help="keep the schedulers' logs here")
    parser.add_argument("--kai-profile", type=Path, help="run kai's first burst under cProfile")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.shards < 1 or args.shards > args.nodes:
        parser.error("--shards must be between 1 and --nodes")
    result = asyncio.run(run(args))
    if args.json:
        print(json.dumps(result))
    else:
        _print_table(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
