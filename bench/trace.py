"""The openb production GPU-sharing trace, packed by the engine in the FGD paper's protocol.

Why: the synthetic benchmarks (`bench/engine.py`) say how fast a cycle is and how
it compares with the greedy pass on made-up demand; they cannot say whether kai
packs real demand well. The openb trace (Alibaba's GPU cluster: 1,213 nodes of 7 GPU
types, pods asking for whole GPUs or GPU shares) comes with the published results
of the policies the FGD paper (USENIX ATC'23) compares, measured by its simulator in
a fixed protocol. Running kai in the same protocol puts its allocation ratio beside
theirs, and beside kai's own greedy pass on the same arrivals in the same run.

The protocol: the pod list is tuned to `--tune` x the cluster's GPUs (the original
pods plus pods drawn with replacement, seeded; a draw that would pass the target
ends the tuning), shuffled with the seed; pods arrive in that order and never
leave; a pod that fits nowhere fails and the next one comes. (The paper's simulator
shuffles the original pods and appends the drawn ones after them; here all are
shuffled together, and the seeds' draws differ from Go's anyway.) `online` runs a cycle
per arriving pod, `batch N` a cycle per N arrivals (a pod the cycle of its batch did
not bind has failed). The allocation ratio is read off at given points of arrived
workload (GPUs the arrived pods asked for, failed ones included, in % of the
cluster's GPUs) the way the published CSV was made: the mean of the samples whose
arrived % rounds to the point, or of those within one point when none does. A
sample is taken after every cycle (after every pod online, as the paper's simulator
does).

Beside the curves, `packingBoundPct` is how much any placement of the arrived pods could
allocate at each point (`bench/packing_bound.py`): what no policy, online or offline,
with or without moves, can pass.

The engine objects are built from manifests with kai's own parsers, once, and the
snapshot is carried from cycle to cycle: bindings become Bound pods, as `kai
simulate` applies them. With `--consolidate` the engine may move running pods to
make room (KAI's consolidation); its plan (the evicted pods and where they and the
pod they made room for are pipelined) is applied as decided, and checked to fit.

    python bench/trace.py [--nodes CSV] [--pods CSV] [--seeds 42-51] [--tune 1.3]
                          [--mode online|batch] [--batch N] [--consolidate] [--json]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

# `python bench/trace.py` puts bench/ on the import path, not the checkout that holds it.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.arguments import positive_float, positive_int
from bench.openb import (
    ARRIVED_POINTS,
    DEFAULT_NODES,
    DEFAULT_PODS,
    DEFAULT_PUBLISHED,
    MILLI,
    Sample,
    TraceNode,
    TracePod,
    allocated_at,
    arrivals,
    read_nodes,
    read_pods,
    read_published,
)
from bench.packing_bound import packing_bound_at
from bench.timing import summarize, timed_cycle
from kai.api.constants import (
    CORE_API_VERSION,
    GPU_FRACTION_ANNOTATION,
    GPU_FRACTION_NUM_DEVICES_ANNOTATION,
    GPU_MEMORY_NODE_LABEL,
    NVIDIA_GPU_RESOURCE,
    POD_GROUP_API_VERSION,
    QUEUE_API_VERSION,
    SCHEDULER_NAME,
)
from kai.api.parse import parse_node, parse_pod, parse_pod_group, parse_queue
from kai.engine.capacity import initial_capacity
from kai.engine.cycle import CycleResult
from kai.engine.evictions.decisions import PipelinedPod
from kai.engine.memo import SnapshotMemo
from kai.engine.model import (
    EngineConfig,
    EvictionConfig,
    Node,
    Pod,
    PodGroup,
    PodPhase,
    Queue,
    Snapshot,
)
from kai.simulate.rounds import apply

GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"
DEVICE_MEMORY_MIB = MILLI
"""Every device is labelled with 1,000 MiB, so a share of `gpu_milli` takes exactly that many
MiB: shares add up exactly (the trace's unit), which real memory sizes would round."""
MAX_PODS_PER_NODE = 1001  # as in the paper's node list: pods per node never bind
NAMESPACE = "openb"
QUEUE = "openb"
START = datetime(2025, 1, 1, tzinfo=UTC)  # arrival i is created at START + i seconds

Document = dict[str, Any]
Progress = Callable[[str], None]


# -- engine objects, through kai's parsers ---------------------------------------------------


def node_manifest(node: TraceNode) -> dict[str, Any]:
    return {
        "apiVersion": CORE_API_VERSION,
        "kind": "Node",
        "metadata": {
            "name": node.name,
            "labels": {
                GPU_PRODUCT_LABEL: node.model,
                GPU_MEMORY_NODE_LABEL: str(DEVICE_MEMORY_MIB),
            },
        },
        "status": {
            "allocatable": {
                "cpu": f"{node.cpu_milli}m",
                "memory": f"{node.memory_mib}Mi",
                NVIDIA_GPU_RESOURCE: str(node.gpus),
                "pods": str(MAX_PODS_PER_NODE),
            }
        },
    }


def pod_manifest(pod: TracePod) -> dict[str, Any]:
    """A pending pod: cpu and memory requests, whole GPUs or a `gpu-fraction`, GPU models allowed."""
    requests: dict[str, str] = {"cpu": f"{pod.cpu_milli}m", "memory": f"{pod.memory_mib}Mi"}
    annotations: dict[str, str] = {}
    if pod.is_share:
        annotations[GPU_FRACTION_ANNOTATION] = f"0.{pod.gpu_milli:03d}"
        if pod.num_gpu > 1:
            annotations[GPU_FRACTION_NUM_DEVICES_ANNOTATION] = str(pod.num_gpu)
    elif pod.gpu_request_milli:
        requests[NVIDIA_GPU_RESOURCE] = str(pod.num_gpu)
    spec: dict[str, Any] = {
        "schedulerName": SCHEDULER_NAME,
        "containers": [{"name": "main", "resources": {"requests": requests}}],
    }
    if pod.gpu_spec and pod.gpu_request_milli:
        spec["affinity"] = _gpu_model_affinity(pod.gpu_spec)
    return {
        "apiVersion": CORE_API_VERSION,
        "kind": "Pod",
        "metadata": {"name": pod.name, "namespace": NAMESPACE, "annotations": annotations},
        "spec": spec,
        "status": {"phase": "Pending"},
    }


def _gpu_model_affinity(models: Sequence[str]) -> dict[str, Any]:
    requirement = {"key": GPU_PRODUCT_LABEL, "operator": "In", "values": list(models)}
    terms = [{"matchExpressions": [requirement]}]
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}
        }
    }


def _queue_manifest() -> dict[str, Any]:
    unlimited = {"quota": -1, "limit": -1}
    return {
        "apiVersion": QUEUE_API_VERSION,
        "kind": "Queue",
        "metadata": {"name": QUEUE},
        "spec": {"resources": {"gpu": unlimited, "cpu": unlimited, "memory": unlimited}},
    }


def _pod_group_manifest() -> dict[str, Any]:
    return {
        "apiVersion": POD_GROUP_API_VERSION,
        "kind": "PodGroup",
        "metadata": {"name": "template", "namespace": NAMESPACE},
        "spec": {"minMember": 1, "queue": QUEUE},
    }


class TraceCluster:
    """The trace's nodes and one unlimited queue as engine objects, and the pods as they arrive.

    Each distinct pod shape is parsed from its manifest once; an arriving pod is that
    parsed pod renamed, with a PodGroup of its own created at its arrival.
    """

    def __init__(self, nodes: Sequence[TraceNode]) -> None:
        self.nodes: tuple[Node, ...] = tuple(parse_node(node_manifest(n)) for n in nodes)
        self.gpus = sum(node.gpus for node in self.nodes)
        self.queue: Queue = parse_queue(_queue_manifest())
        self._group: PodGroup = parse_pod_group(_pod_group_manifest(), {})
        self._parsed: dict[tuple[object, ...], Pod] = {}

    def arriving(self, pod: TracePod, index: int) -> tuple[Pod, PodGroup]:
        """The `index`-th arrival's pending Pod and its PodGroup."""
        shape = dataclasses.astuple(dataclasses.replace(pod, name=""))
        parsed = self._parsed.get(shape)
        if parsed is None:
            parsed = self._parsed[shape] = parse_pod(pod_manifest(pod), "")
        created = START + timedelta(seconds=index)
        name = f"{index:06d}-{pod.name}"
        group = dataclasses.replace(
            self._group, name=name, uid=f"uid-group-{name}", created=created
        )
        engine_pod = dataclasses.replace(
            parsed, name=name, uid=f"uid-{name}", group=group.key, created=created
        )
        return engine_pod, group


def gpu_milli(pod: Pod) -> int:
    """GPUs (in milli) a pod holds: whole devices, or its share of each of its devices."""
    share = pod.gpu.portion * pod.gpu.devices * MILLI
    return pod.gpu.whole * MILLI + int(share)


# -- one run of the protocol -------------------------------------------------------------------


@dataclass
class Run:
    """What one side (kai, or kai's greedy pass) did with one seed's arrivals."""

    samples: list[Sample] = field(default_factory=lambda: [Sample(0, 0)])
    cycle_seconds: list[float] = field(default_factory=list)
    failed: int = 0  # arrived pods that fit nowhere
    moved: int = 0  # running pods consolidation moved
    bound_milli: int | None = None  # the engine's bound on the final state, if the solver ran
    statuses: Counter[str] = field(default_factory=Counter)  # the solver's, per cycle
    answers: Counter[str] = field(default_factory=Counter)  # whose answer each cycle used
    ties: int = 0  # cycles whose solver answer was as good as greedy's, which was kept
    less_stranded: int = 0  # cycles whose better solver answer stranded more: greedy's kept
    cut_short: Counter[str] = field(default_factory=Counter)  # eviction searches out of budget
    seconds: float = 0.0
    final: Snapshot | None = None  # the cluster after the last cycle: the bound pods only


def run_trace(
    cluster: TraceCluster,
    order: Sequence[TracePod],
    batch: int,
    config: EngineConfig,
    progress: Progress | None = None,
) -> Run:
    """Pods arrive in `order`, `batch` per cycle; what its arrival cycle left unbound has failed."""
    run = Run()
    started = time.perf_counter()
    state = Snapshot(cluster.nodes, (), (), (cluster.queue,), START)
    memo = SnapshotMemo()  # carried from cycle to cycle, as `kai run` carries it
    held: dict[str, int] = {}  # bound pod -> GPU milli
    arrived = 0
    for first in range(0, len(order), batch):
        chunk = [
            cluster.arriving(pod, first + i) for i, pod in enumerate(order[first : first + batch])
        ]
        arrived += sum(pod.gpu_request_milli for pod in order[first : first + batch])
        state = dataclasses.replace(
            state,
            pods=state.pods + tuple(pod for pod, _ in chunk),
            pod_groups=state.pod_groups + tuple(group for _, group in chunk),
            now=START + timedelta(seconds=first + len(chunk)),
        )
        seconds, _, result = timed_cycle(state, config, memo)
        state = carried_out(state, result)
        _record(run, result, held, seconds)
        _hold(held, state, result)
        state, failed = without_pending(state)
        run.failed += failed
        run.samples.append(Sample(arrived, sum(held.values())))
        if progress is not None and _milestone(first, len(chunk), len(order)):
            progress(_progress_line(run, first + len(chunk), len(order), cluster.gpus))
    if sum(held.values()) != sum(gpu_milli(pod) for pod in state.pods):
        raise AssertionError("the GPUs counted as held differ from those of the bound pods")
    run.seconds = time.perf_counter() - started
    run.final = state
    return run


def _record(run: Run, result: CycleResult, held: Mapping[str, int], seconds: float) -> None:
    """The cycle's time, answer and moves, and the engine's bound on the state after it.

    The engine bounds what a cycle can place (`report.gpus_bound`: the free GPUs, or what
    the pending pods ask if less); with what ran before the cycle, that bounds the state
    after it, given the earlier cycles' placements (moves keep their GPUs).
    """
    report = result.report
    run.cycle_seconds.append(seconds)
    run.answers[report.answer] += 1
    run.ties += report.greedy_kept_on_tie
    run.less_stranded += report.greedy_kept_less_stranded
    run.statuses[report.status] += 1
    run.moved += len(result.evictions)
    if result.eviction_report is not None:
        run.cut_short.update(result.eviction_report.cut_short)
    run.bound_milli = None
    if report.status != "not-run":
        run.bound_milli = sum(held.values()) + int(report.gpus_bound * MILLI)


def carried_out(state: Snapshot, result: CycleResult) -> Snapshot:
    """The snapshot once the cycle's decisions took effect, a consolidation plan completed."""
    state = apply(state, result)
    if not result.pipelined:
        return state
    state = _bind_pipelined(state, result.pipelined)
    problems = overcommitted(state)
    if problems:
        raise AssertionError("the consolidation plan does not fit: " + "; ".join(problems))
    return state


def _bind_pipelined(state: Snapshot, pipelined: Sequence[PipelinedPod]) -> Snapshot:
    """Moved pods and the pods they made room for, bound where the plan pipelined them."""
    seats = {record.pod: record for record in pipelined}

    def seated(pod: Pod) -> Pod:
        seat = seats[pod.key]
        return dataclasses.replace(
            pod, phase=PodPhase.BOUND, node=seat.node, gpu_groups=seat.gpu_groups
        )

    pods = tuple(seated(pod) if pod.key in seats else pod for pod in state.pods)
    return dataclasses.replace(state, pods=pods)


def overcommitted(state: Snapshot) -> list[str]:
    """Nodes whose bound pods ask for more than they have: cpu, memory, pods, GPUs, device memory."""
    problems: list[str] = []
    for name, cap in initial_capacity(state.nodes, state.pods).items():
        left = {"cpu": cap.cpu, "memory": cap.memory, "pods": cap.pods, "GPUs": cap.whole_gpus}
        short = [kind for kind, amount in left.items() if amount < 0]
        short += [
            f"device {group}"
            for group, used in cap.shared.items()
            if used > cap.node.gpu_memory_mib
        ]
        if short:
            problems.append(f"{name}: {', '.join(short)}")
    return problems


def _hold(held: dict[str, int], state: Snapshot, result: CycleResult) -> None:
    """Count the GPUs of the pods the cycle bound or moved; moved pods are counted once."""
    placed = {b.pod for b in result.bindings} | {p.pod for p in result.pipelined}
    for key in {eviction.pod for eviction in result.evictions} - placed:
        del held[key]
    if placed:
        for pod in state.pods:
            if pod.key in placed:
                held[pod.key] = gpu_milli(pod)


def without_pending(state: Snapshot) -> tuple[Snapshot, int]:
    """The snapshot without its pending pods (they failed) and their PodGroups; how many failed."""
    bound = tuple(pod for pod in state.pods if pod.phase is PodPhase.BOUND)
    failed = len(state.pods) - len(bound)
    if not failed:
        return state, 0
    groups = {pod.group for pod in bound}
    kept = tuple(group for group in state.pod_groups if group.key in groups)
    return dataclasses.replace(state, pods=bound, pod_groups=kept), failed


def _milestone(first: int, size: int, total: int) -> bool:
    """Whether this cycle's arrivals cross a tenth of the total."""
    return (first * 10) // total != ((first + size) * 10) // total


def _progress_line(run: Run, done: int, total: int, cluster_gpus: int) -> str:
    allocated = run.samples[-1].allocated_milli / cluster_gpus / 10
    return (
        f"{done}/{total} arrived, {allocated:.2f}% of GPUs allocated, {run.failed} failed, "
        f"cycle median {statistics.median(run.cycle_seconds):.3f} s"
    )


# -- seeds, sides, the document ----------------------------------------------------------------


@dataclass(frozen=True)
class Setup:
    """What is run: the trace, the protocol's knobs and the engine's."""

    trace: str
    nodes: Sequence[TraceNode]
    pods: Sequence[TracePod]
    seeds: Sequence[int]
    tune: float
    batch: int
    consolidate: bool
    time_limit: float
    max_arrivals: int | None = None

    def configs(self) -> tuple[EngineConfig, EngineConfig]:
        """kai's cycle, and the same cycle with the solver off (the greedy pass only).

        kai's solves end on their work budget alone (`EngineConfig.reproducible`), as in
        `kai simulate`: a seed's course is then the same on a loaded machine as on a quiet
        one. With the wall clock ending them, seeds 42 of the default and `gpuspec33` lists
        took a solver answer in a run that shared the machine and none alone, and ended
        0.02-0.03 points apart."""
        evictions = (
            EvictionConfig() if self.consolidate else EvictionConfig(max_consolidation_preemptees=0)
        )
        return (
            EngineConfig(
                time_limit_seconds=self.time_limit, evictions=evictions, reproducible=True
            ),
            EngineConfig(time_limit_seconds=0, evictions=evictions),
        )


def measure(
    setup: Setup, published: Mapping[str, Mapping[str, float]], progress: Progress
) -> Document:
    """Every seed's arrivals packed by kai, then by its greedy pass, interleaved seed by seed."""
    started = time.perf_counter()
    cluster = TraceCluster(setup.nodes)
    kai_config, greedy_config = setup.configs()
    per_seed: list[Document] = []
    kai_runs: list[Run] = []
    greedy_runs: list[Run] = []
    for seed in setup.seeds:
        order = arrivals(setup.pods, cluster.gpus, setup.tune, seed)[: setup.max_arrivals]
        runs = []
        for side, config in (("kai", kai_config), ("greedy", greedy_config)):
            label = f"[seed {seed} {side}]"
            run = run_trace(cluster, order, setup.batch, config, _labelled(progress, label))
            progress(f"{label} done in {run.seconds:.1f} s")
            runs.append(run)
        kai_runs.append(runs[0])
        greedy_runs.append(runs[1])
        document = _seed_document(seed, len(order), runs[0], runs[1], cluster.gpus)
        document["packingBoundPct"] = packing_bound_at(order, runs[0].samples, setup.nodes)
        per_seed.append(document)
    return {
        "bench": "trace",
        "trace": setup.trace,
        "nodes": len(cluster.nodes),
        "gpus": cluster.gpus,
        "tune": setup.tune,
        "seeds": list(setup.seeds),
        "mode": "online" if setup.batch == 1 else "batch",
        "batch": setup.batch,
        "consolidate": setup.consolidate,
        "timeLimitSeconds": setup.time_limit,
        "allocatedPct": _mean_points([s["allocatedPct"] for s in per_seed]),
        "greedyAllocatedPct": _mean_points([s["greedyAllocatedPct"] for s in per_seed]),
        "boundPct": _mean_or_none([s["boundPct"] for s in per_seed]),
        "packingBoundPct": _mean_points([s["packingBoundPct"] for s in per_seed]),
        "movedPods": sum(run.moved for run in kai_runs),
        "greedyMovedPods": sum(run.moved for run in greedy_runs),
        "evictionSearchesCutShort": dict(sum((run.cut_short for run in kai_runs), Counter())),
        "cycleSeconds": summarize([t for run in kai_runs for t in run.cycle_seconds]),
        "greedyCycleSeconds": summarize([t for run in greedy_runs for t in run.cycle_seconds]),
        "seconds": round(time.perf_counter() - started, 1),
        "published": dict(published),
        "perSeed": per_seed,
        "loadAverage1m": round(os.getloadavg()[0], 2),
        "cpus": os.cpu_count(),
    }


def _labelled(progress: Progress, label: str) -> Progress:
    return lambda line: progress(f"{label} {line}")


def _seed_document(seed: int, arrived: int, kai: Run, greedy: Run, cluster_gpus: int) -> Document:
    return {
        "seed": seed,
        "arrivals": arrived,
        "allocatedPct": allocated_at(kai.samples, cluster_gpus),
        "greedyAllocatedPct": allocated_at(greedy.samples, cluster_gpus),
        "finalAllocatedPct": _pct(kai.samples[-1].allocated_milli, cluster_gpus),
        "greedyFinalAllocatedPct": _pct(greedy.samples[-1].allocated_milli, cluster_gpus),
        "boundPct": None if kai.bound_milli is None else _pct(kai.bound_milli, cluster_gpus),
        "failedPods": kai.failed,
        "greedyFailedPods": greedy.failed,
        "movedPods": kai.moved,
        "greedyMovedPods": greedy.moved,
        "evictionSearchesCutShort": dict(kai.cut_short),
        "greedyEvictionSearchesCutShort": dict(greedy.cut_short),
        "cycles": len(kai.cycle_seconds),
        "answers": dict(kai.answers),
        "greedyKeptOnTie": kai.ties,
        "greedyKeptLessStranded": kai.less_stranded,
        "solverStatuses": dict(kai.statuses),
        "cycleSeconds": summarize(kai.cycle_seconds),
        "greedyCycleSeconds": summarize(greedy.cycle_seconds),
        "seconds": round(kai.seconds, 1),
        "greedySeconds": round(greedy.seconds, 1),
    }


def _pct(milli: int, cluster_gpus: int) -> float:
    return round(milli / cluster_gpus / 10, 2)


def _mean_points(curves: Sequence[Mapping[str, float | None]]) -> dict[str, float | None]:
    return {point: _mean_or_none([curve[point] for curve in curves]) for point in curves[0]}


def _mean_or_none(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return round(statistics.mean(known), 2) if known and len(known) == len(values) else None


# -- output ------------------------------------------------------------------------------------


def format_table(document: Document) -> str:
    """The curve of each side and of each published policy, then the run's other numbers."""
    points = [str(p) for p in ARRIVED_POINTS]
    mode = f"{document['mode']} {document['batch']}" if document["mode"] == "batch" else "online"
    if document["consolidate"]:
        mode += " +consolidate"
    rows = [["policy", *(f"{p}%" for p in points)]]
    rows.append([f"kai ({mode})", *_cells(document["allocatedPct"], points)])
    rows.append([f"kai greedy pass ({mode})", *_cells(document["greedyAllocatedPct"], points)])
    for policy, curve in document["published"].items():
        rows.append([f"published {policy}", *_cells(curve, points)])
    rows.append(["bound: any placement (packing LP)", *_cells(document["packingBoundPct"], points)])
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = [
        "  ".join(
            cell.ljust(w) if i == 0 else cell.rjust(w)
            for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        )
        for row in rows
    ]
    lines.insert(1, "-" * len(lines[0]))
    cycle, greedy = document["cycleSeconds"], document["greedyCycleSeconds"]
    lines += [
        "",
        f"{document['trace']}: {document['nodes']} nodes, {document['gpus']} GPUs; tune "
        f"{document['tune']}, seeds {', '.join(map(str, document['seeds']))}; GPU allocation % "
        "by arrived workload % (mean over seeds)",
        f"engine's bound on the final state: {_cell(document['boundPct'])}%; moved pods: "
        f"{document['movedPods']} (greedy {document['greedyMovedPods']}); cycles whose eviction "
        f"search ran out of budget: {document['evictionSearchesCutShort'] or 'none'}",
        f"cycle s median {cycle['median']:.3f} p95 {cycle['p95']:.3f}; greedy median "
        f"{greedy['median']:.3f} p95 {greedy['p95']:.3f}; total {document['seconds']:.1f} s "
        f"(load average {document['loadAverage1m']} on {document['cpus']} CPUs)",
    ]
    for seed in document["perSeed"]:
        lines.append(
            f"  seed {seed['seed']}: {seed['arrivals']} arrivals, kai "
            f"{_cell(seed['allocatedPct']['100'])}/{_cell(seed['allocatedPct']['130'])}, greedy "
            f"{_cell(seed['greedyAllocatedPct']['100'])}/{_cell(seed['greedyAllocatedPct']['130'])} "
            f"at 100/130%; failed {seed['failedPods']} (greedy {seed['greedyFailedPods']}); "
            f"{seed['seconds']:.1f} s (greedy {seed['greedySeconds']:.1f} s)"
        )
    return "\n".join(lines)


def _cells(curve: Mapping[str, float | None], points: Sequence[str]) -> list[str]:
    return [_cell(curve.get(point)) for point in points]


def _cell(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# -- command line ------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse(argv)
    setup = Setup(
        trace=args.pods.stem,
        nodes=read_nodes(args.nodes),
        pods=read_pods(args.pods),
        seeds=args.seeds,
        tune=args.tune,
        batch=args.batch,
        consolidate=args.consolidate,
        time_limit=args.time_limit,
        max_arrivals=args.max_arrivals,
    )
    published = read_published(args.published, setup.trace, args.tune)
    document = measure(setup, published, _progress)
    print(json.dumps(document) if args.json else format_table(document))
    return 0


def parse_seeds(text: str) -> list[int]:
    """`42-51` (a range, both ends in) or `42,43` (a list), or a mix: `42-44,50`."""
    seeds: list[int] = []
    for part in text.split(","):
        low, dash, high = part.strip().partition("-")
        try:
            first, last = int(low), int(high if dash else low)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"seeds are N, N-M or a comma list of them, got {text!r}"
            ) from None
        if last < first:
            raise argparse.ArgumentTypeError(f"seed range {part!r} runs backwards")
        seeds += range(first, last + 1)
    return seeds


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="bench/trace.py",
        description="Pack the openb GPU-sharing trace with kai in the FGD paper's protocol.",
    )
    parser.add_argument("--nodes", type=Path, default=DEFAULT_NODES, help="node list CSV")
    parser.add_argument("--pods", type=Path, default=DEFAULT_PODS, help="pod list CSV")
    parser.add_argument(
        "--published", type=Path, default=DEFAULT_PUBLISHED, help="published results CSV"
    )
    parser.add_argument("--seeds", type=parse_seeds, default=parse_seeds("42-51"))
    parser.add_argument("--tune", type=positive_float, default=1.3, help="x the cluster's GPUs")
    parser.add_argument("--mode", choices=("online", "batch"), default="online")
    parser.add_argument("--batch", type=positive_int, help="arrivals per cycle in batch mode (100)")
    parser.add_argument(
        "--consolidate", action="store_true", help="let the engine move running pods"
    )
    parser.add_argument("--time-limit", type=float, default=1.0, help="solver seconds per cycle")
    parser.add_argument(
        "--max-arrivals",
        type=positive_int,
        help="stop after this many arrivals (timing a slow mode)",
    )
    parser.add_argument("--json", action="store_true", help="one JSON document on stdout")
    args = parser.parse_args(argv)
    if args.mode == "online":
        if args.batch not in (None, 1):
            parser.error("--batch is for --mode batch; online is one arrival per cycle")
        args.batch = 1
    elif args.batch is None:
        args.batch = 100
    if args.time_limit < 0:
        parser.error(f"--time-limit must be >= 0, got {args.time_limit}")
    return args


if __name__ == "__main__":
    sys.exit(main())
